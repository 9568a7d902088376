// Command callback-delivery is the SQS-triggered Lambda function that
// delivers log events to the logging callbacks: the delivery queue, fed by
// the events topic, invokes it with batches of messages (the jobs table in
// pkg/server declares it; the local process consumes the same queue
// in-process instead).
package main

import "github.com/sluice-gateway/sluice/pkg/gateway/lambdafn"

func main() { lambdafn.Serve("callback-delivery") }
