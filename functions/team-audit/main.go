// Command team-audit is the Lambda function that serves GET /team/{team_id}/audit (buffered):
// the team's audit trail of callback changes.
package main

import "github.com/sluice-gateway/sluice/pkg/gateway/lambdafn"

func main() { lambdafn.Serve("team-audit") }
