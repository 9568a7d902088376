// Package functions holds one main package per AWS Lambda function,
// functions/<name>/main.go: each HTTP function's main is one call,
// lambdafn.Serve("<name>"), the composition shared in pkg/gateway/lambdafn;
// the scheduled files-sweep has a few lines of its own. The route table (pkg/server) says which routes a function serves and
// whether they stream; pkg/lambdaedge turns Lambda's events into requests and
// answers. functions/local is not a Lambda function: it runs every route in
// one local process.
//
// The tests of this package hold the functions to the route table and run
// each function on its sample events (events/<name>/*.json): in process
// through aws-lambda-go's handler path, and as a built bootstrap under the
// Runtime API harness (pkg/lambdaedge/runtimeapi), as Lambda runs it.
package functions
