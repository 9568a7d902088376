package logevent

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/sluice-gateway/sluice/pkg/ctxvalue"
	"github.com/sluice-gateway/sluice/pkg/store"
)

// recordingBus keeps what was published.
type recordingBus struct {
	mu      sync.Mutex
	events  []store.Event
	publish int
	delay   time.Duration
}

func (b *recordingBus) Publish(_ context.Context, evs ...store.Event) error {
	time.Sleep(b.delay)
	b.mu.Lock()
	defer b.mu.Unlock()
	b.events = append(b.events, evs...)
	b.publish++
	return nil
}

func (b *recordingBus) calls() int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.publish
}

func (b *recordingBus) published() []store.Event {
	b.mu.Lock()
	defer b.mu.Unlock()
	return append([]store.Event(nil), b.events...)
}

// memBlobs is an in-memory store.Blobs.
type memBlobs struct {
	mu      sync.Mutex
	objects map[string][]byte
}

func (m *memBlobs) Put(_ context.Context, key string, r io.Reader) (int64, error) {
	data, err := io.ReadAll(r)
	if err != nil {
		return 0, err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	m.objects[key] = data
	return int64(len(data)), nil
}

func (m *memBlobs) Get(_ context.Context, key string, _, _ int64) (io.ReadCloser, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	data, ok := m.objects[key]
	if !ok {
		return nil, store.ErrNotFound
	}
	return io.NopCloser(bytes.NewReader(data)), nil
}

func (m *memBlobs) Size(_ context.Context, key string) (int64, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	return int64(len(m.objects[key])), nil
}

func (m *memBlobs) Delete(_ context.Context, key string) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	delete(m.objects, key)
	return nil
}

func listeningTo(teams ...string) Listeners {
	return ListeningFunc(func(_ context.Context, team, _ string) (bool, error) {
		for _, t := range teams {
			if t == team {
				return true, nil
			}
		}
		return false, nil
	})
}

func event(team string, messages string) *Event {
	return &Event{ID: "req_1", CallType: CallEmbedding, Status: StatusSuccess, Model: "m",
		Metadata: Metadata{UserAPIKeyTeamID: team}, Messages: json.RawMessage(messages)}
}

func TestEmitterPublishesOnlyWhenSomeoneListens(t *testing.T) {
	bus := &recordingBus{}
	e := NewEmitter(bus, nil, listeningTo("team-a"), 0)
	ctx := context.Background()
	e.Emit(ctx, event("team-b", `"hi"`))
	if n := len(bus.published()); n != 0 {
		t.Fatalf("published %d events for a team nobody listens to", n)
	}
	e.Emit(ctx, event("team-a", `"hi"`))
	got := bus.published()
	if len(got) != 1 {
		t.Fatalf("published %d events, want 1", len(got))
	}
	if got[0].Attributes[AttrTeam] != "team-a" || got[0].Attributes[AttrStatus] != StatusSuccess {
		t.Errorf("attributes = %v", got[0].Attributes)
	}
	var back Event
	if err := json.Unmarshal(got[0].Body, &back); err != nil || back.ID != "req_1" || string(back.Messages) != `"hi"` {
		t.Errorf("body = %s (%v)", got[0].Body, err)
	}
}

func TestEmitterAsksForTheEventsStatus(t *testing.T) {
	bus := &recordingBus{}
	failuresOnly := ListeningFunc(func(_ context.Context, _, status string) (bool, error) { return status == StatusFailure, nil })
	e := NewEmitter(bus, nil, failuresOnly, 0)
	e.Emit(context.Background(), event("t", `"ok"`))
	failed := event("t", `"bad"`)
	failed.Status = StatusFailure
	e.Emit(context.Background(), failed)
	got := bus.published()
	if len(got) != 1 || got[0].Attributes[AttrStatus] != StatusFailure {
		t.Errorf("published %+v", got)
	}
}

