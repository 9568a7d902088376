package auth

import (
	"context"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/sluice-gateway/sluice/pkg/store"
	"github.com/sluice-gateway/sluice/pkg/store/aws/awstest"
	"github.com/sluice-gateway/sluice/pkg/store/local"
	"github.com/sluice-gateway/sluice/pkg/store/sortkey"
)

// backends are the two storage backends, embedded and AWS (the latter
// against moto_server when SLUICE_TEST_AWS_ENDPOINT is set, else skipped).
var backends = []struct {
	name string
	open func(t *testing.T) *store.Backend
}{
	{"local", func(t *testing.T) *store.Backend {
		b, err := local.Open(t.TempDir(), local.Options{})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { b.Close() })
		return b
	}},
	{"aws", func(t *testing.T) *store.Backend { return awstest.Backend(t) }},
}

// toLegacy rewrites a record's gsi1 sort key as auth wrote it before
// sortkey.Time: what a store holds from an older release.
func toLegacy(t *testing.T, records store.Records, key store.Key, prefix string, created time.Time) {
	t.Helper()
	ctx := context.Background()
	rec, err := records.Get(ctx, key)
	if err != nil {
		t.Fatal(err)
	}
	_, id, _ := cutAfterTime(rec.GSI1.SK, prefix)
	rec.GSI1.SK = prefix + created.UTC().Format(legacyTimeLayout) + id
	if err := records.Update(ctx, rec, store.Cond{Version: rec.Version}); err != nil {
		t.Fatal(err)
	}
}

// cutAfterTime splits a current sort key into its time and the rest.
func cutAfterTime(sk, prefix string) (string, string, bool) {
	if len(sk) < len(prefix)+19 {
		return "", "", false
	}
	return sk[len(prefix) : len(prefix)+19], sk[len(prefix)+19:], true
}

// TestLegacySortKeysAreMigrated: teams and keys stored with the legacy
// time form list in creation order among newer ones, and are left in the
// current form, on both backends.
func TestLegacySortKeysAreMigrated(t *testing.T) {
	for _, b := range backends {
		t.Run(b.name, func(t *testing.T) {
			backend := b.open(t)
			clk := &clock{now: time.Date(2026, 11, 1, 9, 0, 0, 0, time.UTC)}
			s, err := NewService(backend.Records, backend.Limiter, "sk-master", Options{Now: clk.Now})
			if err != nil {
				t.Fatal(err)
			}
			ctx := context.Background()
			var teams, tokens []string
			var created []time.Time
			for _, id := range []string{"team-c", "team-a", "team-b"} {
				if _, err := s.CreateTeam(ctx, NewTeam{}, id); err != nil {
					t.Fatal(err)
				}
				k, err := s.GenerateKey(ctx, NewKeyRequest{TeamID: "team-c"}, "admin")
				if err != nil {
					t.Fatal(err)
				}
				teams, tokens, created = append(teams, id), append(tokens, k.Token), append(created, clk.Now())
				clk.Add(1500 * time.Millisecond)
			}
			// The two oldest of each were written by an older release.
			for i := range 2 {
				toLegacy(t, backend.Records, teamRecordKey(teams[i]), "", created[i])
				toLegacy(t, backend.Records, keyRecordKey(tokens[i]), "KEY#", created[i])
			}

			listed, err := s.Teams(ctx)
			if err != nil {
				t.Fatal(err)
			}
			var gotTeams []string
			for _, tm := range listed {
				gotTeams = append(gotTeams, tm.TeamID)
			}
			if diff := cmp.Diff(teams, gotTeams); diff != "" {
				t.Errorf("teams, oldest first (-want +got):\n%s", diff)
			}
			var gotTokens []string
			for page := 1; page <= 2; page++ {
				kp, err := s.Keys(ctx, Principal{Admin: true}, "team-c", page, 2)
				if err != nil {
					t.Fatal(err)
				}
				if kp.TotalCount != 3 {
					t.Errorf("page %d: total_count %d, want 3", page, kp.TotalCount)
				}
				for _, k := range kp.Keys {
					gotTokens = append(gotTokens, k.Token)
				}
			}
			if diff := cmp.Diff(tokens, gotTokens); diff != "" {
				t.Errorf("keys, oldest first (-want +got):\n%s", diff)
			}

			// Migrated: every sort key is current, and listing again
			// writes nothing.
			versions := map[store.Key]int64{}
			for i := range 3 {
				for _, k := range []struct {
					key    store.Key
					prefix string
				}{{teamRecordKey(teams[i]), ""}, {keyRecordKey(tokens[i]), "KEY#"}} {
					rec, err := backend.Records.Get(ctx, k.key)
					if err != nil {
						t.Fatal(err)
					}
					if _, legacy := currentSortKey(rec.GSI1.SK, k.prefix); legacy {
						t.Errorf("%s: sort key %q still legacy", k.key.PK, rec.GSI1.SK)
					}
					if ts, _, _ := cutAfterTime(rec.GSI1.SK, k.prefix); ts != sortkey.Time(created[i]) {
						t.Errorf("%s: sort key %q, want the time %s", k.key.PK, rec.GSI1.SK, sortkey.Time(created[i]))
					}
					versions[k.key] = rec.Version
				}
			}
			if _, err := s.Teams(ctx); err != nil {
				t.Fatal(err)
			}
			if _, err := s.Keys(ctx, Principal{Admin: true}, "team-c", 1, 10); err != nil {
				t.Fatal(err)
			}
			for key, v := range versions {
				if rec, err := backend.Records.Get(ctx, key); err != nil || rec.Version != v {
					t.Errorf("%s rewritten by a listing with nothing to migrate: version %d, was %d (%v)", key.PK, rec.Version, v, err)
				}
			}
		})
	}
}
