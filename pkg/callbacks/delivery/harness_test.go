package delivery

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/sluice-gateway/sluice/pkg/auth"
	"github.com/sluice-gateway/sluice/pkg/callbacks"
	"github.com/sluice-gateway/sluice/pkg/logevent"
	"github.com/sluice-gateway/sluice/pkg/store"
	"github.com/sluice-gateway/sluice/pkg/store/local"
)

// harness is the delivery worker on the embedded backend, with the settings
// service to configure callbacks the way a team does.
type harness struct {
	backend  *store.Backend
	settings *callbacks.Service
	catalog  *callbacks.Catalog
	guard    *callbacks.Guard
	accounts *callbacks.ServiceAccounts
	admin    auth.Principal
}

func newHarness(t testing.TB, queue local.QueueOptions) *harness {
	t.Helper()
	b, err := local.Open(t.TempDir(), local.Options{Deliveries: queue})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { b.Close() })
	a, err := auth.NewService(b.Records, b.Limiter, "sk-master", auth.Options{})
	if err != nil {
		t.Fatal(err)
	}
	h := &harness{backend: b}
	ctx := context.Background()
	if h.admin, err = a.Authenticate(ctx, "sk-master"); err != nil {
		t.Fatal(err)
	}
	for _, id := range []string{"team-a", "team-b"} {
		if _, err := a.CreateTeam(ctx, auth.NewTeam{TeamID: id}, ""); err != nil {
			t.Fatal(err)
		}
	}
	// The tests' destinations listen on 127.0.0.1: allow-listed explicitly.
	if h.guard, err = callbacks.NewGuard([]string{"127.0.0.1"}); err != nil {
		t.Fatal(err)
	}
	h.catalog = callbacks.NewCatalog(b.Records, b.Sealer, callbacks.CatalogOptions{TTL: time.Minute})
	h.accounts = callbacks.NewServiceAccounts("", h.guard)
	if h.settings, err = callbacks.NewService(callbacks.Deps{Records: b.Records, Sealer: b.Sealer, Teams: a,
		Catalog: h.catalog, Guard: h.guard, Accounts: h.accounts}); err != nil {
		t.Fatal(err)
	}
	return h
}

// deliverer builds the worker with opts over the guarded client.
func (h *harness) deliverer(t testing.TB, opts Options, gcsEndpoint string) *Deliverer {
	t.Helper()
	d, err := New(Deps{Catalog: h.catalog, Records: h.backend.Records, Blobs: h.backend.Blobs, DeadLetters: h.backend.DeliveryDeadLetters,
		Open: NewOpener(OpenerDeps{Client: h.guard.Client(), Accounts: h.accounts, GCSEndpoint: gcsEndpoint})}, opts)
	if err != nil {
		t.Fatal(err)
	}
	return d
}

// add configures a callback.
func (h *harness) add(t testing.TB, team, name, typ string, vars map[string]string) {
	t.Helper()
	raw := map[string]json.RawMessage{}
	for k, v := range vars {
		raw[k], _ = json.Marshal(v)
	}
	if _, err := h.settings.Add(context.Background(), h.admin, team, callbacks.AddCallback{CallbackName: name, CallbackType: typ, CallbackVars: raw}, ""); err != nil {
		t.Fatalf("add %s %s: %v", name, typ, err)
	}
}

// deadLetter is a message of the dead-letter queue.
type deadLetter struct {
	attrs  map[string]string
	events []*logevent.Event // nil for an undecodable message, sent on as it came
	raw    []byte
}

// deadLetters takes every message from the dead-letter queue.
func (h *harness) deadLetters(t testing.TB) []deadLetter {
	t.Helper()
	ctx := context.Background()
	var out []deadLetter
	for {
		msgs, err := h.backend.DeliveryDeadLetters.Receive(ctx, 10, 50*time.Millisecond)
		if err != nil {
			t.Fatal(err)
		}
		if len(msgs) == 0 {
			return out
		}
		for _, m := range msgs {
			dl := deadLetter{raw: m.Body}
			if e, err := store.DecodeEvent(m); err == nil {
				dl.attrs = e.Attributes
				dl.events, _ = logevent.DecodeEvents(e.Body)
			}
			out = append(out, dl)
			h.backend.DeliveryDeadLetters.Ack(ctx, m)
		}
	}
}

