// Command moderations is the Lambda function that serves POST /v1/moderations
// and POST /moderations (streamed).
package main

import "github.com/sluice-gateway/sluice/pkg/gateway/lambdafn"

func main() { lambdafn.Serve("moderations") }
