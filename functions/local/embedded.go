//go:build !aws

package main

import "github.com/sluice-gateway/sluice/pkg/gateway"

// openAWS is nil: the local process runs on its embedded storage and links
// none of the AWS SDK's storage clients, whose packages build megabytes of
// schema and endpoint tables at init that the garbage collector would scan
// every cycle (build with -tags aws for SLUICE_BACKEND=aws: see aws.go).
var openAWS gateway.OpenCloud
