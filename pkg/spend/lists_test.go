package spend_test

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/sluice-gateway/sluice/pkg/gateway/gatewaytest"
)

// GET /team/list and /key/list show each team's and key's spend in its
// current budget period, as /team/info and /key/info do: with or without
// a budget.
func TestListsShowSpend(t *testing.T) {
	u := newUpstream(t, 0)
	gatewaytest.Run(t, options(u, nil), func(t *testing.T, g *gatewaytest.Gateway) {
		team := g.NewTeam(map[string]any{"team_alias": "spender", "max_budget": 10, "budget_duration": "1d"})
		key := g.NewKey(team, map[string]any{"key_alias": "k"})
		idle := g.NewTeam(map[string]any{"team_alias": "idle"})
		r := g.Do("POST", "/v1/chat/completions", key, chatWith(map[string]any{"model": "mock-gpt"}))
		if r.Status != 200 {
			t.Fatalf("mock chat: %d %s", r.Status, r.Body)
		}
		want := usageCost(t, r.Body, 1.5e-7, 6e-7)
		if want <= 0 {
			t.Fatalf("the call cost %v", want)
		}
		// The counter flushes after the call: wait until the key shows it.
		deadline := time.Now().Add(10 * time.Second)
		for {
			info := g.Do("GET", "/key/info", key, nil).JSON(t)["info"].(map[string]any)
			if near(info["spend"].(float64), want) || time.Now().After(deadline) {
				break
			}
			time.Sleep(50 * time.Millisecond)
		}

		var teams []map[string]any
		resp := g.Do("GET", "/team/list", g.MasterKey, nil)
		if resp.Status != 200 {
			t.Fatalf("team/list: %d %s", resp.Status, resp.Body)
		}
		if err := json.Unmarshal(resp.Body, &teams); err != nil {
			t.Fatal(err)
		}
		seen := 0
		for _, tm := range teams {
			switch tm["team_id"] {
			case team:
				seen++
				if s, ok := tm["spend"].(float64); !ok || !near(s, want) || tm["budget_reset_at"] == nil {
					t.Errorf("team/list shows the spender %v, want spend %v and a reset time", tm, want)
				}
			case idle:
				seen++
				if s, ok := tm["spend"].(float64); !ok || s != 0 {
					t.Errorf("team/list shows the idle team %v, want spend 0", tm)
				}
			}
		}
		if seen != 2 {
			t.Errorf("team/list %s lacks a team", resp.Body)
		}

		resp = g.Do("GET", "/key/list?team_id="+team, g.MasterKey, nil)
		if resp.Status != 200 {
			t.Fatalf("key/list: %d %s", resp.Status, resp.Body)
		}
		var page struct {
			Keys []map[string]any `json:"keys"`
		}
		if err := json.Unmarshal(resp.Body, &page); err != nil {
			t.Fatal(err)
		}
		if len(page.Keys) != 1 {
			t.Fatalf("key/list %s, want one key", resp.Body)
		}
		if s, ok := page.Keys[0]["spend"].(float64); !ok || !near(s, want) {
			t.Errorf("key/list shows %v, want spend %v", page.Keys[0], want)
		}
	})
}
