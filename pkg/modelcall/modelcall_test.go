package modelcall

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"testing/iotest"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/sluice-gateway/sluice/pkg/api"
	"github.com/sluice-gateway/sluice/pkg/auth"
	"github.com/sluice-gateway/sluice/pkg/logevent"
	"github.com/sluice-gateway/sluice/pkg/models"
	"github.com/sluice-gateway/sluice/pkg/oai"
	"github.com/sluice-gateway/sluice/pkg/sse"
	"github.com/sluice-gateway/sluice/pkg/store"
)

var teamKey = auth.Principal{TeamID: "team-1", Key: &auth.KeyInfo{Token: "tok"}, Team: &auth.Team{TeamID: "team-1"}}

// bus keeps what the emitter publishes, and signals each publish.
type bus struct {
	mu     sync.Mutex
	events []logevent.Event
	added  chan struct{}
}

func (b *bus) Publish(ctx context.Context, events ...store.Event) error {
	b.mu.Lock()
	defer b.mu.Unlock()
	for _, e := range events {
		var ev logevent.Event
		if err := json.Unmarshal(e.Body, &ev); err != nil {
			return err
		}
		b.events = append(b.events, ev)
	}
	select {
	case b.added <- struct{}{}:
	default:
	}
	return nil
}

func (b *bus) published() []logevent.Event {
	b.mu.Lock()
	defer b.mu.Unlock()
	return append([]logevent.Event(nil), b.events...)
}

// tokens records what Finish counts.
type tokens struct {
	mu  sync.Mutex
	got []int64
	rep []*models.Reply
}

func (t *tokens) Finish(ctx context.Context, p auth.Principal, rep *models.Reply, n int64) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.got = append(t.got, n)
	t.rep = append(t.rep, rep)
}

func newCalls() (*Calls, *bus, *tokens) {
	b, tk := &bus{added: make(chan struct{}, 1)}, &tokens{}
	always := logevent.ListeningFunc(func(context.Context, string, string) (bool, error) { return true, nil })
	return New(logevent.NewEmitter(b, nil, always, 0), tk), b, tk
}

// streamMeter is what a chat stream's meter will be: it reads the events
// going by and takes the usage of the last chunk that carries one.
type streamMeter struct {
	parser *sse.Parser
	usage  oai.Usage
	events int
	done   bool // data: [DONE] went by
}

func newStreamMeter() *streamMeter {
	m := &streamMeter{}
	m.parser = sse.NewParser(sse.Limits{}, func(e sse.Event) {
		m.events++
		m.done = m.done || string(e.Data) == "[DONE]"
		var chunk struct {
			Usage json.RawMessage `json:"usage"`
		}
		if json.Unmarshal(e.Data, &chunk) == nil && len(chunk.Usage) > 0 {
			if u, err := oai.ParseUsage(chunk.Usage); err == nil {
				m.usage = u
			}
		}
	})
	return m
}

func (m *streamMeter) Write(p []byte) (int, error) { return m.parser.Write(p) }

func (m *streamMeter) Whole() bool { return m.done }

func (m *streamMeter) End(ev *logevent.Event) (oai.Usage, error) {
	m.parser.End()
	ev.Stream = true
	return m.usage, nil
}

// streamOp is a test operation: it calls upstream with the call's context
// and streams its answer through.
func streamOp(calls *Calls, upstream string) Operation {
	return func(ctx context.Context, p auth.Principal, body []byte) (*Result, error) {
		c := calls.Begin(ctx, p, logevent.CallCompletion)
		c.Event.Model = "test-model"
		req, err := http.NewRequestWithContext(ctx, "POST", upstream, strings.NewReader(string(body)))
		if err != nil {
			return nil, c.Fail(err)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			return nil, c.Fail(api.Upstream(err, "The provider could not be reached."))
		}
		c.Routed(&models.Reply{Target: models.Target{ModelGroup: "test-model", Provider: "test", APIBase: upstream}})
		return c.Stream(resp.Body, newStreamMeter()), nil
	}
}

// gateway serves op behind Handler, with the request context the server's
// middleware would give it.
func gateway(t *testing.T, op Operation) *httptest.Server {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		r = api.StartRequest(w, r)
		r = r.WithContext(auth.WithPrincipal(r.Context(), teamKey))
		if err := Handler(op, 0)(w, r); err != nil {
			api.LogLateError(r, err)
		}
	}))
	t.Cleanup(srv.Close)
	return srv
}

