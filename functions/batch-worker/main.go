// Command batch-worker is the SQS-triggered Lambda function that plans, runs
// and finalizes batches (pkg/batches): the jobs table (pkg/server) declares
// it; the local process consumes its work queue in-process instead.
package main

import "github.com/sluice-gateway/sluice/pkg/gateway/lambdafn"

func main() { lambdafn.Serve("batch-worker") }
