package callbacks

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/sluice-gateway/sluice/pkg/config"
	"github.com/sluice-gateway/sluice/pkg/logevent"
	"github.com/sluice-gateway/sluice/pkg/store"
	"github.com/sluice-gateway/sluice/pkg/store/local"
)

// countingRecords counts the queries that reach the table.
type countingRecords struct {
	store.Records
	queries atomic.Int32
	fail    error
}

func (c *countingRecords) Query(ctx context.Context, q store.Query) (store.Page, error) {
	c.queries.Add(1)
	if c.fail != nil {
		return store.Page{}, c.fail
	}
	return c.Records.Query(ctx, q)
}

func records(t *testing.T) *countingRecords {
	b, err := local.Open(t.TempDir(), local.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { b.Close() })
	return &countingRecords{Records: b.Records}
}

func addCallback(t *testing.T, r store.Records, team, name, typ string) {
	t.Helper()
	if err := r.Put(context.Background(), store.Record{Key: RecordKey(team, name, typ), Body: []byte(`{}`)}, store.Cond{}); err != nil {
		t.Fatal(err)
	}
}

func TestRecordKeys(t *testing.T) {
	k := RecordKey("team-1", "gcs_bucket", TypeSuccessAndFailure)
	if k.PK != "TEAM#team-1" || k.SK != "CALLBACK#gcs_bucket#success_and_failure" {
		t.Errorf("%+v", k)
	}
	name, typ, ok := ParseKey(k.SK)
	if name != "gcs_bucket" || typ != TypeSuccessAndFailure || !ok {
		t.Errorf("%q %q %v", name, typ, ok)
	}
	for _, bad := range []string{"TEAM", "CALLBACK#", "CALLBACK#x", "CALLBACK##success", "CALLBACK#x#"} {
		if _, _, ok := ParseKey(bad); ok {
			t.Errorf("%q parsed", bad)
		}
	}
}

func TestListeningFollowsTheTeamsCallbackTypes(t *testing.T) {
	r := records(t)
	addCallback(t, r, "t-success", Langfuse, TypeSuccess)
	addCallback(t, r, "t-failure", LangSmith, TypeFailure)
	addCallback(t, r, "t-both", GCSBucket, TypeSuccessAndFailure)
	addCallback(t, r, "t-split", Langfuse, TypeSuccess)
	addCallback(t, r, "t-split", LangSmith, TypeFailure)
	// The team's own record shares the partition and is not a callback.
	r.Put(context.Background(), store.Record{Key: store.Key{PK: "TEAM#t-none", SK: "TEAM"}, Body: []byte(`{}`)}, store.Cond{})
	l := NewListeners(r, nil, Options{})
	got := map[string][2]bool{}
	for _, team := range []string{"t-success", "t-failure", "t-both", "t-split", "t-none", "t-unknown", ""} {
		s, err := l.Listening(context.Background(), team, logevent.StatusSuccess)
		if err != nil {
			t.Fatal(err)
		}
		f, err := l.Listening(context.Background(), team, logevent.StatusFailure)
		if err != nil {
			t.Fatal(err)
		}
		got[team] = [2]bool{s, f}
	}
	want := map[string][2]bool{
		"t-success": {true, false}, "t-failure": {false, true}, "t-both": {true, true}, "t-split": {true, true},
		"t-none": {false, false}, "t-unknown": {false, false}, "": {false, false},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("(-want +got) [success failure]:\n%s", diff)
	}
}

func TestAnswersAreCachedForTheTTL(t *testing.T) {
	r := records(t)
	now := time.Unix(1_700_000_000, 0)
	l := NewListeners(r, nil, Options{TTL: 30 * time.Second, Now: func() time.Time { return now }})
	ask := func() bool {
		ok, err := l.Listening(context.Background(), "team-1", logevent.StatusSuccess)
		if err != nil {
			t.Fatal(err)
		}
		return ok
	}
	if ask() || ask() || r.queries.Load() != 1 {
		t.Fatalf("no callbacks: %d queries", r.queries.Load())
	}
	addCallback(t, r, "team-1", Langfuse, TypeSuccess)
	if ask() {
		t.Error("a cached no changed before its TTL")
	}
	now = now.Add(31 * time.Second)
	if !ask() || r.queries.Load() != 2 {
		t.Errorf("after the TTL: %d queries", r.queries.Load())
	}
	r.Delete(context.Background(), RecordKey("team-1", Langfuse, TypeSuccess), store.Cond{})
	l.Forget("team-1")
	if ask() || r.queries.Load() != 3 {
		t.Errorf("after Forget: %d queries", r.queries.Load())
	}
}

func TestTheCacheIsBounded(t *testing.T) {
	l := NewListeners(records(t), nil, Options{MaxEntries: 3})
	for _, team := range []string{"a", "b", "c", "d", "e"} {
		l.Listening(context.Background(), team, logevent.StatusSuccess)
	}
	if len(l.cache) > 3 {
		t.Errorf("%d entries", len(l.cache))
	}
}

func TestRecordsDown(t *testing.T) {
	r := records(t)
	r.fail = store.ErrUnavailable
	l := NewListeners(r, nil, Options{})
	if _, err := l.Listening(context.Background(), "team-1", logevent.StatusSuccess); !errors.Is(err, store.ErrUnavailable) {
		t.Errorf("%v", err)
	}
	r.fail = nil
	if _, err := l.Listening(context.Background(), "team-1", logevent.StatusSuccess); err != nil || r.queries.Load() != 2 {
		t.Errorf("a failure was cached: %v, %d queries", err, r.queries.Load())
	}
}

func TestGatewayCallbacks(t *testing.T) {
	cfg, err := config.Parse([]byte(`
litellm_settings:
  success_callback: ["langfuse", "prometheus"]
  failure_callback: gcs_bucket
  callbacks: [langsmith]
`), func(string) string { return "" })
	if err != nil {
		t.Fatal(err)
	}
	want := []Callback{{Langfuse, TypeSuccess}, {GCSBucket, TypeFailure}, {LangSmith, TypeSuccessAndFailure}}
	if diff := cmp.Diff(want, GatewayCallbacks(cfg)); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
}

func TestGatewayCallbacksListenForEveryTeam(t *testing.T) {
	cfg, _ := config.Parse([]byte("litellm_settings:\n  failure_callback: [langfuse]\n"), func(string) string { return "" })
	r := records(t)
	l := NewListeners(r, cfg, Options{})
	if ok, _ := l.Listening(context.Background(), "any", logevent.StatusFailure); !ok {
		t.Error("a gateway-wide failure callback does not listen to failures")
	}
	if ok, _ := l.Listening(context.Background(), "any", logevent.StatusSuccess); ok {
		t.Error("a gateway-wide failure callback listens to successes")
	}
	if r.queries.Load() != 1 {
		t.Errorf("%d queries: only the success question needs the team's records", r.queries.Load())
	}
}
