// Command files-list is the Lambda function that serves GET /v1/files.
package main

import "github.com/sluice-gateway/sluice/pkg/gateway/lambdafn"

func main() { lambdafn.Serve("files-list") }
