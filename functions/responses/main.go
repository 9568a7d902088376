// Command responses is the Lambda function that serves POST /v1/responses
// (streamed).
package main

import "github.com/sluice-gateway/sluice/pkg/gateway/lambdafn"

func main() { lambdafn.Serve("responses") }