func TestEmitterStartOverlapsAndWaits(t *testing.T) {
	bus := &recordingBus{delay: 50 * time.Millisecond}
	e := NewEmitter(bus, nil, listeningTo("t"), 0)
	ctx, cancel := context.WithCancel(context.Background())
	began := time.Now()
	wait := e.Start(ctx, event("t", `"x"`))
	if time.Since(began) > 25*time.Millisecond {
		t.Error("Start blocked on the publish")
	}
	cancel() // the client went away: the event must still go out
	wait()
	if len(bus.published()) != 1 {
		t.Error("wait returned before the event was published")
	}
}

func TestEmitterClaimCheck(t *testing.T) {
	bus := &recordingBus{}
	blobs := &memBlobs{objects: map[string][]byte{}}
	e := NewEmitter(bus, blobs, listeningTo("t"), 1024)
	big := `"` + strings.Repeat("a", 4096) + `"`
	e.Emit(context.Background(), event("t", big))
	got := bus.published()
	if len(got) != 1 || len(got[0].Body) > 1024 {
		t.Fatalf("published %d events, body %d bytes", len(got), len(got[0].Body))
	}
	var small Event
	json.Unmarshal(got[0].Body, &small)
	if small.ClaimCheck != ClaimCheckPrefix+"req_1" || small.Messages != nil {
		t.Fatalf("event = %+v", small)
	}
	var claimed ClaimedBodies
	if err := json.Unmarshal(blobs.objects[small.ClaimCheck], &claimed); err != nil || string(claimed.Messages) != big {
		t.Errorf("claim-checked bodies = %.60s (%v)", blobs.objects[small.ClaimCheck], err)
	}
}

func TestEmitterFailuresDoNotFailTheCall(t *testing.T) {
	bus := &recordingBus{}
	failing := ListeningFunc(func(context.Context, string, string) (bool, error) { return false, errors.New("table down") })
	NewEmitter(bus, nil, failing, 0).Emit(context.Background(), event("t", `"x"`))
	if len(bus.published()) != 0 {
		t.Error("published although listeners could not be read")
	}
	// A nil emitter and one with no listeners are no-ops.
	var nilEmitter *Emitter
	nilEmitter.Emit(context.Background(), event("t", `"x"`))
	NewEmitter(bus, nil, nil, 0).Emit(context.Background(), event("t", `"x"`))
	if len(bus.published()) != 0 {
		t.Error("an emitter without listeners published")
	}
}

func TestSetTimes(t *testing.T) {
	start := time.Unix(100, 0)
	var e Event
	e.SetTimes(start, start.Add(200*time.Millisecond), start.Add(time.Second))
	if e.StartTime != 100 || e.EndTime != 101 || e.CompletionStartTime != 100.2 || e.ResponseTime < 0.199 || e.ResponseTime > 0.201 {
		t.Errorf("times = %+v", e)
	}
	e.SetTimes(start, time.Time{}, start.Add(time.Second))
	if e.CompletionStartTime != 101 {
		t.Errorf("unstreamed completionStartTime = %v, want endTime", e.CompletionStartTime)
	}
}

func eventOf(id, team, status string) *Event {
	ev := event(team, `"x"`)
	ev.ID, ev.Status = id, status
	return ev
}

// bodyIDs decodes a published body into its event ids.
func bodyIDs(t *testing.T, body []byte) []string {
	t.Helper()
	evs, err := DecodeEvents(body)
	if err != nil {
		t.Fatal(err)
	}
	var ids []string
	for _, ev := range evs {
		ids = append(ids, ev.ID)
	}
	return ids
}

