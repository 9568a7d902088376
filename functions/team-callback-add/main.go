// Command team-callback-add is the Lambda function that serves POST /team/{team_id}/callback (buffered):
// adds a logging callback to a team, its secrets sealed.
package main

import "github.com/sluice-gateway/sluice/pkg/gateway/lambdafn"

func main() { lambdafn.Serve("team-callback-add") }
