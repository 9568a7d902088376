package spend_test

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/sluice-gateway/sluice/pkg/gateway/gatewaytest"
)

// budgetFields is what an info route shows of a budget, with the spend.
func budgetFields(t *testing.T, info map[string]any) map[string]any {
	t.Helper()
	out := map[string]any{}
	for _, f := range []string{"spend", "max_budget", "budget_duration", "soft_budget"} {
		out[f] = info[f]
	}
	if _, ok := info["budget_reset_at"]; !ok {
		t.Errorf("no budget_reset_at in %v", info)
	}
	return out
}

// The budget fields are set on /key/generate, /key/update, /team/new and
// /team/update, shown by /key/info and /team/info with the spend and the
// reset time, and enforced as set: a budget lowered under the spend
// refuses, one lifted admits.
func TestBudgetFieldsAreSetUpdatedAndShown(t *testing.T) {
	u := newUpstream(t, 0)
	gatewaytest.Run(t, options(u, nil), func(t *testing.T, g *gatewaytest.Gateway) {
		team := g.NewTeam(map[string]any{"max_budget": 5, "budget_duration": "30d", "soft_budget": 4})
		key := g.NewKey(team, map[string]any{"max_budget": 1, "budget_duration": "1d", "soft_budget": 0.5})
		if r := g.Do("POST", "/v1/chat/completions", key, chat); r.Status != 200 {
			t.Fatalf("chat: %d %s", r.Status, r.Body)
		}
		waitReport(t, g, key, "api_key", 1)

		keyInfo := func() map[string]any {
			r := g.Do("GET", "/key/info", key, nil)
			if r.Status != 200 {
				t.Fatalf("/key/info: %d %s", r.Status, r.Body)
			}
			return r.JSON(t)["info"].(map[string]any)
		}
		teamInfo := func() map[string]any {
			r := g.Do("GET", "/team/info?team_id="+team, g.MasterKey, nil)
			if r.Status != 200 {
				t.Fatalf("/team/info: %d %s", r.Status, r.Body)
			}
			return r.JSON(t)["team_info"].(map[string]any)
		}
		wantKey := map[string]any{"spend": callCost, "max_budget": 1.0, "budget_duration": "1d", "soft_budget": 0.5}
		wantTeam := map[string]any{"spend": callCost, "max_budget": 5.0, "budget_duration": "30d", "soft_budget": 4.0}
		approx := cmp.Comparer(near)
		ki, ti := keyInfo(), teamInfo()
		if d := cmp.Diff(wantKey, budgetFields(t, ki), approx); d != "" {
			t.Errorf("/key/info (-want +got):\n%s", d)
		}
		if d := cmp.Diff(wantTeam, budgetFields(t, ti), approx); d != "" {
			t.Errorf("/team/info (-want +got):\n%s", d)
		}
		// The periods count from creation: a day's, and 30 days'.
		for what, c := range map[string]struct {
			info   map[string]any
			period time.Duration
		}{"key": {ki, 24 * time.Hour}, "team": {ti, 30 * 24 * time.Hour}} {
			reset, err := time.Parse(time.RFC3339Nano, c.info["budget_reset_at"].(string))
			if left := time.Until(reset); err != nil || left <= c.period-time.Minute || left > c.period {
				t.Errorf("%s budget_reset_at %v (%v), want %v from now", what, c.info["budget_reset_at"], err, c.period)
			}
		}

		// Lowered to exactly what was spent: refused (LiteLLM's spend >=
		// max_budget), by the key's and then by the team's budget — before
		// the stored spend is read again too, while the call's cost is
		// still summed in this process.
		if r := g.Do("POST", "/key/update", g.MasterKey, map[string]any{"key": key, "max_budget": callCost, "budget_duration": "1h", "soft_budget": nil}); r.Status != 200 {
			t.Fatalf("/key/update: %d %s", r.Status, r.Body)
		}
		overBudget(t, "the key's budget lowered", g.Do("POST", "/v1/chat/completions", key, chat))
		wantKey = map[string]any{"spend": callCost, "max_budget": callCost, "budget_duration": "1h", "soft_budget": nil}
		if d := cmp.Diff(wantKey, budgetFields(t, keyInfo()), approx); d != "" {
			t.Errorf("/key/info after /key/update (-want +got):\n%s", d)
		}
		if r := g.Do("POST", "/key/update", g.MasterKey, map[string]any{"key": key, "max_budget": nil}); r.Status != 200 {
			t.Fatalf("/key/update: %d %s", r.Status, r.Body)
		}
		if r := g.Do("POST", "/team/update", g.MasterKey, map[string]any{"team_id": team, "max_budget": callCost, "budget_duration": "1h"}); r.Status != 200 {
			t.Fatalf("/team/update: %d %s", r.Status, r.Body)
		}
		overBudget(t, "the team's budget lowered", g.Do("POST", "/v1/chat/completions", key, chat))
		wantTeam = map[string]any{"spend": callCost, "max_budget": callCost, "budget_duration": "1h", "soft_budget": 4.0}
		if d := cmp.Diff(wantTeam, budgetFields(t, teamInfo()), approx); d != "" {
			t.Errorf("/team/info after /team/update (-want +got):\n%s", d)
		}
		if r := g.Do("POST", "/team/update", g.MasterKey, map[string]any{"team_id": team, "max_budget": nil}); r.Status != 200 {
			t.Fatalf("/team/update: %d %s", r.Status, r.Body)
		}
		if r := g.Do("POST", "/v1/chat/completions", key, chat); r.Status != 200 {
			t.Errorf("both budgets lifted: %d %s", r.Status, r.Body)
		}
		// A duration sluice does not know is refused, naming it.
		for _, path := range []string{"/key/update", "/team/update"} {
			body := map[string]any{"key": key, "team_id": team, "budget_duration": "fortnight"}
			if r := g.Do("POST", path, g.MasterKey, body); r.Status != 400 {
				t.Errorf("%s budget_duration fortnight: %d %s, want 400", path, r.Status, r.Body)
			}
		}
	})
}
