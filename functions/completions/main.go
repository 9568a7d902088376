// Command completions is the Lambda function that serves POST
// /v1/completions (streamed).
package main

import "github.com/sluice-gateway/sluice/pkg/gateway/lambdafn"

func main() { lambdafn.Serve("completions") }