const (
	chunk1    = "data: {\"id\":\"c1\",\"choices\":[{\"delta\":{\"content\":\"Hel\"}}]}\n\n"
	chunk2    = "data: {\"id\":\"c1\",\"choices\":[{\"delta\":{\"content\":\"lo\"}}]}\n\n"
	lastChunk = "data: {\"id\":\"c1\",\"choices\":[],\"usage\":{\"prompt_tokens\":5,\"completion_tokens\":2,\"total_tokens\":7}}\n\ndata: [DONE]\n\n"
)

func TestStreamIsFlushedEventByEvent(t *testing.T) {
	read := make(chan struct{})
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		io.WriteString(w, chunk1)
		w.(http.Flusher).Flush()
		select { // the second chunk waits until the client has the first
		case <-read:
		case <-time.After(10 * time.Second):
			t.Error("the first chunk never reached the client")
		}
		io.WriteString(w, chunk2+lastChunk)
	}))
	defer up.Close()
	calls, b, tk := newCalls()
	resp, err := http.Post(gateway(t, streamOp(calls, up.URL)).URL, "application/json", strings.NewReader(`{}`))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.Header.Get("Content-Type") != "text/event-stream" || resp.Header.Get(api.OverheadHeader) == "" || resp.ContentLength != -1 {
		t.Errorf("headers %v", resp.Header)
	}
	br := bufio.NewReader(resp.Body)
	first, _ := br.ReadString('\n')
	if first != strings.SplitAfter(chunk1, "\n")[0] {
		t.Fatalf("first line %q", first)
	}
	close(read)
	rest, _ := io.ReadAll(br)
	if got := first + string(rest); got != chunk1+chunk2+lastChunk {
		t.Errorf("stream %q", got)
	}
	events := waitEvents(t, b, 1)
	want := oai.Usage{PromptTokens: 5, CompletionTokens: 2, TotalTokens: 7}
	ev := events[0]
	if ev.Status != "success" || !ev.Stream || ev.PromptTokens != 5 || ev.CompletionTokens != 2 || ev.TotalTokens != 7 || ev.CompletionStartTime < ev.StartTime {
		t.Errorf("event %+v", ev)
	}
	if diff := cmp.Diff([]int64{want.TotalTokens}, tk.got); diff != "" {
		t.Errorf("tokens counted (-want +got):\n%s", diff)
	}
}

// waitEvents returns the published events once there are n: the handler
// emits before it returns, which is after the client has read the end.
func waitEvents(t *testing.T, b *bus, n int) []logevent.Event {
	t.Helper()
	timeout := time.After(5 * time.Second)
	for {
		evs := b.published()
		if len(evs) >= n {
			if len(evs) != n {
				t.Fatalf("%d events, want %d: %+v", len(evs), n, evs)
			}
			return evs
		}
		select {
		case <-b.added:
		case <-timeout:
			t.Fatalf("%d events, want %d: %+v", len(evs), n, evs)
		}
	}
}

func TestStreamCutAfterItsFirstByteEndsWithAnErrorEvent(t *testing.T) {
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		io.WriteString(w, chunk1)
		w.(http.Flusher).Flush()
		panic(http.ErrAbortHandler) // the provider's connection breaks
	}))
	defer up.Close()
	calls, b, tk := newCalls()
	resp, err := http.Post(gateway(t, streamOp(calls, up.URL)).URL, "application/json", strings.NewReader(`{}`))
	if err != nil {
		t.Fatal(err)
	}
	got, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err != nil {
		t.Fatalf("the stream itself should end cleanly: %v", err)
	}
	events, readErr := readAll(string(got))
	if readErr != io.EOF || len(events) != 2 {
		t.Fatalf("stream %q: %d events, %v", got, len(events), readErr)
	}
	var last api.Body
	if err := json.Unmarshal(events[1], &last); err != nil || last.Error.Type != api.TypeServer || last.Error.Code == nil || *last.Error.Code != "upstream_error" || last.Error.Message == "" {
		t.Errorf("last event %s", events[1])
	}
	ev := waitEvents(t, b, 1)[0]
	if ev.Status != "failure" || ev.ErrorInformation == nil || ev.ErrorInformation.ErrorCode != "502" {
		t.Errorf("event %+v %+v", ev, ev.ErrorInformation)
	}
	if len(tk.got) != 1 {
		t.Errorf("Finish called %d times", len(tk.got))
	}
}

