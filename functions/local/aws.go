//go:build aws

package main

import "github.com/sluice-gateway/sluice/pkg/gateway/awscloud"

// openAWS opens SLUICE_BACKEND=aws: this binary is built with -tags aws (make
// run-aws), so it links the AWS SDK's storage clients.
var openAWS = awscloud.Open
