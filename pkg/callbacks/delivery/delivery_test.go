package delivery

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/sluice-gateway/sluice/pkg/callbacks"
	"github.com/sluice-gateway/sluice/pkg/logevent"
	"github.com/sluice-gateway/sluice/pkg/store"
	"github.com/sluice-gateway/sluice/pkg/store/local"
)

// runs is a LangSmith /runs/batch endpoint recording run errors by event id.
type runs struct {
	srv  *httptest.Server
	mu   sync.Mutex
	got  map[string]string // sluice event id → the run's error
	keys []string
}

func newRuns(t *testing.T) *runs {
	rs := &runs{got: map[string]string{}}
	rs.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var req struct {
			Post []struct {
				Error  string         `json:"error"`
				Inputs map[string]any `json:"inputs"`
			} `json:"post"`
		}
		if r.URL.Path != "/runs/batch" {
			t.Errorf("LangSmith path %s", r.URL.Path)
		}
		if err := json.NewDecoder(r.Body).Decode(&req); err != nil {
			t.Errorf("runs body: %v", err)
		}
		rs.mu.Lock()
		rs.keys = append(rs.keys, r.Header.Get("x-api-key"))
		for _, run := range req.Post {
			rs.got[run.Inputs["id"].(string)] = run.Error
		}
		rs.mu.Unlock()
		w.WriteHeader(http.StatusAccepted)
	}))
	t.Cleanup(rs.srv.Close)
	return rs
}

func TestRoutesEventsByTeamAndOutcome(t *testing.T) {
	h := newHarness(t, local.QueueOptions{})
	onSuccess, onFailure, teamB := newIngestion(t), newIngestion(t), newIngestion(t)
	both := newRuns(t)
	h.add(t, "team-a", callbacks.Langfuse, callbacks.TypeSuccess, onSuccess.vars())
	h.add(t, "team-a", callbacks.Langfuse, callbacks.TypeFailure, onFailure.vars())
	h.add(t, "team-a", callbacks.LangSmith, callbacks.TypeSuccessAndFailure, map[string]string{
		callbacks.VarLangSmithAPIKey: "ls-key", callbacks.VarLangSmithBaseURL: both.srv.URL})
	h.add(t, "team-b", callbacks.Langfuse, callbacks.TypeSuccess, teamB.vars())
	d := h.deliverer(t, Options{}, "")
	// One message with events of two teams and both outcomes; team-c has no callbacks.
	m := message(t, "m1", 1, event("req_ok", "team-a", logevent.StatusSuccess), event("req_bad", "team-a", logevent.StatusFailure),
		event("req_b", "team-b", logevent.StatusSuccess), event("req_c", "team-c", logevent.StatusSuccess))
	if err := d.Handle(context.Background(), m); err != nil {
		t.Fatal(err)
	}
	for name, c := range map[string]struct {
		got  map[string]int
		want map[string]int
	}{
		"team-a success": {onSuccess.ids(), map[string]int{"req_ok": 1}},
		"team-a failure": {onFailure.ids(), map[string]int{"req_bad": 1}},
		"team-b success": {teamB.ids(), map[string]int{"req_b": 1}},
	} {
		if diff := cmp.Diff(c.want, c.got); diff != "" {
			t.Errorf("%s (-want +got):\n%s", name, diff)
		}
	}
	if diff := cmp.Diff(map[string]string{"req_ok": "", "req_bad": "boom"}, both.got); diff != "" {
		t.Errorf("LangSmith runs (-want +got):\n%s", diff)
	}
	if both.keys[0] != "ls-key" {
		t.Errorf("LangSmith got x-api-key %q: the sealed key was not opened", both.keys[0])
	}
	if s := d.Stats(); s.Delivered.Load() != 5 || s.DeadLettered.Load() != 0 {
		t.Errorf("delivered %d, dead-lettered %d; want 5, 0", s.Delivered.Load(), s.DeadLettered.Load())
	}
}

