package server_test

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/sluice-gateway/sluice/pkg/gateway/gatewaytest"
)

type keyList struct {
	Keys []struct {
		Token     string  `json:"token"`
		KeyAlias  string  `json:"key_alias"`
		KeyName   string  `json:"key_name"`
		TeamID    string  `json:"team_id"`
		Expires   *string `json:"expires"`
		CreatedAt string  `json:"created_at"`
	} `json:"keys"`
	TotalCount  int `json:"total_count"`
	CurrentPage int `json:"current_page"`
	TotalPages  int `json:"total_pages"`
}

func listKeys(t *testing.T, g *gatewaytest.Gateway, key, query string) keyList {
	t.Helper()
	resp := g.Do("GET", "/key/list"+query, key, nil)
	if resp.Status != 200 {
		t.Fatalf("key/list%s = %d %s", query, resp.Status, resp.Body)
	}
	var l keyList
	if err := json.Unmarshal(resp.Body, &l); err != nil {
		t.Fatal(err)
	}
	return l
}

// GET /key/list lists a team's keys (alias, created, expiry; never the key
// itself) in the order they were made: the master key any team's, a team
// key its own team's only; pages by page and size.
func TestKeyList(t *testing.T) {
	gatewaytest.Run(t, gatewaytest.Options{}, func(t *testing.T, g *gatewaytest.Gateway) {
		team := g.NewTeam(map[string]any{"team_alias": "search"})
		other := g.NewTeam(map[string]any{"team_alias": "other"})
		var raw []string
		for _, alias := range []string{"a", "b", "c"} {
			resp := g.Do("POST", "/key/generate", g.MasterKey, map[string]any{"team_id": team, "key_alias": alias, "duration": "1d"})
			if resp.Status != 200 {
				t.Fatalf("key/generate = %d %s", resp.Status, resp.Body)
			}
			raw = append(raw, resp.JSON(t)["key"].(string))
		}
		otherKey := g.NewKey(other, map[string]any{"key_alias": "x"})

		all := listKeys(t, g, g.MasterKey, "?team_id="+team)
		var aliases []string
		for _, k := range all.Keys {
			aliases = append(aliases, k.KeyAlias)
			if k.TeamID != team || len(k.Token) != 64 || !strings.HasPrefix(k.KeyName, "sk-...") || k.Expires == nil || k.CreatedAt == "" {
				t.Errorf("key %+v", k)
			}
		}
		if diff := cmp.Diff([]string{"a", "b", "c"}, aliases); diff != "" || all.TotalCount != 3 || all.TotalPages != 1 || all.CurrentPage != 1 {
			t.Errorf("list (-want +got):\n%s%+v", diff, all)
		}
		resp := g.Do("GET", "/key/list?team_id="+team, g.MasterKey, nil)
		for _, k := range raw {
			if strings.Contains(string(resp.Body), k) {
				t.Errorf("key/list shows a key itself: %s", resp.Body)
			}
		}

		// A team key: its own team, with or without team_id; no other.
		if own := listKeys(t, g, raw[0], ""); own.TotalCount != 3 {
			t.Errorf("a team key's own list: %+v", own)
		}
		if own := listKeys(t, g, raw[0], "?team_id="+team); own.TotalCount != 3 {
			t.Errorf("a team key's own list by id: %+v", own)
		}
		if resp := g.Do("GET", "/key/list?team_id="+other, raw[0], nil); resp.Status != 404 {
			t.Errorf("a team key listing another team = %d %s", resp.Status, resp.Body)
		}
		if l := listKeys(t, g, otherKey, ""); l.TotalCount != 1 || l.Keys[0].KeyAlias != "x" {
			t.Errorf("the other team's list: %+v", l)
		}

		// Pages.
		p2 := listKeys(t, g, g.MasterKey, "?team_id="+team+"&size=2&page=2")
		if len(p2.Keys) != 1 || p2.Keys[0].KeyAlias != "c" || p2.TotalCount != 3 || p2.TotalPages != 2 || p2.CurrentPage != 2 {
			t.Errorf("page 2 of 2: %+v", p2)
		}

		for _, tc := range []struct {
			query, code string
			status      int
		}{
			{"", "missing_required_parameter", 400},
			{"?team_id=team-nosuch", "", 404},
			{"?team_id=" + team + "&size=0", "invalid_value", 400},
			{"?team_id=" + team + "&size=1001", "invalid_value", 400},
			{"?team_id=" + team + "&page=x", "invalid_value", 400},
		} {
			resp := g.Do("GET", "/key/list"+tc.query, g.MasterKey, nil)
			if resp.Status != tc.status || (tc.code != "" && resp.ErrorCode(t) != tc.code) {
				t.Errorf("key/list%s = %d %s", tc.query, resp.Status, resp.Body)
			}
		}
		if resp := g.Do("GET", "/key/list?team_id="+team, "", nil); resp.Status != 401 {
			t.Errorf("key/list without a key = %d", resp.Status)
		}
	})
}
