package server_test

import (
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/sluice-gateway/sluice/pkg/gateway/gatewaytest"
	"github.com/sluice-gateway/sluice/pkg/store/storetest"
)

func TestFoundationEndToEnd(t *testing.T) {
	cfg := "model_list:\n" +
		"  - model_name: small\n    litellm_params: {model: openai/text-embedding-3-small}\n" +
		"  - model_name: large\n    litellm_params: {model: openai/text-embedding-3-large}\n"
	gatewaytest.Run(t, gatewaytest.Options{Config: cfg}, func(t *testing.T, g *gatewaytest.Gateway) {
		for _, path := range []string{"/health/liveliness", "/health/readiness"} {
			resp := g.Do("GET", path, "", nil)
			if resp.Status != 200 || resp.JSON(t)["status"] != "healthy" {
				t.Errorf("GET %s = %d %s", path, resp.Status, resp.Body)
			}
		}

		resp := g.Do("POST", "/team/new", g.MasterKey, map[string]any{"team_alias": "search", "models": []string{"small"}, "rpm_limit": 10})
		if resp.Status != 200 {
			t.Fatalf("team/new = %d %s", resp.Status, resp.Body)
		}
		team := resp.JSON(t)
		teamID := team["team_id"].(string)
		if !strings.HasPrefix(teamID, "team-") || team["team_alias"] != "search" || team["created_at"] == nil {
			t.Errorf("team = %v", team)
		}

		resp = g.Do("POST", "/key/generate", g.MasterKey, map[string]any{"team_id": teamID, "key_alias": "k1", "duration": "30d"})
		if resp.Status != 200 {
			t.Fatalf("key/generate = %d %s", resp.Status, resp.Body)
		}
		gen := resp.JSON(t)
		key, token := gen["key"].(string), gen["token"].(string)
		if !strings.HasPrefix(key, "sk-") || len(key) != 46 || len(token) != 64 || gen["expires"] == nil {
			t.Errorf("generated = %v", gen)
		}

		resp = g.Do("GET", "/key/info", key, nil)
		info := resp.JSON(t)
		if resp.Status != 200 || info["key"] != token || strings.Contains(string(resp.Body), key) {
			t.Errorf("key/info = %d %s", resp.Status, resp.Body)
		}
		if resp := g.Do("GET", "/key/info?key="+key, g.MasterKey, nil); resp.Status != 200 {
			t.Errorf("admin key/info = %d", resp.Status)
		}

		resp = g.Do("GET", "/v1/models", key, nil)
		if resp.Status != 200 || !strings.Contains(string(resp.Body), `"small"`) || strings.Contains(string(resp.Body), `"large"`) {
			t.Errorf("/v1/models for a key limited to small = %s", resp.Body)
		}

		checkRefusals(t, g, key, teamID)
		if resp := g.Do("DELETE", "/team/new", g.MasterKey, nil); !strings.Contains(resp.Header.Get("Allow"), "POST") {
			t.Errorf("405 Allow = %q", resp.Header.Get("Allow"))
		}

		resp = g.Do("GET", "/team/info?team_id="+teamID, key, nil)
		if resp.Status != 200 || resp.JSON(t)["team_id"] != teamID {
			t.Errorf("own team/info = %d %s", resp.Status, resp.Body)
		}
		resp = g.Do("GET", "/team/list", g.MasterKey, nil)
		if resp.Status != 200 || !strings.Contains(string(resp.Body), teamID) {
			t.Errorf("team/list = %d %s", resp.Status, resp.Body)
		}

		// A second key of the team may not read the first.
		other := g.NewKey(teamID, nil)
		if resp := g.Do("GET", "/key/info?key="+token, other, nil); resp.Status != http.StatusNotFound {
			t.Errorf("key/info of a sibling key = %d", resp.Status)
		}

		resp = g.Do("POST", "/key/delete", g.MasterKey, map[string]any{"keys": []string{key}})
		if resp.Status != 200 || !strings.Contains(string(resp.Body), key) {
			t.Fatalf("key/delete = %d %s", resp.Status, resp.Body)
		}
		if resp := g.Do("GET", "/key/info", key, nil); resp.Status != 401 {
			t.Errorf("deleted key answers %d, want 401", resp.Status)
		}
		if resp := g.Do("POST", "/key/delete", g.MasterKey, map[string]any{"keys": []string{key}}); resp.Status != 404 {
			t.Errorf("deleting a deleted key = %d, want 404", resp.Status)
		}
		if resp := g.Do("GET", "/key/info", other, nil); resp.Status != 200 {
			t.Errorf("the sibling key stopped working: %d", resp.Status)
		}
	})
}

