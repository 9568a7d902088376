package langsmith

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"regexp"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/sluice-gateway/sluice/pkg/callbacks"
	"github.com/sluice-gateway/sluice/pkg/logevent"
)

// run is a run as LangSmith's run-create schema defines it; the server
// decodes strictly.
type run struct {
	ID          string          `json:"id"`
	TraceID     string          `json:"trace_id"`
	DottedOrder string          `json:"dotted_order"`
	ParentRunID string          `json:"parent_run_id"`
	Name        string          `json:"name"`
	RunType     string          `json:"run_type"`
	SessionName string          `json:"session_name"`
	StartTime   time.Time       `json:"start_time"`
	EndTime     time.Time       `json:"end_time"`
	Inputs      map[string]any  `json:"inputs"`
	Outputs     map[string]any  `json:"outputs"`
	Error       string          `json:"error"`
	Tags        []string        `json:"tags"`
	Extra       map[string]any  `json:"extra"`
	Events      json.RawMessage `json:"events"`
}

var uuid7Pattern = regexp.MustCompile(`^[0-9a-f]{8}-[0-9a-f]{4}-7[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$`)

// server is a LangSmith /runs/batch endpoint. Like LangSmith, it refuses a
// run id it already has with 409.
type server struct {
	t        *testing.T
	srv      *httptest.Server
	mu       sync.Mutex
	runs     map[string]run
	requests int
	status   int // when set, every request answers this
}

func newServer(t *testing.T) *server {
	s := &server{t: t, runs: map[string]run{}}
	s.srv = httptest.NewServer(http.HandlerFunc(s.serve))
	t.Cleanup(s.srv.Close)
	return s
}

func (s *server) serve(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.requests++
	if r.Method != http.MethodPost || r.URL.Path != "/runs/batch" {
		s.t.Errorf("request %s %s", r.Method, r.URL.Path)
	}
	if k := r.Header.Get("x-api-key"); k != "lsv2_pt_key" {
		s.t.Errorf("x-api-key %q", k)
		w.WriteHeader(http.StatusUnauthorized)
		return
	}
	if s.status != 0 {
		w.WriteHeader(s.status)
		return
	}
	var req struct {
		Post  []json.RawMessage `json:"post"`
		Patch []json.RawMessage `json:"patch"`
	}
	body := new(bytes.Buffer)
	body.ReadFrom(r.Body)
	dec := json.NewDecoder(body)
	dec.DisallowUnknownFields()
	if err := dec.Decode(&req); err != nil {
		s.t.Errorf("body: %v", err)
		w.WriteHeader(http.StatusUnprocessableEntity)
		return
	}
	var batch []run
	for _, raw := range req.Post {
		var rn run
		dec := json.NewDecoder(bytes.NewReader(raw))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&rn); err != nil {
			s.t.Errorf("run: %v: %s", err, raw)
			w.WriteHeader(http.StatusUnprocessableEntity)
			return
		}
		st := rn.StartTime.UTC()
		switch {
		case !uuid7Pattern.MatchString(rn.ID):
			s.t.Errorf("run id %q is not a UUID v7", rn.ID)
		case rn.TraceID != rn.ID || rn.ParentRunID != "":
			s.t.Errorf("run %s: trace %s parent %q, want a root run", rn.ID, rn.TraceID, rn.ParentRunID)
		case rn.DottedOrder != st.Format("20060102T150405")+st.Format(".000000")[1:]+"Z"+rn.ID:
			s.t.Errorf("dotted_order %q for start %v and id %s", rn.DottedOrder, st, rn.ID)
		case rn.RunType != "llm":
			s.t.Errorf("run_type %q", rn.RunType)
		}
		if _, dup := s.runs[rn.ID]; dup {
			w.WriteHeader(http.StatusConflict)
			w.Write([]byte(`{"error":"Conflict: payload already received"}`))
			return
		}
		batch = append(batch, rn)
	}
	for _, rn := range batch {
		s.runs[rn.ID] = rn
	}
	w.WriteHeader(http.StatusAccepted)
	w.Write([]byte(`{}`))
}

var t0 = time.Date(2026, 11, 24, 12, 0, 0, 123456000, time.UTC)

