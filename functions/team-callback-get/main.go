// Command team-callback-get is the Lambda function that serves GET /team/{team_id}/callback (buffered):
// a team's logging callbacks, secrets masked.
package main

import "github.com/sluice-gateway/sluice/pkg/gateway/lambdafn"

func main() { lambdafn.Serve("team-callback-get") }
