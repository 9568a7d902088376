// Command health is the Lambda function that serves the health checks, GET
// /health/liveliness and GET /health/readiness.
package main

import "github.com/sluice-gateway/sluice/pkg/gateway/lambdafn"

func main() { lambdafn.Serve("health") }