func TestTurnOffMessageLogging(t *testing.T) {
	h := newHarness(t, local.QueueOptions{})
	quiet, full := newIngestion(t), newIngestion(t)
	v := quiet.vars()
	v[callbacks.VarTurnOffMessageLogging] = "true"
	h.add(t, "team-a", callbacks.Langfuse, callbacks.TypeSuccess, v)
	h.add(t, "team-a", callbacks.Langfuse, callbacks.TypeSuccessAndFailure, full.vars())
	d := h.deliverer(t, Options{}, "")
	if err := d.Handle(context.Background(), message(t, "m1", 1, event("req_1", "team-a", logevent.StatusSuccess))); err != nil {
		t.Fatal(err)
	}
	var q, f struct{ Input, Output json.RawMessage }
	json.Unmarshal(quiet.received("req_1")[0], &q)
	json.Unmarshal(full.received("req_1")[0], &f)
	if string(q.Input) != `"redacted-by-sluice"` || string(q.Output) != `"redacted-by-sluice"` {
		t.Errorf("turn_off_message_logging: input %s output %s", q.Input, q.Output)
	}
	if string(f.Input) != `["the input"]` || string(f.Output) != `{"object":"list"}` {
		t.Errorf("another callback of the team lost the content: input %s output %s", f.Input, f.Output)
	}
}

func TestClaimCheckedBodiesAreFetchedBack(t *testing.T) {
	h := newHarness(t, local.QueueOptions{})
	in := newIngestion(t)
	h.add(t, "team-a", callbacks.Langfuse, callbacks.TypeSuccess, in.vars())
	d := h.deliverer(t, Options{}, "")
	big := strings.Repeat("x", 300<<10)
	claimed, _ := json.Marshal(logevent.ClaimedBodies{Messages: json.RawMessage(`["` + big + `"]`), Response: json.RawMessage(`{"n":1}`)})
	if _, err := h.backend.Blobs.Put(context.Background(), logevent.ClaimCheckPrefix+"req_1", bytes.NewReader(claimed)); err != nil {
		t.Fatal(err)
	}
	withClaim := event("req_1", "team-a", logevent.StatusSuccess)
	withClaim.Messages, withClaim.Response, withClaim.ClaimCheck = nil, nil, logevent.ClaimCheckPrefix+"req_1"
	gone := event("req_2", "team-a", logevent.StatusSuccess)
	gone.Messages, gone.Response, gone.ClaimCheck = nil, nil, logevent.ClaimCheckPrefix+"expired"
	if err := d.Handle(context.Background(), message(t, "m1", 1, withClaim, gone)); err != nil {
		t.Fatal(err)
	}
	var g struct{ Input, Output json.RawMessage }
	json.Unmarshal(in.received("req_1")[0], &g)
	if len(g.Input) < len(big) || string(g.Output) != `{"n":1}` {
		t.Errorf("delivered input of %d bytes, output %s: the claim-checked bodies were not restored", len(g.Input), g.Output)
	}
	if len(in.received("req_2")) != 1 {
		t.Error("an event whose bodies expired was not delivered")
	}
}

func TestPermanentFailureIsDeadLetteredAtOnce(t *testing.T) {
	h := newHarness(t, local.QueueOptions{})
	in := newIngestion(t)
	in.fail = func(int) (int, time.Duration, bool) { return http.StatusUnauthorized, 0, false }
	h.add(t, "team-a", callbacks.Langfuse, callbacks.TypeSuccess, in.vars())
	d := h.deliverer(t, Options{Backoff: time.Millisecond}, "")
	if err := d.Handle(context.Background(), message(t, "m1", 1, event("req_1", "team-a", logevent.StatusSuccess))); err != nil {
		t.Fatalf("Handle = %v, want nil: the event is dead-lettered, not retried", err)
	}
	dls := h.deadLetters(t)
	if len(dls) != 1 || len(dls[0].events) != 1 || dls[0].events[0].ID != "req_1" {
		t.Fatalf("dead letters %+v", dls)
	}
	if a := dls[0].attrs; a[AttrCallback] != "langfuse#success" || a[logevent.AttrTeam] != "team-a" || a[AttrReceives] != "1" || !strings.Contains(a[AttrError], "401") {
		t.Errorf("dead letter's attributes %v", a)
	}
	if in.requests() != 1 {
		t.Errorf("%d requests: a 401 was retried", in.requests())
	}
}