// StartAll publishes the wanted events grouped by team and outcome, in one
// publish: a batch's lines become a few bus events, not one each.
func TestStartAllGroupsByTeamAndOutcome(t *testing.T) {
	bus := &recordingBus{}
	e := NewEmitter(bus, nil, listeningTo("a", "b"), 0)
	e.StartAll(context.Background(), []*Event{
		eventOf("1", "a", StatusSuccess), eventOf("2", "a", StatusFailure), eventOf("3", "quiet", StatusSuccess),
		eventOf("4", "a", StatusSuccess), eventOf("5", "b", StatusSuccess),
	})()
	type msg struct {
		Team, Status string
		IDs          []string
	}
	var got []msg
	for _, ev := range bus.published() {
		got = append(got, msg{ev.Attributes[AttrTeam], ev.Attributes[AttrStatus], bodyIDs(t, ev.Body)})
	}
	want := []msg{{"a", StatusSuccess, []string{"1", "4"}}, {"a", StatusFailure, []string{"2"}}, {"b", StatusSuccess, []string{"5"}}}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("published (-want +got):\n%s", diff)
	}
	if bus.calls() != 1 {
		t.Errorf("%d publishes, want 1", bus.calls())
	}
}

// A group larger than a bus event holds splits: each body stays within the
// claim-check threshold and MaxEventsPerMessage.
func TestStartAllSplitsLargeGroups(t *testing.T) {
	bus := &recordingBus{}
	e := NewEmitter(bus, nil, listeningTo("a"), 4096)
	var evs []*Event
	for i := range 50 {
		ev := eventOf(fmt.Sprint(i), "a", StatusSuccess)
		ev.Messages = json.RawMessage(`"` + strings.Repeat("m", 500) + `"`)
		evs = append(evs, ev)
	}
	e.StartAll(context.Background(), evs)()
	var ids []string
	for _, ev := range bus.published() {
		if len(ev.Body) > 4096 {
			t.Errorf("a body of %d bytes, over the 4096 limit", len(ev.Body))
		}
		ids = append(ids, bodyIDs(t, ev.Body)...)
	}
	if len(bus.published()) < 10 || len(ids) != 50 {
		t.Errorf("%d events in %d bus events", len(ids), len(bus.published()))
	}
}

// Under Deferred, Emit starts the publish and returns; Wait awaits it.
func TestDeferredLeavesTheWaitToTheEdge(t *testing.T) {
	bus := &recordingBus{delay: 50 * time.Millisecond}
	e := NewEmitter(bus, nil, listeningTo("t"), 0)
	ctx, p := Deferred(context.Background())
	began := time.Now()
	e.Emit(ctx, event("t", `"x"`))
	e.Emit(ctx, event("quiet", `"x"`))
	if time.Since(began) > 25*time.Millisecond {
		t.Error("Emit waited for the publish under Deferred")
	}
	if !p.Waiting() {
		t.Fatal("nothing pending after an Emit someone listens to")
	}
	p.Wait()
	if len(bus.published()) != 1 || p.Waiting() {
		t.Errorf("after Wait: %d published, waiting %v", len(bus.published()), p.Waiting())
	}
	quiet, q := Deferred(context.Background())
	e.Emit(quiet, event("quiet", `"x"`))
	if q.Waiting() {
		t.Error("an event nobody listens to left something to wait for")
	}
}

// Under Collect, Emit only collects; Wait publishes everything at once.
func TestCollectPublishesOnce(t *testing.T) {
	bus := &recordingBus{}
	e := NewEmitter(bus, nil, listeningTo("t"), 0)
	ctx, p := e.Collect(context.Background())
	for i := range 20 {
		e.Emit(ctx, eventOf(fmt.Sprint(i), "t", StatusSuccess))
	}
	if len(bus.published()) != 0 {
		t.Fatal("published before Wait")
	}
	p.Wait()
	if got := bus.published(); bus.calls() != 1 || len(got) != 1 || len(bodyIDs(t, got[0].Body)) != 20 {
		t.Errorf("%d publishes of %d bus events", bus.calls(), len(got))
	}
}

// failingBlobs refuses every claim check.
type failingBlobs struct{ memBlobs }

func (*failingBlobs) Put(context.Context, string, io.Reader) (int64, error) {
	return 0, errors.New("bucket down")
}

