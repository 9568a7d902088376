// Command files-sweep is the scheduled Lambda function (EventBridge, hourly)
// that finishes what file expiry and deletion leave behind: the jobs table
// (pkg/server) declares it; the local process sweeps in-process instead.
package main

import "github.com/sluice-gateway/sluice/pkg/gateway/lambdafn"

func main() { lambdafn.Serve("files-sweep") }