func TestRedeliverySendsOnlyWhatFailed(t *testing.T) {
	h := newHarness(t, local.QueueOptions{})
	steady, flaky := newIngestion(t), newIngestion(t)
	down := true
	var mu sync.Mutex
	flaky.fail = func(int) (int, time.Duration, bool) {
		mu.Lock()
		defer mu.Unlock()
		if down {
			return http.StatusServiceUnavailable, 0, false
		}
		return http.StatusMultiStatus, 0, true
	}
	h.add(t, "team-a", callbacks.Langfuse, callbacks.TypeSuccess, steady.vars())
	h.add(t, "team-a", callbacks.Langfuse, callbacks.TypeSuccessAndFailure, flaky.vars())
	d := h.deliverer(t, Options{Retries: 2, Backoff: time.Millisecond, MaxReceives: 3}, "")
	m := message(t, "m1", 1, event("req_1", "team-a", logevent.StatusSuccess))
	if err := d.Handle(context.Background(), m); err == nil {
		t.Fatal("Handle = nil with a destination down, want an error (redelivery)")
	}
	if flaky.requests() != 2 {
		t.Errorf("%d sends to the failing destination in one receive, want Retries = 2", flaky.requests())
	}
	mu.Lock()
	down = false
	mu.Unlock()
	m.Receives = 2
	if err := d.Handle(context.Background(), m); err != nil {
		t.Fatal(err)
	}
	if n, f := len(steady.received("req_1")), len(flaky.received("req_1")); n != 1 || f != 1 {
		t.Errorf("received %d by the steady destination (want 1: not sent again), %d by the flaky one (want 1)", n, f)
	}
	if s := d.Stats(); s.Skipped.Load() != 1 || s.Delivered.Load() != 2 {
		t.Errorf("skipped %d delivered %d, want 1 and 2", s.Skipped.Load(), s.Delivered.Load())
	}
	if _, err := h.backend.Records.Get(context.Background(), progressKey("m1")); err == nil {
		t.Error("the progress record outlived the message")
	}
}

func TestLastReceiveDeadLetters(t *testing.T) {
	h := newHarness(t, local.QueueOptions{})
	in := newIngestion(t)
	in.fail = func(int) (int, time.Duration, bool) { return http.StatusBadGateway, 0, false }
	h.add(t, "team-a", callbacks.Langfuse, callbacks.TypeSuccess, in.vars())
	d := h.deliverer(t, Options{Retries: 1, MaxReceives: 2}, "")
	m := message(t, "m1", 1, event("req_1", "team-a", logevent.StatusSuccess), event("req_2", "team-a", logevent.StatusSuccess))
	if err := d.Handle(context.Background(), m); err == nil {
		t.Fatal("first receive: want an error")
	}
	m.Receives = 2
	if err := d.Handle(context.Background(), m); err != nil {
		t.Fatalf("last receive: %v, want nil (dead-lettered)", err)
	}
	// The two events failed for one callback: one dead letter holds both.
	dls := h.deadLetters(t)
	if len(dls) != 1 || len(dls[0].events) != 2 || d.Stats().DeadLettered.Load() != 2 {
		t.Fatalf("dead letters %+v, %d dead-lettered; want one letter of 2 events", dls, d.Stats().DeadLettered.Load())
	}
}

func TestUndecodableMessageIsDeadLettered(t *testing.T) {
	h := newHarness(t, local.QueueOptions{})
	d := h.deliverer(t, Options{}, "")
	for i, body := range [][]byte{
		[]byte("not json"),
		store.EncodeEvent(store.Event{Body: []byte(`{"id":"req_1"} {"no":"id"}`)}),
		store.EncodeEvent(store.Event{Body: []byte(`[1,2]`)}),
		store.EncodeEvent(store.Event{}),
	} {
		if err := d.Handle(context.Background(), store.Message{ID: "bad", Receives: 1, Body: body}); err != nil {
			t.Errorf("message %d: Handle = %v, want nil (dead-lettered)", i, err)
		}
	}
	dls := h.deadLetters(t)
	if len(dls) != 4 || d.Stats().Undecodable.Load() != 4 {
		t.Fatalf("dead letters %d undecodable %d; want 4", len(dls), d.Stats().Undecodable.Load())
	}
	if string(dls[0].raw) != "not json" {
		t.Errorf("an undecodable message was changed on its way to the dead-letter queue: %q", dls[0].raw)
	}
}

