// Command file-delete is the Lambda function that serves DELETE
// /v1/files/{file_id}.
package main

import "github.com/sluice-gateway/sluice/pkg/gateway/lambdafn"

func main() { lambdafn.Serve("file-delete") }
