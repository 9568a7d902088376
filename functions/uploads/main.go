// Command uploads is the Lambda function that serves the four Uploads API
// operations under /v1/uploads.
package main

import "github.com/sluice-gateway/sluice/pkg/gateway/lambdafn"

func main() { lambdafn.Serve("uploads") }
