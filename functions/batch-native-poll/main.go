// Command batch-native-poll is the scheduled Lambda function (EventBridge,
// every minute) that polls the open native batches (OpenAI's, Azure's
// batch APIs) and copies the results of those that ended: the jobs table
// (pkg/server) declares it; the local process polls in-process instead.
package main

import "github.com/sluice-gateway/sluice/pkg/gateway/lambdafn"

func main() { lambdafn.Serve("batch-native-poll") }
