// Command messages is the Lambda function that serves POST /v1/messages
// (streamed) and POST /v1/messages/count_tokens: Anthropic's Messages API.
package main

import "github.com/sluice-gateway/sluice/pkg/gateway/lambdafn"

func main() { lambdafn.Serve("messages") }