// An event whose claim check fails is left out; the events published with
// it (other calls') still go.
func TestEmitterOneBadEventDoesNotSinkItsGroup(t *testing.T) {
	bus := &recordingBus{}
	e := NewEmitter(bus, &failingBlobs{}, listeningTo("t"), 1024)
	big, small := event("t", `"`+strings.Repeat("a", 4096)+`"`), event("t", `"hi"`)
	big.ID, small.ID = "req_big", "req_small"
	e.EmitAll(context.Background(), []*Event{big, small})
	got := bus.published()
	if len(got) != 1 {
		t.Fatalf("published %d bus events, want 1", len(got))
	}
	evs, err := DecodeEvents(got[0].Body)
	if err != nil || len(evs) != 1 || evs[0].ID != "req_small" {
		t.Errorf("published %v (%v), want only req_small", evs, err)
	}
}

// heldBus holds each publish until released, counting them.
type heldBus struct {
	recordingBus
	started chan struct{}
	release chan struct{}
}

func (b *heldBus) Publish(ctx context.Context, evs ...store.Event) error {
	b.started <- struct{}{}
	<-b.release
	return b.recordingBus.Publish(ctx, evs...)
}

// The events emitted while a publish is in flight go together in the next
// one (group commit); each emitter still waits for its own.
func TestEmitterGroupsWhatComesDuringAPublish(t *testing.T) {
	bus := &heldBus{started: make(chan struct{}, 1), release: make(chan struct{})}
	e := NewEmitter(bus, nil, listeningTo("a", "b"), 0)
	ctx := context.Background()
	first := e.Start(ctx, event("a", `"first"`))
	<-bus.started // in flight
	var waits []func()
	for i := range 5 {
		waits = append(waits, e.Start(ctx, event([]string{"a", "b"}[i%2], `"later"`)))
	}
	bus.release <- struct{}{}
	first()
	<-bus.started // the second publish: everything that came meanwhile
	bus.release <- struct{}{}
	for _, w := range waits {
		w()
	}
	if n := bus.calls(); n != 2 {
		t.Errorf("%d publishes, want 2", n)
	}
	if n := len(bus.published()); n != 3 {
		t.Errorf("%d bus events, want 3 (one, then one per team)", n)
	}
	if err := e.Drain(ctx); err != nil {
		t.Error(err)
	}
}

// An event that cannot be encoded, between others of its group, leaves
// them whole: the body holds the others, one a line.
func TestEmitterBadEventBetweenGoodOnes(t *testing.T) {
	bus := &recordingBus{}
	e := NewEmitter(bus, nil, listeningTo("t"), 0)
	first, bad, last := event("t", `"one"`), event("t", `"bad"`), event("t", `"two"`)
	first.ID, bad.ID, last.ID = "req_1", "req_bad", "req_2"
	bad.ResponseCost = math.NaN()
	e.EmitAll(context.Background(), []*Event{first, bad, last})
	got := bus.published()
	if len(got) != 1 {
		t.Fatalf("published %d bus events, want 1", len(got))
	}
	evs, err := DecodeEvents(got[0].Body)
	if err != nil {
		t.Fatal(err)
	}
	var ids []string
	for _, ev := range evs {
		ids = append(ids, ev.ID)
	}
	if diff := cmp.Diff([]string{"req_1", "req_2"}, ids); diff != "" {
		t.Errorf("published events (-want +got):\n%s", diff)
	}
}

// Deferring a request's publishes is one allocation: the Pending is its own
// context layer.
func TestDeferredAllocations(t *testing.T) {
	var (
		ctx context.Context
		p   *Pending
	)
	if allocs := testing.AllocsPerRun(100, func() { ctx, p = Deferred(context.Background()) }); allocs != 1 {
		t.Errorf("%.0f allocations to defer publishes, want 1", allocs)
	}
	if got := ctxvalue.From[Pending](ctx); got != p {
		t.Errorf("the context carries %p, want %p", got, p)
	}
}

