package gcsbucket

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/fsouza/fake-gcs-server/fakestorage"
	"github.com/google/go-cmp/cmp"

	"github.com/sluice-gateway/sluice/pkg/callbacks"
	"github.com/sluice-gateway/sluice/pkg/logevent"
	"github.com/sluice-gateway/sluice/pkg/providers/google"
	"github.com/sluice-gateway/sluice/pkg/providers/google/googletest"
)

// emulator is fake-gcs-server in-process behind a front that checks every
// request carries an access token the service account's token endpoint
// minted (the emulator itself accepts anything).
type emulator struct {
	gcs     *fakestorage.Server
	srv     *httptest.Server
	tokens  *googletest.TokenServer
	mu      sync.Mutex
	uploads []*http.Request
}

func newEmulator(t *testing.T) *emulator {
	t.Helper()
	gcs, err := fakestorage.NewServerWithOptions(fakestorage.Options{NoListener: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(gcs.Stop)
	gcs.CreateBucketWithOpts(fakestorage.CreateBucketOpts{Name: "team-logs"})
	e := &emulator{gcs: gcs, tokens: googletest.NewTokenServer(t)}
	handler := gcs.HTTPHandler()
	e.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		token, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
		if !ok || !e.tokens.Valid(token) {
			t.Errorf("%s %s: authorization %q is not a minted token", r.Method, r.URL, r.Header.Get("Authorization"))
			w.WriteHeader(http.StatusUnauthorized)
			return
		}
		if r.Method == http.MethodPost && strings.HasPrefix(r.URL.Path, "/upload/storage/v1/") {
			if r.URL.Query().Get("uploadType") != "media" || r.Header.Get("Content-Type") != "application/json" {
				t.Errorf("upload %s with content type %q", r.URL, r.Header.Get("Content-Type"))
			}
			e.mu.Lock()
			e.uploads = append(e.uploads, r)
			e.mu.Unlock()
		}
		handler.ServeHTTP(w, r)
	}))
	t.Cleanup(e.srv.Close)
	return e
}

// client is a Client as delivery builds it: the guarded HTTP client (the
// test allow-lists 127.0.0.1), a token source from the service account, the
// endpoint from STORAGE_EMULATOR_HOST.
func (e *emulator) client(t *testing.T, bucket string) *Client {
	t.Helper()
	guard, err := callbacks.NewGuard([]string{"127.0.0.1"})
	if err != nil {
		t.Fatal(err)
	}
	hc := guard.Client()
	ts, err := google.NewTokenSource(e.tokens.ServiceAccountJSON("logs-project"), google.Options{HTTPClient: hc})
	if err != nil {
		t.Fatal(err)
	}
	host := strings.TrimPrefix(e.srv.URL, "http://")
	endpoint := Endpoint(func(k string) string {
		if k == EmulatorHostVar {
			return host
		}
		return ""
	})
	return New(hc, endpoint, bucket, ts)
}

var t0 = time.Date(2026, 11, 24, 23, 59, 59, 0, time.UTC)

func event(id string) *logevent.Event {
	ev := &logevent.Event{ID: id, TraceID: id, CallType: logevent.CallModeration, Status: logevent.StatusSuccess,
		Model: "omni-moderation-latest", Metadata: logevent.Metadata{UserAPIKeyTeamID: "team-a"}, RequestTags: []string{},
		Response: json.RawMessage(`{"results":[{"flagged":false}]}`)}
	ev.SetTimes(t0, time.Time{}, t0.Add(2*time.Second))
	return ev
}

func TestUploadsOneObjectPerEvent(t *testing.T) {
	e := newEmulator(t)
	c := e.client(t, "team-logs/sluice/prod")
	evs := []*logevent.Event{event("req_1"), event("req_2"), event("req_3")}
	for i, err := range c.Send(context.Background(), evs) {
		if err != nil {
			t.Fatalf("event %d: %v", i, err)
		}
	}
	for _, ev := range evs {
		// The date is the call's start, even though it ended the next day.
		obj, err := e.gcs.GetObject("team-logs", "sluice/prod/2026-11-24/"+ev.ID)
		if err != nil {
			t.Fatalf("object of %s: %v", ev.ID, err)
		}
		var got logevent.Event
		if err := json.Unmarshal(obj.Content, &got); err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff(*ev, got); diff != "" {
			t.Errorf("object of %s is not the log event (-want +got):\n%s", ev.ID, diff)
		}
		if obj.ContentType != "application/json" {
			t.Errorf("content type %q", obj.ContentType)
		}
	}
	if n := e.tokens.Issued(); n != 1 {
		t.Errorf("%d tokens minted for one send, want 1", n)
	}
}

func TestRedeliveryDoesNotOverwrite(t *testing.T) {
	e := newEmulator(t)
	c := e.client(t, "team-logs")
	ev := event("req_1")
	if err := c.Send(context.Background(), []*logevent.Event{ev})[0]; err != nil {
		t.Fatal(err)
	}
	first, err := e.gcs.GetObject("team-logs", "2026-11-24/req_1")
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Send(context.Background(), []*logevent.Event{ev})[0]; err != nil {
		t.Fatalf("redelivery: %v, want it counted as delivered", err)
	}
	again, err := e.gcs.GetObject("team-logs", "2026-11-24/req_1")
	if err != nil {
		t.Fatal(err)
	}
	if again.Generation != first.Generation {
		t.Errorf("generation %d → %d: the redelivery wrote the object again", first.Generation, again.Generation)
	}
	if len(e.uploads) != 2 || e.uploads[1].URL.Query().Get("ifGenerationMatch") != "0" {
		t.Errorf("uploads %d, want 2 conditional ones", len(e.uploads))
	}
}

func TestMissingBucketIsPermanent(t *testing.T) {
	e := newEmulator(t)
	err := e.client(t, "no-such-bucket").Send(context.Background(), []*logevent.Event{event("req_1")})[0]
	if err == nil || !callbacks.IsPermanent(err) {
		t.Errorf("err = %v, want a permanent error", err)
	}
}

func TestTokenEndpointDownIsRetryable(t *testing.T) {
	e := newEmulator(t)
	e.tokens.SetUnavailable(true)
	err := e.client(t, "team-logs").Send(context.Background(), []*logevent.Event{event("req_1")})[0]
	if err == nil || callbacks.IsPermanent(err) {
		t.Errorf("err = %v, want a retryable error", err)
	}
}

func TestEndpoint(t *testing.T) {
	for v, want := range map[string]string{
		"":                      DefaultEndpoint,
		"127.0.0.1:4443":        "http://127.0.0.1:4443",
		"https://gcs.internal/": "https://gcs.internal",
	} {
		if got := Endpoint(func(string) string { return v }); got != want {
			t.Errorf("Endpoint(%q) = %q, want %q", v, got, want)
		}
	}
}
