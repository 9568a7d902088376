// Command models is the Lambda function that serves GET /v1/models.
package main

import "github.com/sluice-gateway/sluice/pkg/gateway/lambdafn"

func main() { lambdafn.Serve("models") }
