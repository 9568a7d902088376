// Command batch-cancel is the Lambda function that serves POST /v1/batches/{batch_id}/cancel.
package main

import "github.com/sluice-gateway/sluice/pkg/gateway/lambdafn"

func main() { lambdafn.Serve("batch-cancel") }