func event(id, status string) *logevent.Event {
	ev := &logevent.Event{ID: id, TraceID: id, CallType: logevent.CallEmbedding, Status: status, Model: "text-embedding-3-small",
		Metadata: logevent.Metadata{UserAPIKeyTeamID: "team-a"}, RequestTags: []string{"nightly"}}
	ev.SetTimes(t0, time.Time{}, t0.Add(250*time.Millisecond))
	if status == logevent.StatusSuccess {
		ev.Response = json.RawMessage(`{"object":"list","usage":{"prompt_tokens":3}}`)
	} else {
		ev.ErrorStr = "Invalid input."
	}
	return ev
}

func TestSendWireFormat(t *testing.T) {
	s := newServer(t)
	c := New(s.srv.Client(), s.srv.URL+"/", "lsv2_pt_key", "team-a-project")
	evs := []*logevent.Event{event("req_ok", logevent.StatusSuccess), event("req_bad", logevent.StatusFailure)}
	if errs := c.Send(context.Background(), evs); errs[0] != nil || errs[1] != nil {
		t.Fatalf("errors %v", errs)
	}
	ok := s.runs[RunID(evs[0])]
	if ok.SessionName != "team-a-project" || ok.Name != DefaultRunName || !ok.StartTime.Equal(t0.Truncate(time.Microsecond)) ||
		!ok.EndTime.Equal(t0.Add(250*time.Millisecond)) || ok.Error != "" || !slices.Equal(ok.Tags, []string{"nightly"}) {
		t.Errorf("success run %+v", ok)
	}
	if diff := cmp.Diff(map[string]any{"object": "list", "usage": map[string]any{"prompt_tokens": 3.0}}, ok.Outputs); diff != "" {
		t.Errorf("outputs (-want +got):\n%s", diff)
	}
	if ok.Inputs["id"] != "req_ok" || ok.Inputs["call_type"] != logevent.CallEmbedding {
		t.Errorf("inputs are not the log event: %v", ok.Inputs)
	}
	bad := s.runs[RunID(evs[1])]
	if bad.Error != "Invalid input." || bad.Outputs != nil {
		t.Errorf("failure run: error %q outputs %v", bad.Error, bad.Outputs)
	}
	if s.requests != 1 {
		t.Errorf("%d requests, want one batch", s.requests)
	}
}

func TestRunIDsAreStable(t *testing.T) {
	a, b := event("req_1", logevent.StatusSuccess), event("req_2", logevent.StatusSuccess)
	if RunID(a) != RunID(event("req_1", logevent.StatusSuccess)) || RunID(a) == RunID(b) {
		t.Errorf("RunID: %s, %s", RunID(a), RunID(b))
	}
	ms := fmt.Sprintf("%012x", t0.UnixMilli())
	if !uuid7Pattern.MatchString(RunID(a)) || RunID(a)[:13] != ms[:8]+"-"+ms[8:] {
		t.Errorf("RunID %s: want a UUID v7 carrying the start time", RunID(a))
	}
}

func TestRedeliveryIsNotRecordedTwice(t *testing.T) {
	s := newServer(t)
	c := New(s.srv.Client(), s.srv.URL, "lsv2_pt_key", "p")
	first := event("req_1", logevent.StatusSuccess)
	if errs := c.Send(context.Background(), []*logevent.Event{first}); errs[0] != nil {
		t.Fatal(errs[0])
	}
	// req_1 again, in a batch with a new event: LangSmith refuses the batch
	// with 409; the client learns run by run that both are delivered.
	second := event("req_2", logevent.StatusSuccess)
	if errs := c.Send(context.Background(), []*logevent.Event{first, second}); errs[0] != nil || errs[1] != nil {
		t.Fatalf("redelivery: %v", errs)
	}
	if len(s.runs) != 2 {
		t.Errorf("%d runs stored, want 2", len(s.runs))
	}
}

func TestSendFailures(t *testing.T) {
	for status, permanent := range map[int]bool{
		http.StatusUnauthorized: true, http.StatusUnprocessableEntity: true,
		http.StatusTooManyRequests: false, http.StatusBadGateway: false,
	} {
		s := newServer(t)
		s.status = status
		errs := New(s.srv.Client(), s.srv.URL, "lsv2_pt_key", "p").Send(context.Background(), []*logevent.Event{event("req_1", logevent.StatusSuccess)})
		if errs[0] == nil || callbacks.IsPermanent(errs[0]) != permanent {
			t.Errorf("%d: err = %v, want permanent = %v", status, errs[0], permanent)
		}
	}
}
