// Command ui is the Lambda function that serves the admin page, GET /ui and
// its assets (embedded; buffered answers).
package main

import "github.com/sluice-gateway/sluice/pkg/gateway/lambdafn"

func main() { lambdafn.Serve("ui") }
