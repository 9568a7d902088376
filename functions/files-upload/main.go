// Command files-upload is the Lambda function that serves POST /v1/files.
package main

import "github.com/sluice-gateway/sluice/pkg/gateway/lambdafn"

func main() { lambdafn.Serve("files-upload") }
