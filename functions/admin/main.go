// Command admin is the Lambda function that serves the team and key endpoints
// (/team/..., /key/...).
package main

import "github.com/sluice-gateway/sluice/pkg/gateway/lambdafn"

func main() { lambdafn.Serve("admin") }
