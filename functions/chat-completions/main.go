// Command chat-completions is the Lambda function that serves POST
// /v1/chat/completions and POST /chat/completions (streamed).
package main

import "github.com/sluice-gateway/sluice/pkg/gateway/lambdafn"

func main() { lambdafn.Serve("chat-completions") }
