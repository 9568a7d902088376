package server_test

import (
	"testing"
	"time"

	"github.com/sluice-gateway/sluice/pkg/gateway/gatewaytest"
	"github.com/sluice-gateway/sluice/pkg/store/storetest"
)

// TestFilesCountAgainstTheRPMLimit: the Files and Uploads APIs are calls
// like any other, counted against the key's rpm_limit.
func TestFilesCountAgainstTheRPMLimit(t *testing.T) {
	gatewaytest.Run(t, gatewaytest.Options{}, func(t *testing.T, g *gatewaytest.Gateway) {
		storetest.WithinOneLimitWindow(t, 10*time.Second)
		team := g.NewTeam(map[string]any{"team_alias": "files"})
		key := g.NewKey(team, map[string]any{"rpm_limit": 2})
		for range 2 {
			if resp := g.Do("GET", "/v1/files", key, nil); resp.Status != 200 {
				t.Fatalf("within the limit: %d %s", resp.Status, resp.Body)
			}
		}
		resp := g.Do("POST", "/v1/uploads", key, map[string]any{"filename": "a.jsonl", "purpose": "batch", "bytes": 10, "mime_type": "text/jsonl"})
		if resp.Status != 429 || resp.ErrorCode(t) != "rate_limit_exceeded" {
			t.Errorf("an upload over the limit: %d %s", resp.Status, resp.Body)
		}
	})
}
