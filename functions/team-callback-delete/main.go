// Command team-callback-delete is the Lambda function that serves DELETE
// /team/{team_id}/callback/{callback_name} (buffered).
package main

import "github.com/sluice-gateway/sluice/pkg/gateway/lambdafn"

func main() { lambdafn.Serve("team-callback-delete") }
