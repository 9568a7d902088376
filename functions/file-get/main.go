// Command file-get is the Lambda function that serves GET /v1/files/{file_id}.
package main

import "github.com/sluice-gateway/sluice/pkg/gateway/lambdafn"

func main() { lambdafn.Serve("file-get") }
