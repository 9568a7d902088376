package langfuse

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/sluice-gateway/sluice/pkg/callbacks"
	"github.com/sluice-gateway/sluice/pkg/logevent"
)

// The bodies as Langfuse's ingestion API defines them (its OpenAPI:
// TraceBody, CreateGenerationBody); the test server decodes strictly, so a
// field Langfuse does not know fails the test.
type traceBody struct {
	ID        string          `json:"id"`
	Timestamp time.Time       `json:"timestamp"`
	Name      string          `json:"name"`
	UserID    string          `json:"userId"`
	Input     json.RawMessage `json:"input"`
	Output    json.RawMessage `json:"output"`
	SessionID string          `json:"sessionId"`
	Metadata  json.RawMessage `json:"metadata"`
	Tags      []string        `json:"tags"`
}

type generationBody struct {
	ID                  string             `json:"id"`
	TraceID             string             `json:"traceId"`
	Name                string             `json:"name"`
	StartTime           time.Time          `json:"startTime"`
	EndTime             time.Time          `json:"endTime"`
	CompletionStartTime *time.Time         `json:"completionStartTime"`
	Model               string             `json:"model"`
	ModelParameters     map[string]any     `json:"modelParameters"`
	Input               json.RawMessage    `json:"input"`
	Output              json.RawMessage    `json:"output"`
	Usage               *Usage             `json:"usage"`
	UsageDetails        map[string]int     `json:"usageDetails"`
	CostDetails         map[string]float64 `json:"costDetails"`
	Metadata            json.RawMessage    `json:"metadata"`
	Level               string             `json:"level"`
	StatusMessage       string             `json:"statusMessage"`
}

type envelope struct {
	ID        string          `json:"id"`
	Type      string          `json:"type"`
	Timestamp time.Time       `json:"timestamp"`
	Body      json.RawMessage `json:"body"`
	Metadata  json.RawMessage `json:"metadata"`
}

func strict(b []byte, v any) error {
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	return dec.Decode(v)
}

// server is a Langfuse ingestion endpoint: it checks auth and every
// envelope, records what it accepted (deduplicating on envelope ids, as
// Langfuse does), and answers 207.
type server struct {
	t          *testing.T
	srv        *httptest.Server
	mu         sync.Mutex
	requests   int
	seen       map[string]int // envelope id → times received
	traces     map[string]traceBody
	gens       map[string]generationBody
	status     int            // when set, the whole request answers this
	refuse     map[string]int // envelope id → per-envelope error status
	batchSizes []int
	maxBody    int // Langfuse's 3.5 MB, unless a test lowers it
}

func newServer(t *testing.T) *server {
	s := &server{t: t, maxBody: 3500 << 10, seen: map[string]int{}, traces: map[string]traceBody{}, gens: map[string]generationBody{}, refuse: map[string]int{}}
	s.srv = httptest.NewServer(http.HandlerFunc(s.serve))
	t.Cleanup(s.srv.Close)
	return s
}

