package auth_test

import (
	"context"
	"encoding/json"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/sluice-gateway/sluice/pkg/gateway/gatewaytest"
	"github.com/sluice-gateway/sluice/pkg/store"
)

// olderRelease rewrites the gsi1 sort keys of the records in partition pk
// whose key is in keep, as releases before sortkey.Time wrote them
// (fixed-width RFC 3339).
func olderRelease(t *testing.T, records store.Records, pk, prefix string, keep func(store.Record) bool) {
	t.Helper()
	ctx := context.Background()
	page, err := records.Query(ctx, store.Query{Index: store.GSI1, PK: pk, SKPrefix: prefix, Limit: 100})
	if err != nil {
		t.Fatal(err)
	}
	for _, rec := range page.Records {
		if !keep(rec) {
			continue
		}
		rest := rec.GSI1.SK[len(prefix):]
		ns, err := strconv.ParseInt(rest[:19], 10, 64)
		if err != nil {
			t.Fatalf("sort key %q: %v", rec.GSI1.SK, err)
		}
		full, err := records.Get(ctx, rec.Key)
		if err != nil {
			t.Fatal(err)
		}
		full.GSI1.SK = prefix + time.Unix(0, ns).UTC().Format("2006-01-02T15:04:05.000000000Z") + rest[19:]
		if err := records.Update(ctx, full, store.Cond{Version: full.Version}); err != nil {
			t.Fatal(err)
		}
	}
}

// GET /team/list and GET /key/list keep creation order over records an
// older release stored, on both backends.
func TestListsKeepOrderOverOlderSortKeys(t *testing.T) {
	gatewaytest.Run(t, gatewaytest.Options{}, func(t *testing.T, g *gatewaytest.Gateway) {
		teams := []string{"team-c", "team-a", "team-b"}
		aliases := []string{"k3", "k1", "k2"}
		for i := range teams {
			g.NewTeam(map[string]any{"team_id": teams[i]})
			g.NewKey("team-c", map[string]any{"key_alias": aliases[i]})
			time.Sleep(2 * time.Millisecond) // team times are kept to the millisecond
		}
		older := func(names ...string) func(store.Record) bool {
			return func(rec store.Record) bool {
				var doc struct {
					TeamID   string `json:"team_id"`
					KeyAlias string `json:"key_alias"`
				}
				if err := json.Unmarshal(rec.Body, &doc); err != nil {
					t.Fatal(err)
				}
				if doc.KeyAlias != "" {
					return slices.Contains(names, doc.KeyAlias)
				}
				return slices.Contains(names, doc.TeamID)
			}
		}
		olderRelease(t, g.Backend.Records, "TEAMS", "", older(teams[0], teams[1]))
		olderRelease(t, g.Backend.Records, "TEAM#team-c", "KEY#", older(aliases[0], aliases[1]))

		resp := g.Do("GET", "/team/list", g.MasterKey, nil)
		var listed []struct {
			TeamID string `json:"team_id"`
		}
		if err := json.Unmarshal(resp.Body, &listed); resp.Status != 200 || err != nil {
			t.Fatalf("team/list = %d %s", resp.Status, resp.Body)
		}
		var got []string
		for _, tm := range listed {
			if slices.Contains(teams, tm.TeamID) {
				got = append(got, tm.TeamID)
			}
		}
		if diff := cmp.Diff(teams, got); diff != "" {
			t.Errorf("team/list, oldest first (-want +got):\n%s", diff)
		}

		resp = g.Do("GET", "/key/list?team_id=team-c", g.MasterKey, nil)
		var keys struct {
			Keys []struct {
				KeyAlias string `json:"key_alias"`
			} `json:"keys"`
		}
		if err := json.Unmarshal(resp.Body, &keys); resp.Status != 200 || err != nil {
			t.Fatalf("key/list = %d %s", resp.Status, resp.Body)
		}
		got = nil
		for _, k := range keys.Keys {
			got = append(got, k.KeyAlias)
		}
		if diff := cmp.Diff(aliases, got); diff != "" {
			t.Errorf("key/list, oldest first (-want +got):\n%s", diff)
		}
	})
}