func readAll(stream string) ([][]byte, error) {
	r := sse.NewReader(strings.NewReader(stream), sse.Limits{})
	var out [][]byte
	for {
		e, err := r.Next()
		if err != nil {
			return out, err
		}
		out = append(out, append([]byte(nil), e.Data...))
	}
}

func TestClientGoneCancelsTheProviderCall(t *testing.T) {
	cancelled := make(chan struct{})
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		io.WriteString(w, chunk1)
		w.(http.Flusher).Flush()
		select {
		case <-r.Context().Done():
			close(cancelled)
		case <-time.After(10 * time.Second):
			t.Error("the provider call outlived its client")
		}
	}))
	defer up.Close()
	calls, b, _ := newCalls()
	resp, err := http.Post(gateway(t, streamOp(calls, up.URL)).URL, "application/json", strings.NewReader(`{}`))
	if err != nil {
		t.Fatal(err)
	}
	if line, _ := bufio.NewReader(resp.Body).ReadString('\n'); !strings.HasPrefix(line, "data: ") {
		t.Fatalf("first line %q", line)
	}
	resp.Body.Close() // the client leaves mid-stream
	select {
	case <-cancelled:
	case <-time.After(10 * time.Second):
		t.Fatal("the provider call was not cancelled")
	}
	ev := waitEvents(t, b, 1)[0]
	if ev.Status != "failure" || ev.ErrorInformation == nil || ev.ErrorInformation.ErrorCode != "499" {
		t.Errorf("event %+v %+v", ev, ev.ErrorInformation)
	}
}

// A client that has read the stream's last event, data: [DONE], and hangs
// up before the provider closed its end took the whole answer: the call is
// a success with its tokens, not a 499.
func TestClientLeavingAfterDoneTookTheAnswer(t *testing.T) {
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		io.WriteString(w, chunk1+chunk2+lastChunk)
		w.(http.Flusher).Flush()
		<-r.Context().Done() // the provider keeps its end open
	}))
	defer up.Close()
	calls, b, tk := newCalls()
	resp, err := http.Post(gateway(t, streamOp(calls, up.URL)).URL, "application/json", strings.NewReader(`{}`))
	if err != nil {
		t.Fatal(err)
	}
	rd := bufio.NewReader(resp.Body)
	for {
		line, err := rd.ReadString('\n')
		if err != nil {
			t.Fatalf("stream ended before [DONE]: %v", err)
		}
		if line == "data: [DONE]\n" {
			break
		}
	}
	resp.Body.Close()
	ev := waitEvents(t, b, 1)[0]
	if ev.Status != logevent.StatusSuccess || ev.TotalTokens != 7 {
		t.Errorf("event status %q, %d tokens (%s); want a success with 7", ev.Status, ev.TotalTokens, ev.ErrorStr)
	}
	tk.mu.Lock()
	defer tk.mu.Unlock()
	if diff := cmp.Diff([]int64{7}, tk.got); diff != "" {
		t.Errorf("tokens counted (-want +got):\n%s", diff)
	}
}

// answerOp answers a fixed JSON body through a meter reporting usage.
func answerOp(calls *Calls, answer string, usage oai.Usage, body *closeCounter) Operation {
	return func(ctx context.Context, p auth.Principal, _ []byte) (*Result, error) {
		c := calls.Begin(ctx, p, logevent.CallEmbedding)
		c.Routed(&models.Reply{Target: models.Target{ModelGroup: "m", DeploymentID: "m#0", Provider: "openai", Model: "text-embedding-3-small", APIBase: "https://api.openai.com/v1"}})
		body.Reader = strings.NewReader(answer)
		return c.Answer(body, int64(len(answer)), fixedMeter{usage}), nil
	}
}

type fixedMeter struct{ u oai.Usage }

func (fixedMeter) Write(p []byte) (int, error)              { return len(p), nil }
func (m fixedMeter) End(*logevent.Event) (oai.Usage, error) { return m.u, nil }

type closeCounter struct {
	io.Reader
	closed int
}

func (c *closeCounter) Close() error { c.closed++; return nil }

