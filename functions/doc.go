// Package functions holds one main package per AWS Lambda function,
// functions/<name>/main.go, one per function of the route table and per job
// of the jobs table (pkg/server). Each main is one call,
// lambdafn.Serve("<name>"), the composition shared in pkg/gateway/lambdafn:
// the route table says which routes a function serves and whether they
// stream, the jobs table a job's trigger and handler; pkg/lambdaedge turns
// Lambda's events into requests, messages and runs. functions/local is not a
// Lambda function: it runs every route and every job in one local process.
//
// The tests of this package hold the functions to both tables and run each
// function on its sample events (events/<name>/*.json): in process through
// aws-lambda-go's handler path, and as a built bootstrap under AWS's Lambda
// Runtime Interface Emulator (aws-lambda-rie, pkg/lambdaedge/rie), as Lambda
// runs it — on the AWS adapters a batch runs from the SQS work queue on
// moto_server. The emulator returns a streamed answer whole, so that the
// streamed answers leave while their handler runs is checked under the
// Runtime API harness (pkg/lambdaedge/runtimeapi).
package functions