// checkRefusals: each kind of bad request the foundation refuses answers
// its status and code, with a request id; key is a team key of teamID.
func checkRefusals(t *testing.T, g *gatewaytest.Gateway, key, teamID string) {
	for _, tc := range []struct {
		name, method, path, key string
		body                    any
		status                  int
		code                    string
	}{
		{"no key", "GET", "/key/info", "", nil, 401, "invalid_api_key"},
		{"unknown key", "GET", "/key/info", "sk-unknown", nil, 401, "invalid_api_key"},
		{"team key on admin route", "POST", "/team/new", key, map[string]any{}, 403, "permission_denied"},
		{"team key lists teams", "GET", "/team/list", key, nil, 403, "permission_denied"},
		{"unknown route", "GET", "/v1/nothing", key, nil, 404, "not_found"},
		{"wrong method", "DELETE", "/team/new", g.MasterKey, nil, 405, "method_not_allowed"},
		{"malformed JSON", "POST", "/team/new", g.MasterKey, `{"team_alias":`, 400, "invalid_json"},
		{"wrong type", "POST", "/team/new", g.MasterKey, `{"rpm_limit":"ten"}`, 400, "invalid_value"},
		{"too large", "POST", "/team/new", g.MasterKey, `{"team_alias":"` + strings.Repeat("x", 11<<20) + `"}`, 413, "payload_too_large"},
		{"duplicate team", "POST", "/team/new", g.MasterKey, map[string]any{"team_id": teamID}, 409, "conflict"},
		{"reserved team", "POST", "/team/new", g.MasterKey, map[string]any{"team_id": "admin"}, 400, "invalid_value"},
		{"key without team", "POST", "/key/generate", g.MasterKey, map[string]any{}, 400, "missing_required_parameter"},
		{"key for unknown team", "POST", "/key/generate", g.MasterKey, map[string]any{"team_id": "nope"}, 400, "invalid_value"},
		{"bad duration", "POST", "/key/generate", g.MasterKey, map[string]any{"team_id": teamID, "duration": "3 weeks"}, 400, "invalid_value"},
		{"other team's info", "GET", "/team/info?team_id=someone-else", key, nil, 404, "not_found"},
		{"dot segments", "GET", "/v1/../key/info", key, nil, 400, "invalid_value"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			resp := g.Do(tc.method, tc.path, tc.key, tc.body)
			if resp.Status != tc.status || resp.ErrorCode(t) != tc.code {
				t.Errorf("%s %s = %d %s, want %d %s", tc.method, tc.path, resp.Status, resp.Body, tc.status, tc.code)
			}
			if id := resp.Header.Get("X-Request-Id"); !strings.HasPrefix(id, "req_") {
				t.Errorf("x-request-id = %q", id)
			}
		})
	}
}

// TestAdmissionAtTheEdge: every keyed route admits its caller against the
// key's and team's limits before the handler reads the body, so the limit
// check comes before the model check (a forbidden model over the rpm limit
// is a 429, not a 403) and a refused request's body is never read.
func TestAdmissionAtTheEdge(t *testing.T) {
	cfg := "model_list:\n" +
		"  - model_name: small\n    litellm_params: {model: openai/text-embedding-3-small}\n" +
		"  - model_name: large\n    litellm_params: {model: openai/text-embedding-3-large}\n"
	gatewaytest.Run(t, gatewaytest.Options{Config: cfg}, func(t *testing.T, g *gatewaytest.Gateway) {
		storetest.WithinOneLimitWindow(t, 10*time.Second)
		team := g.NewTeam(map[string]any{"team_alias": "limited"})
		key := g.NewKey(team, map[string]any{"models": []string{"small"}, "rpm_limit": 2})
		if resp := g.Do("GET", "/key/info", key, nil); resp.Status != 200 {
			t.Fatalf("first request: %d %s", resp.Status, resp.Body)
		}
		if resp := g.Do("POST", "/v1/embeddings", key, `{"model":"large","input":"x"}`); resp.Status != 403 {
			t.Errorf("forbidden model within the limit: %d %s", resp.Status, resp.Body)
		}
		resp := g.Do("POST", "/v1/embeddings", key, `{"model":"large","input":"x"}`)
		if resp.Status != 429 || resp.ErrorCode(t) != "rate_limit_exceeded" || resp.Header.Get("Retry-After") == "" {
			t.Errorf("forbidden model over the limit: %d %s", resp.Status, resp.Body)
		}

		// A body over the JSON limit: the 429 comes first, it is never read
		// (reading it would be a 413).
		big := strings.NewReader(`{"model":"small","input":"` + strings.Repeat("x", 11<<20) + `"}`)
		req, _ := http.NewRequest("POST", g.URL+"/v1/embeddings", big)
		req.Header.Set("Authorization", "Bearer "+key)
		r, err := g.Client.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		r.Body.Close()
		if r.StatusCode != 429 {
			t.Errorf("refused before the body: %d", r.StatusCode)
		}

		// The master key has no limits.
		for range 3 {
			if resp := g.Do("GET", "/key/info?key="+key, g.MasterKey, nil); resp.Status != 200 {
				t.Errorf("master key: %d", resp.Status)
			}
		}
	})
}