func TestResultEndsTheCallOnce(t *testing.T) {
	calls, b, tk := newCalls()
	body := &closeCounter{}
	usage := oai.Usage{PromptTokens: 8, TotalTokens: 8}
	ctx := api.WithStart(api.WithRequestID(context.Background(), "req_1"), time.Now())
	res, err := answerOp(calls, `{"object":"list"}`, usage, body)(ctx, teamKey, nil)
	if err != nil {
		t.Fatal(err)
	}
	if res.ContentType != "application/json" || res.ContentLength != 17 || res.Streamed {
		t.Errorf("result %+v", res)
	}
	var out strings.Builder
	if n, err := res.WriteTo(&out); err != nil || n != 17 || out.String() != `{"object":"list"}` {
		t.Fatalf("%d %v %q", n, err, out.String())
	}
	if _, err := res.WriteTo(&out); err == nil {
		t.Error("a second WriteTo succeeded")
	}
	res.Close()
	if diff := cmp.Diff(usage, res.Usage()); diff != "" {
		t.Errorf("usage (-want +got):\n%s", diff)
	}
	if body.closed != 1 || len(tk.got) != 1 || tk.got[0] != 8 || len(b.published()) != 1 {
		t.Errorf("closed %d, finished %v, %d events", body.closed, tk.got, len(b.published()))
	}
	ev := b.published()[0]
	want := logevent.Event{
		ID: "req_1", TraceID: "req_1", CallType: logevent.CallEmbedding, Status: "success",
		CustomLLMProvider: "openai", PromptTokens: 8, TotalTokens: 8,
		Model: "text-embedding-3-small", ModelID: "m#0", ModelGroup: "m", APIBase: "https://api.openai.com/v1",
		Metadata:    logevent.Metadata{UserAPIKeyHash: "tok", UserAPIKeyTeamID: "team-1", RequestID: "req_1"},
		RequestTags: []string{},
	}
	if diff := cmp.Diff(want, ev, ignoreTimes); diff != "" {
		t.Errorf("event (-want +got):\n%s", diff)
	}
}

var ignoreTimes = cmp.FilterPath(func(p cmp.Path) bool {
	switch p.Last().String() {
	case ".StartTime", ".EndTime", ".CompletionStartTime", ".ResponseTime":
		return true
	}
	return false
}, cmp.Ignore())

// writeCounter counts the writes it is given.
type writeCounter struct {
	strings.Builder
	writes int
}

func (w *writeCounter) Write(p []byte) (int, error) { w.writes++; return w.Builder.Write(p) }

// A JSON answer of known length that arrives in pieces goes out in one write:
// a write per piece would cost the caller's connection a system call each.
func TestKnownLengthAnswerIsWrittenWhole(t *testing.T) {
	calls, _, _ := newCalls()
	answer := `{"object":"list","data":[]}`
	body := &closeCounter{Reader: iotest.OneByteReader(strings.NewReader(answer))}
	res, err := answerOp(calls, answer, oai.Usage{}, body)(context.Background(), teamKey, nil)
	if err != nil {
		t.Fatal(err)
	}
	var out writeCounter
	if n, err := res.WriteTo(&out); err != nil || n != int64(len(answer)) || out.String() != answer || out.writes != 1 {
		t.Errorf("wrote %d bytes in %d writes (%v): %q", n, out.writes, err, out.String())
	}
}

// A known-length answer cut short is still a cut: what came is written, and
// the call fails as the provider's.
func TestKnownLengthAnswerCutShort(t *testing.T) {
	calls, b, _ := newCalls()
	body := &closeCounter{Reader: strings.NewReader(`{"object":`)}
	res := calls.Begin(context.Background(), teamKey, logevent.CallEmbedding).Answer(body, 27, fixedMeter{})
	var out strings.Builder
	n, err := res.WriteTo(&out)
	if n != 10 || out.String() != `{"object":` || api.AsError(err).Status != http.StatusBadGateway {
		t.Errorf("wrote %d bytes %q, error %v; want the 10 that came and a 502", n, out.String(), err)
	}
	if evs := b.published(); len(evs) != 1 || evs[0].Status != "failure" || evs[0].ErrorInformation.ErrorCode != "502" {
		t.Errorf("events %+v", evs)
	}
}