func TestConcurrentMessagesShareRequests(t *testing.T) {
	h := newHarness(t, local.QueueOptions{})
	in := newIngestion(t)
	in.fail = func(int) (int, time.Duration, bool) { return http.StatusMultiStatus, 5 * time.Millisecond, true }
	h.add(t, "team-a", callbacks.Langfuse, callbacks.TypeSuccess, in.vars())
	d := h.deliverer(t, Options{}, "")
	const messages = 200
	var wg sync.WaitGroup
	for i := range messages {
		wg.Go(func() {
			if err := d.Handle(context.Background(), message(t, fmtID(i), 1, event(fmtID(i), "team-a", logevent.StatusSuccess))); err != nil {
				t.Error(err)
			}
		})
	}
	wg.Wait()
	if len(in.ids()) != messages {
		t.Fatalf("%d events arrived, want %d", len(in.ids()), messages)
	}
	if reqs := d.Stats().Requests.Load(); reqs > messages/4 {
		t.Errorf("%d requests for %d concurrent one-event messages: events are not batched per destination", reqs, messages)
	}
}

func TestEncodeDecodeEvents(t *testing.T) {
	evs := []*logevent.Event{event("req_1", "team-a", logevent.StatusSuccess), event("req_2", "team-b", logevent.StatusFailure)}
	got, err := DecodeMessage(message(t, "m", 1, evs...))
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(Message{Events: evs}, got); diff != "" {
		t.Errorf("round trip (-want +got):\n%s", diff)
	}
	// One event is a message too.
	one, _ := json.Marshal(evs[0])
	got, err = DecodeMessage(store.Message{ID: "m", Body: store.EncodeEvent(store.Event{Body: one})})
	if err != nil || len(got.Events) != 1 || got.Events[0].ID != "req_1" {
		t.Errorf("single event: %v %v", got, err)
	}
}

func FuzzDecodeMessage(f *testing.F) {
	f.Add([]byte(`{"body":"{\"id\":\"req_1\"}"}`))
	f.Add([]byte(`{"body":"{\"id\":\"a\"}\n{\"id\":\"b\",\"status\":\"failure\"}"}`))
	f.Add([]byte(`{"body_base64":"AAEC"}`))
	f.Fuzz(func(t *testing.T, body []byte) {
		msg, err := DecodeMessage(store.Message{ID: "m", Body: body})
		if err != nil {
			return
		}
		if len(msg.Events) == 0 || len(msg.Events) > logevent.MaxEventsPerMessage {
			t.Fatalf("%d events accepted", len(msg.Events))
		}
		for _, ev := range msg.Events {
			if ev.ID == "" {
				t.Fatal("an event without an id was accepted")
			}
		}
	})
}

// A dead letter re-driven to the delivery queue goes to the callback it
// names only: the team's other callbacks, which had the event, do not get
// it twice.
func TestRedrivenDeadLetterGoesToItsCallbackOnly(t *testing.T) {
	h := newHarness(t, local.QueueOptions{})
	broken, fine := newIngestion(t), newIngestion(t)
	var mu sync.Mutex
	refuse := true
	broken.fail = func(int) (int, time.Duration, bool) {
		mu.Lock()
		defer mu.Unlock()
		if refuse {
			return http.StatusUnauthorized, 0, false
		}
		return http.StatusMultiStatus, 0, true
	}
	h.add(t, "team-a", callbacks.Langfuse, callbacks.TypeSuccess, broken.vars())
	h.add(t, "team-a", callbacks.Langfuse, callbacks.TypeSuccessAndFailure, fine.vars())
	d := h.deliverer(t, Options{Backoff: time.Millisecond}, "")
	ctx := context.Background()
	if err := d.Handle(ctx, message(t, "m1", 1, event("req_1", "team-a", logevent.StatusSuccess))); err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	refuse = false // the team fixed its credentials
	mu.Unlock()
	n, err := store.Redrive(ctx, h.backend.DeliveryDeadLetters, h.backend.Deliveries)
	if err != nil || n != 1 {
		t.Fatalf("Redrive = %d, %v; want 1", n, err)
	}
	msgs, err := h.backend.Deliveries.Receive(ctx, 10, time.Second)
	if err != nil || len(msgs) != 1 {
		t.Fatalf("received %d re-driven messages, %v", len(msgs), err)
	}
	if err := d.Handle(ctx, msgs[0]); err != nil {
		t.Fatal(err)
	}
	if b, f := len(broken.received("req_1")), len(fine.received("req_1")); b != 1 || f != 1 {
		t.Errorf("the fixed callback received req_1 %d times (want 1), the other %d (want 1: not again)", b, f)
	}
}
