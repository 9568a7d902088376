// Command batch-get is the Lambda function that serves GET /v1/batches/{batch_id}.
package main

import "github.com/sluice-gateway/sluice/pkg/gateway/lambdafn"

func main() { lambdafn.Serve("batch-get") }
