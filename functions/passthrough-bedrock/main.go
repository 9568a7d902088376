// Command passthrough-bedrock is the Lambda function that serves the /bedrock
// passthrough prefix, every method (streamed).
package main

import "github.com/sluice-gateway/sluice/pkg/gateway/lambdafn"

func main() { lambdafn.Serve("passthrough-bedrock") }