func (s *server) serve(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.requests++
	if r.Method != http.MethodPost || r.URL.Path != "/api/public/ingestion" {
		s.t.Errorf("request %s %s", r.Method, r.URL.Path)
	}
	if u, p, ok := r.BasicAuth(); !ok || u != "pk-lf-1" || p != "sk-lf-1" {
		s.t.Errorf("basic auth %q %q %v", u, p, ok)
		w.WriteHeader(http.StatusUnauthorized)
		return
	}
	if ct := r.Header.Get("Content-Type"); ct != "application/json" {
		s.t.Errorf("content type %q", ct)
	}
	if s.status != 0 {
		w.WriteHeader(s.status)
		w.Write([]byte(`{"message":"nope"}`))
		return
	}
	var req struct {
		Batch    []json.RawMessage `json:"batch"`
		Metadata json.RawMessage   `json:"metadata"`
	}
	body := new(bytes.Buffer)
	body.ReadFrom(r.Body)
	if body.Len() > s.maxBody {
		s.t.Errorf("batch of %d bytes, over %d", body.Len(), s.maxBody)
	}
	if err := strict(body.Bytes(), &req); err != nil {
		s.t.Errorf("request body: %v", err)
		w.WriteHeader(http.StatusBadRequest)
		return
	}
	s.batchSizes = append(s.batchSizes, len(req.Batch))
	var md struct {
		BatchSize int `json:"batch_size"`
	}
	if err := json.Unmarshal(req.Metadata, &md); err != nil || md.BatchSize != len(req.Batch) {
		s.t.Errorf("metadata %s (%v): batch_size must count the batch's %d envelopes", req.Metadata, err, len(req.Batch))
	}
	var successes, errs []map[string]any
	for _, raw := range req.Batch {
		var env envelope
		if err := strict(raw, &env); err != nil {
			s.t.Errorf("envelope: %v: %s", err, raw)
			continue
		}
		if code := s.refuse[env.ID]; code != 0 {
			errs = append(errs, map[string]any{"id": env.ID, "status": code, "message": "refused", "error": "test"})
			continue
		}
		s.seen[env.ID]++
		switch env.Type {
		case "trace-create":
			var b traceBody
			if err := strict(env.Body, &b); err != nil {
				s.t.Errorf("trace body: %v", err)
			}
			s.traces[b.ID] = b
		case "generation-create":
			var b generationBody
			if err := strict(env.Body, &b); err != nil {
				s.t.Errorf("generation body: %v", err)
			}
			if !slices.Contains([]string{"DEBUG", "DEFAULT", "WARNING", "ERROR"}, b.Level) {
				s.t.Errorf("level %q", b.Level)
			}
			s.gens[b.ID] = b
		default:
			s.t.Errorf("envelope type %q", env.Type)
		}
		successes = append(successes, map[string]any{"id": env.ID, "status": 201})
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(http.StatusMultiStatus)
	json.NewEncoder(w).Encode(map[string]any{"successes": successes, "errors": errs})
}

var t0 = time.Date(2026, 11, 24, 12, 0, 0, 0, time.UTC)

func event(id, status string) *logevent.Event {
	ev := &logevent.Event{
		ID: id, TraceID: id, CallType: logevent.CallCompletion, Status: status, Model: "gpt-4o",
		CustomLLMProvider: "openai", PromptTokens: 12, CompletionTokens: 5, TotalTokens: 17, ResponseCost: 0.0021,
		Messages:        json.RawMessage(`[{"role":"user","content":"hi"}]`),
		ModelParameters: json.RawMessage(`{"stop":["x"],"temperature":0.2}`),
		Metadata:        logevent.Metadata{UserAPIKeyAlias: "ci", UserAPIKeyTeamID: "team-a"},
		RequestTags:     []string{"prod"},
	}
	ev.SetTimes(t0, t0.Add(300*time.Millisecond), t0.Add(time.Second))
	if status == logevent.StatusSuccess {
		ev.Response = json.RawMessage(`{"role":"assistant","content":"hello"}`)
	} else {
		ev.ErrorStr = "The model is overloaded."
	}
	return ev
}

func TestSendWireFormat(t *testing.T) {
	s := newServer(t)
	c := New(s.srv.Client(), s.srv.URL+"/", "pk-lf-1", "sk-lf-1", NewBuffers(1))
	errs := c.Send(context.Background(), []*logevent.Event{event("req_ok", logevent.StatusSuccess), event("req_bad", logevent.StatusFailure)})
	if errs[0] != nil || errs[1] != nil {
		t.Fatalf("errors %v", errs)
	}
	ok, bad := s.gens["req_ok"], s.gens["req_bad"]
	wantOK := generationBody{
		ID: "req_ok", TraceID: "req_ok", Name: "litellm-acompletion", StartTime: t0, EndTime: t0.Add(time.Second),
		CompletionStartTime: ptr(t0.Add(300 * time.Millisecond)), Model: "gpt-4o",
		ModelParameters: map[string]any{"temperature": 0.2},
		Input:           json.RawMessage(`[{"role":"user","content":"hi"}]`), Output: json.RawMessage(`{"role":"assistant","content":"hello"}`),
		Usage:        &Usage{Input: 12, Output: 5, Total: 17, Unit: "TOKENS"},
		UsageDetails: map[string]int{"input": 12, "output": 5, "total": 17},
		CostDetails:  map[string]float64{"total": 0.0021},
		Level:        "DEFAULT",
	}
	if diff := cmp.Diff(wantOK, ok, cmpIgnoreMetadata); diff != "" {
		t.Errorf("generation (-want +got):\n%s", diff)
	}
	if bad.Level != "ERROR" || bad.StatusMessage != "The model is overloaded." || string(bad.Output) != `"The model is overloaded."` {
		t.Errorf("failed call's generation: level %q status %q output %s", bad.Level, bad.StatusMessage, bad.Output)
	}
	tr := s.traces["req_ok"]
	if tr.Name != "litellm-acompletion" || !tr.Timestamp.Equal(t0) || !slices.Equal(tr.Tags, []string{"prod"}) ||
		!bytes.Contains(tr.Metadata, []byte(`"user_api_key_team_id":"team-a"`)) {
		t.Errorf("trace %+v", tr)
	}
	if s.requests != 1 {
		t.Errorf("%d requests for two events, want one batch", s.requests)
	}
}

var cmpIgnoreMetadata = cmp.FilterPath(func(p cmp.Path) bool { return p.Last().String() == ".Metadata" }, cmp.Ignore())

func ptr[T any](v T) *T { return &v }

func TestSendPartialErrors(t *testing.T) {
	s := newServer(t)
	s.refuse["req_2-generation"] = http.StatusBadRequest     // invalid: permanent
	s.refuse["req_3-trace"] = http.StatusInternalServerError // Langfuse's fault: retry
	c := New(s.srv.Client(), s.srv.URL, "pk-lf-1", "sk-lf-1", NewBuffers(1))
	evs := []*logevent.Event{event("req_1", logevent.StatusSuccess), event("req_2", logevent.StatusSuccess), event("req_3", logevent.StatusSuccess)}
	errs := c.Send(context.Background(), evs)
	if errs[0] != nil {
		t.Errorf("req_1: %v", errs[0])
	}
	if errs[1] == nil || !callbacks.IsPermanent(errs[1]) {
		t.Errorf("req_2 (a 400 in the 207): %v, want a permanent error", errs[1])
	}
	if errs[2] == nil || callbacks.IsPermanent(errs[2]) {
		t.Errorf("req_3 (a 500 in the 207): %v, want a retryable error", errs[2])
	}
	// The retry of req_3 goes through; req_1 sent again is deduplicated.
	delete(s.refuse, "req_3-trace")
	if errs := c.Send(context.Background(), []*logevent.Event{evs[0], evs[2]}); errs[0] != nil || errs[1] != nil {
		t.Errorf("retry: %v", errs)
	}
	if _, ok := s.traces["req_3"]; !ok {
		t.Error("req_3's trace never arrived")
	}
}

func TestSendWholeRequestFailures(t *testing.T) {
	for status, permanent := range map[int]bool{
		http.StatusUnauthorized: true, http.StatusForbidden: true, http.StatusBadRequest: true,
		http.StatusTooManyRequests: false, http.StatusInternalServerError: false, http.StatusServiceUnavailable: false,
	} {
		s := newServer(t)
		s.status = status
		errs := New(s.srv.Client(), s.srv.URL, "pk-lf-1", "sk-lf-1", NewBuffers(1)).Send(context.Background(), []*logevent.Event{event("req_1", logevent.StatusSuccess)})
		var se *callbacks.StatusError
		if !errors.As(errs[0], &se) || se.Status != status || callbacks.IsPermanent(errs[0]) != permanent {
			t.Errorf("%d: err = %v, want a StatusError, permanent = %v", status, errs[0], permanent)
		}
	}
}

func TestSendSplitsLargeBatches(t *testing.T) {
	s := newServer(t)
	c := New(s.srv.Client(), s.srv.URL, "pk-lf-1", "sk-lf-1", NewBuffers(1))
	c.maxBatchBytes, c.maxContent = 30<<10, 8<<10 // Langfuse's limits, scaled down
	big := bytes.Repeat([]byte("x"), 7<<10)
	var evs []*logevent.Event
	for i := range 6 {
		ev := event("req_"+string(rune('a'+i)), logevent.StatusSuccess)
		ev.Messages, _ = json.Marshal(string(big)) // 7 KB, twice per event (trace and generation)
		evs = append(evs, ev)
	}
	s.maxBody = 32 << 10
	huge := event("req_huge", logevent.StatusSuccess)
	huge.Response, _ = json.Marshal(string(bytes.Repeat([]byte("y"), c.maxContent+1)))
	evs = append(evs, huge)
	for i, err := range c.Send(context.Background(), evs) {
		if err != nil {
			t.Errorf("event %d: %v", i, err)
		}
	}
	if len(s.batchSizes) < 3 {
		t.Errorf("batches %v: 6 events of 14 KB each need at least 3 batches under 30 KB", s.batchSizes)
	}
	if out := s.gens["req_huge"].Output; !bytes.Contains(out, []byte("omitted by sluice")) {
		t.Errorf("an output over the content bound was sent as %d bytes, want a note", len(out))
	}
}

// readErrors takes what encoding/json takes from an answer's "errors"
// member, refuses what it refuses, and leaves nothing of one answer in the
// buffer the next is read into.
func FuzzReadErrors(f *testing.F) {
	for _, s := range []string{
		`{"successes":[{"id":"a-trace","status":201}],"errors":[]}`,
		`{"successes":[],"errors":[{"id":"a-trace","status":400,"message":"bad","error":{"x":1}}]}`,
		`{"errors":null}`, `{"errors":[{"id":7}]}`, `{"errors":[],"errors":[{"id":"b"}]}`, `[]`, `{`, ``,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, answer []byte) {
		var want []IngestionError
		var top map[string]json.RawMessage
		wantErr := json.Unmarshal(answer, &top)
		if raw, ok := top["errors"]; wantErr == nil && ok && string(raw) != "null" {
			wantErr = json.Unmarshal(raw, &want)
		}
		buf := []byte(`{"errors":[{"id":"left over"}]}`)
		got, err := readErrors(bytes.NewReader(answer), &buf)
		if (err != nil) != (wantErr != nil) {
			t.Fatalf("readErrors(%q): error %v, encoding/json's %v", answer, err, wantErr)
		}
		if err != nil {
			return
		}
		if diff := cmp.Diff(want, got); diff != "" {
			t.Errorf("readErrors(%q) (-encoding/json +got):\n%s", answer, diff)
		}
		if string(buf) != string(answer) {
			t.Errorf("buffer holds %q after reading %q", buf, answer)
		}
	})
}

// A body given back is lent again; the list keeps at most its bound, and
// no body past a batch's size.
func TestBuffersLendWhatTheyKeep(t *testing.T) {
	b := NewBuffers(1).bodies
	first := b.get()
	*first = make([]byte, 0, 1<<10)
	b.put(first)
	b.put(new([]byte)) // over the bound: dropped
	if got := b.get(); got != first {
		t.Error("a body given back was not lent again")
	}
	if got := b.get(); cap(*got) != 0 {
		t.Errorf("the list kept %d bodies past its bound of 1", 2)
	}
	huge := new([]byte)
	*huge = make([]byte, 0, maxKeptBuffer+1)
	b.put(huge)
	if got := b.get(); got == huge {
		t.Error("a body larger than a batch was kept")
	}
	var none freeList // a client without Buffers allocates
	if got := none.get(); got == nil {
		t.Error("no body from a nil list")
	}
	none.put(new([]byte))
}
