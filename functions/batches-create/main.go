// Command batches-create is the Lambda function that serves POST /v1/batches.
package main

import "github.com/sluice-gateway/sluice/pkg/gateway/lambdafn"

func main() { lambdafn.Serve("batches-create") }
