// Command team-disable-logging is the Lambda function that serves POST
// /team/{team_id}/disable_logging (buffered): removes every callback of a team.
package main

import "github.com/sluice-gateway/sluice/pkg/gateway/lambdafn"

func main() { lambdafn.Serve("team-disable-logging") }
