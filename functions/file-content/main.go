// Command file-content is the Lambda function that serves GET
// /v1/files/{file_id}/content (streamed).
package main

import "github.com/sluice-gateway/sluice/pkg/gateway/lambdafn"

func main() { lambdafn.Serve("file-content") }
