// Command batch-sweeper is the scheduled Lambda function (EventBridge, every
// 5 minutes) that expires batches past their window and resends what stuck
// batches lost: the jobs table (pkg/server) declares it; the local process
// sweeps in-process instead.
package main

import "github.com/sluice-gateway/sluice/pkg/gateway/lambdafn"

func main() { lambdafn.Serve("batch-sweeper") }