// WantsBodies: a team's bodies are wanted when a callback listens for
// either outcome, or its listeners cannot be read; not by spend (a pricer)
// or an Observer alone, which read no bodies.
func TestEmitterWantsBodies(t *testing.T) {
	failures := ListeningFunc(func(_ context.Context, team, status string) (bool, error) {
		return team == "t" && status == StatusFailure, nil
	})
	broken := ListeningFunc(func(context.Context, string, string) (bool, error) { return false, errors.New("table down") })
	priced := NewEmitter(&recordingBus{}, nil, nil, 0)
	priced.SetPricer(noPrice{})
	priced.Observe(noObserver{})
	for _, tc := range []struct {
		name string
		e    *Emitter
		team string
		want bool
	}{
		{"no emitter", nil, "t", false},
		{"a pricer and an observer only", priced, "t", false},
		{"a callback of the team's on success", NewEmitter(&recordingBus{}, nil, listeningTo("t"), 0), "t", true},
		{"a callback of the team's on failure", NewEmitter(&recordingBus{}, nil, failures, 0), "t", true},
		{"another team's callback", NewEmitter(&recordingBus{}, nil, listeningTo("u"), 0), "t", false},
		{"listeners not read", NewEmitter(&recordingBus{}, nil, broken, 0), "t", true},
		{"either: the team's", NewEmitter(&recordingBus{}, nil, eitherListeners{teams: []string{"t"}}, 0), "t", true},
		{"either: another team's", NewEmitter(&recordingBus{}, nil, eitherListeners{teams: []string{"u"}}, 0), "t", false},
		{"either: not read", NewEmitter(&recordingBus{}, nil, eitherListeners{err: errors.New("table down")}, 0), "t", true},
	} {
		if got := tc.e.WantsBodies(context.Background(), tc.team); got != tc.want {
			t.Errorf("%s: WantsBodies = %v, want %v", tc.name, got, tc.want)
		}
	}
}

type noPrice struct{}

func (noPrice) Price(context.Context, *Event) {}
func (noPrice) Quote(*Event) (float64, bool)  { return 0, false }

type noObserver struct{}

func (noObserver) ObserveEvent(context.Context, *Event) {}

// eitherListeners listen for teams, and answer WantsBodies in one question
// (ListeningEither): they fail if asked per status.
type eitherListeners struct {
	teams []string
	err   error
}

func (l eitherListeners) Listening(context.Context, string, string) (bool, error) {
	return false, errors.New("asked per status")
}

func (l eitherListeners) ListeningEither(_ context.Context, team string) (bool, error) {
	return slices.Contains(l.teams, team), l.err
}

// groupByTeam keeps the order of appearance within and across groups,
// whether the events are of one team and outcome or of several.
func TestGroupByTeam(t *testing.T) {
	ev := func(id, team, status string) *Event {
		return &Event{ID: id, Status: status, Metadata: Metadata{UserAPIKeyTeamID: team}}
	}
	ids := func(groups []group) (out []string) {
		for _, g := range groups {
			out = append(out, g.team+"/"+g.status+":")
			for _, e := range g.events {
				out = append(out, e.ID)
			}
		}
		return out
	}
	for _, tc := range []struct {
		events []*Event
		want   []string
	}{
		{nil, nil},
		{[]*Event{ev("a", "t", StatusSuccess), ev("b", "t", StatusSuccess)}, []string{"t/success:", "a", "b"}},
		{[]*Event{ev("a", "t", StatusSuccess), ev("b", "u", StatusSuccess), ev("c", "t", StatusFailure), ev("d", "t", StatusSuccess)},
			[]string{"t/success:", "a", "d", "u/success:", "b", "t/failure:", "c"}},
	} {
		if got := ids(groupByTeam(tc.events)); !slices.Equal(got, tc.want) {
			t.Errorf("groupByTeam = %v, want %v", got, tc.want)
		}
	}
}