func TestCloseWithoutWriteIsNotDelivered(t *testing.T) {
	calls, b, tk := newCalls()
	body := &closeCounter{}
	res, err := answerOp(calls, `{}`, oai.Usage{}, body)(context.Background(), teamKey, nil)
	if err != nil {
		t.Fatal(err)
	}
	res.Close()
	res.Close()
	if body.closed != 1 || len(tk.got) != 1 {
		t.Errorf("closed %d, finished %v", body.closed, tk.got)
	}
	evs := b.published()
	if len(evs) != 1 || evs[0].Status != "failure" || evs[0].ErrorInformation.ErrorCode != "499" {
		t.Errorf("events %+v", evs)
	}
	if _, err := res.WriteTo(io.Discard); !errors.Is(err, errWritten) {
		t.Errorf("WriteTo after Close: %v", err)
	}
}

func TestFailEmitsBeforeReturning(t *testing.T) {
	calls, b, _ := newCalls()
	c := calls.Begin(context.Background(), teamKey, logevent.CallModeration)
	err := c.Fail(api.InvalidValue("input", "bad"))
	if api.AsError(err).Param != "input" {
		t.Errorf("Fail returned %v", err)
	}
	evs := b.published()
	if len(evs) != 1 || evs[0].Status != "failure" || evs[0].ErrorInformation.ErrorCode != "400" || evs[0].CallType != logevent.CallModeration {
		t.Errorf("events %+v", evs)
	}
}

type admitter struct {
	refuse error
	calls  int
}

func (a *admitter) Admit(ctx context.Context, p auth.Principal) error { a.calls++; return a.refuse }

func TestRunAdmitsFirst(t *testing.T) {
	calls, b, _ := newCalls()
	ran := 0
	var gotID string
	var gotStart time.Time
	op := func(ctx context.Context, p auth.Principal, body []byte) (*Result, error) {
		ran++
		gotID, gotStart = api.RequestID(ctx), api.RequestStart(ctx)
		return answerOp(calls, `{}`, oai.Usage{}, &closeCounter{})(ctx, p, body)
	}
	a := &admitter{refuse: api.RateLimited(api.TypeRequests, time.Second, "slow down")}
	if _, err := Run(context.Background(), a, teamKey, op, nil); api.AsError(err).Status != 429 || ran != 0 || len(b.published()) != 0 {
		t.Errorf("refused: %v, ran %d, %d events", err, ran, len(b.published()))
	}
	a.refuse = nil
	before := time.Now()
	res, err := Run(context.Background(), a, teamKey, op, nil)
	if err != nil {
		t.Fatal(err)
	}
	res.WriteTo(io.Discard)
	if ran != 1 || a.calls != 2 || !strings.HasPrefix(gotID, "req_") || gotStart.Before(before) {
		t.Errorf("ran %d admitted %d id %q start %v", ran, a.calls, gotID, gotStart)
	}
	if evs := b.published(); len(evs) != 1 || evs[0].ID != gotID {
		t.Errorf("events %+v", evs)
	}
}

func TestRunKeepsTheCallersRequestID(t *testing.T) {
	calls, _, _ := newCalls()
	var gotID string
	op := func(ctx context.Context, p auth.Principal, body []byte) (*Result, error) {
		gotID = api.RequestID(ctx)
		return answerOp(calls, `{}`, oai.Usage{}, &closeCounter{})(ctx, p, body)
	}
	res, err := Run(api.WithRequestID(context.Background(), "req_line7"), &admitter{}, teamKey, op, nil)
	if err != nil {
		t.Fatal(err)
	}
	res.Close()
	if gotID != "req_line7" {
		t.Errorf("request id %q", gotID)
	}
}

func BenchmarkRelay(b *testing.B) {
	answer := `{"object":"list","data":[{"object":"embedding","index":0,"embedding":[` + strings.Repeat("-0.0123456789,", 1535) + `0.01]}],"model":"text-embedding-3-small","usage":{"prompt_tokens":8,"total_tokens":8}}`
	calls := New(nil, noTokens{})
	body := &closeCounter{}
	ctx := api.WithStart(context.Background(), time.Now())
	op := answerOp(calls, answer, oai.Usage{PromptTokens: 8, TotalTokens: 8}, body)
	b.SetBytes(int64(len(answer)))
	b.ReportAllocs()
	for b.Loop() {
		res, err := op(ctx, teamKey, nil)
		if err != nil {
			b.Fatal(err)
		}
		if n, err := res.WriteTo(io.Discard); err != nil || n != int64(len(answer)) {
			b.Fatal(err)
		}
	}
}

type noTokens struct{}

func (noTokens) Finish(context.Context, auth.Principal, *models.Reply, int64) {}
