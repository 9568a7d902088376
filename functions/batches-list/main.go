// Command batches-list is the Lambda function that serves GET /v1/batches.
package main

import "github.com/sluice-gateway/sluice/pkg/gateway/lambdafn"

func main() { lambdafn.Serve("batches-list") }