// message is a delivery-queue message carrying events, as the bus delivers it.
func message(t testing.TB, id string, receives int, events ...*logevent.Event) store.Message {
	t.Helper()
	body, err := logevent.EncodeEvents(events)
	if err != nil {
		t.Fatal(err)
	}
	return store.Message{ID: id, Receives: receives, Body: store.EncodeEvent(store.Event{
		Attributes: map[string]string{logevent.AttrTeam: events[0].Metadata.UserAPIKeyTeamID}, Body: body})}
}

var t0 = time.Date(2026, 11, 24, 12, 0, 0, 0, time.UTC)

func event(id, team, status string) *logevent.Event {
	ev := &logevent.Event{ID: id, TraceID: id, CallType: logevent.CallEmbedding, Status: status, Model: "text-embedding-3-small",
		Metadata: logevent.Metadata{UserAPIKeyTeamID: team}, RequestTags: []string{},
		Messages: json.RawMessage(`["the input"]`), Response: json.RawMessage(`{"object":"list"}`)}
	ev.SetTimes(t0, time.Time{}, t0.Add(time.Second))
	if status == logevent.StatusFailure {
		ev.Response, ev.ErrorStr = nil, "boom"
	}
	return ev
}

// ingestion is a Langfuse ingestion endpoint that records each generation
// it accepts. fail, when set, decides per request whether to fail it.
type ingestion struct {
	srv  *httptest.Server
	mu   sync.Mutex
	gens map[string][]json.RawMessage // generation id → bodies received
	reqs int
	fail func(n int) (status int, delay time.Duration, record bool)
}

func newIngestion(t *testing.T) *ingestion {
	in := &ingestion{gens: map[string][]json.RawMessage{}}
	in.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/api/public/ingestion" || r.Header.Get("Authorization") != "Basic "+base64.StdEncoding.EncodeToString([]byte("pk:sk")) {
			t.Errorf("request %s with %q", r.URL.Path, r.Header.Get("Authorization"))
		}
		var req struct {
			Batch []struct {
				ID   string          `json:"id"`
				Type string          `json:"type"`
				Body json.RawMessage `json:"body"`
			} `json:"batch"`
		}
		if err := json.NewDecoder(r.Body).Decode(&req); err != nil {
			t.Errorf("ingestion body: %v", err)
		}
		in.mu.Lock()
		in.reqs++
		n := in.reqs
		in.mu.Unlock()
		status, delay, record := http.StatusMultiStatus, time.Duration(0), true
		if in.fail != nil {
			status, delay, record = in.fail(n)
		}
		var successes []map[string]any
		if record {
			in.mu.Lock()
			for _, e := range req.Batch {
				if e.Type == "generation-create" {
					var g struct {
						ID string `json:"id"`
					}
					json.Unmarshal(e.Body, &g)
					in.gens[g.ID] = append(in.gens[g.ID], e.Body)
				}
				successes = append(successes, map[string]any{"id": e.ID, "status": 201})
			}
			in.mu.Unlock()
		}
		if delay > 0 {
			select {
			case <-time.After(delay):
			case <-r.Context().Done():
			}
		}
		w.WriteHeader(status)
		if status == http.StatusMultiStatus {
			json.NewEncoder(w).Encode(map[string]any{"successes": successes, "errors": []any{}})
		}
	}))
	t.Cleanup(in.srv.Close)
	return in
}

func (in *ingestion) vars() map[string]string {
	return map[string]string{callbacks.VarLangfusePublicKey: "pk", callbacks.VarLangfuseSecretKey: "sk", callbacks.VarLangfuseHost: in.srv.URL}
}

// received returns the generation bodies received for an event id.
func (in *ingestion) received(id string) []json.RawMessage {
	in.mu.Lock()
	defer in.mu.Unlock()
	return in.gens[id]
}

// requests is how many requests the endpoint received.
func (in *ingestion) requests() int {
	in.mu.Lock()
	defer in.mu.Unlock()
	return in.reqs
}

func (in *ingestion) ids() map[string]int {
	in.mu.Lock()
	defer in.mu.Unlock()
	out := map[string]int{}
	for id, bodies := range in.gens {
		out[id] = len(bodies)
	}
	return out
}

func fmtID(i int) string { return fmt.Sprintf("req_%05d", i) }
