// Command passthrough-vertex-ai is the Lambda function that serves the
// /vertex-ai (and /vertex_ai) passthrough prefix, every method (streamed).
package main

import "github.com/sluice-gateway/sluice/pkg/gateway/lambdafn"

func main() { lambdafn.Serve("passthrough-vertex-ai") }
