// Package langsmith delivers log events to LangSmith through its runs batch
// API: POST {base_url}/runs/batch with the x-api-key header and a body
// {"post":[run, ...]}, as LiteLLM's LangSmith logger sends them. Each log
// event is one root run of type "llm" in the team's project (session_name),
// with id, trace_id and dotted_order, which the batch endpoint requires.
//
// The run id is a UUID v7 derived from the log event (its start time and a
// hash of its id), so a redelivered event carries the same id and LangSmith
// refuses the copy ("409 payloads already received") instead of recording
// it twice: a 409 means delivered.
package langsmith

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/sluice-gateway/sluice/pkg/callbacks"
	"github.com/sluice-gateway/sluice/pkg/logevent"
)

// Limits of one batch request.
const (
	MaxBatchBytes  = 10 << 20
	MaxBatchEvents = 100
)

// DefaultRunName is LiteLLM's default run name (LANGSMITH_DEFAULT_RUN_NAME).
const DefaultRunName = "LLMRun"

// Client sends to one LangSmith project.
type Client struct {
	http          *http.Client
	url           string
	apiKey        string
	project       string
	maxBatchBytes int
}

// New returns a client for project at baseURL (already checked by the
// settings service).
func New(httpClient *http.Client, baseURL, apiKey, project string) *Client {
	return &Client{http: httpClient, url: strings.TrimRight(baseURL, "/") + "/runs/batch",
		apiKey: apiKey, project: project, maxBatchBytes: MaxBatchBytes}
}

// Run is a run as /runs/batch takes it.
type Run struct {
	ID          string          `json:"id"`
	TraceID     string          `json:"trace_id"`
	DottedOrder string          `json:"dotted_order"`
	Name        string          `json:"name"`
	RunType     string          `json:"run_type"`
	SessionName string          `json:"session_name"`
	StartTime   string          `json:"start_time"`
	EndTime     string          `json:"end_time"`
	Inputs      json.RawMessage `json:"inputs"`
	Outputs     json.RawMessage `json:"outputs,omitempty"`
	Error       string          `json:"error,omitempty"`
	Tags        []string        `json:"tags"`
	Extra       map[string]any  `json:"extra"`
}

// RunID is the run id of a log event: a UUID v7 whose time is the call's
// start and whose other bits are a hash of the event's id.
func RunID(ev *logevent.Event) string {
	return uuid7(callbacks.EventTime(ev.StartTime), ev.ID)
}

func uuid7(t time.Time, seed string) string {
	h := sha256.Sum256([]byte("sluice-langsmith-run:" + seed))
	var u [16]byte
	ms := uint64(max(t.UnixMilli(), 0))
	var ts [8]byte
	binary.BigEndian.PutUint64(ts[:], ms)
	copy(u[:6], ts[2:])
	copy(u[6:], h[:10])
	u[6] = 0x70 | u[6]&0x0f // version 7
	u[8] = 0x80 | u[8]&0x3f // RFC 9562 variant
	s := hex.EncodeToString(u[:])
	return s[:8] + "-" + s[8:12] + "-" + s[12:16] + "-" + s[16:20] + "-" + s[20:]
}

// NewRun builds the run of a log event: inputs are the whole log event
// (LiteLLM sends its StandardLoggingPayload), outputs the response.
func (c *Client) NewRun(ev *logevent.Event) (Run, error) {
	start := callbacks.EventTime(ev.StartTime)
	if start.IsZero() {
		start = time.Now().UTC()
	}
	end := callbacks.EventTime(ev.EndTime)
	if end.IsZero() {
		end = start
	}
	id := RunID(ev)
	inputs, err := json.Marshal(ev)
	if err != nil {
		return Run{}, err
	}
	r := Run{
		ID: id, TraceID: id, DottedOrder: dottedTime(start) + id,
		Name: DefaultRunName, RunType: "llm", SessionName: c.project,
		StartTime: start.Format(time.RFC3339Nano), EndTime: end.Format(time.RFC3339Nano),
		Inputs: inputs, Outputs: outputs(ev.Response), Tags: ev.RequestTags,
		Extra: map[string]any{"metadata": map[string]any{
			"sluice_event_id": ev.ID, "trace_id": ev.TraceID, "model": ev.Model, "call_type": ev.CallType,
			"user_api_key_team_id": ev.Metadata.UserAPIKeyTeamID, "user_api_key_alias": ev.Metadata.UserAPIKeyAlias,
		}},
	}
	if r.Tags == nil {
		r.Tags = []string{}
	}
	if ev.Status == logevent.StatusFailure {
		r.Error = ev.ErrorStr
		if r.Error == "" {
			r.Error = "failure"
		}
	}
	return r, nil
}

// dottedTime is the time part of a dotted_order: %Y%m%dT%H%M%S%fZ, UTC.
func dottedTime(t time.Time) string {
	t = t.UTC()
	return t.Format("20060102T150405") + fmt.Sprintf("%06dZ", t.Nanosecond()/1000)
}

// outputs wraps a response that is not a JSON object: LangSmith's outputs
// is an object.
func outputs(resp json.RawMessage) json.RawMessage {
	resp = bytes.TrimSpace(resp)
	if len(resp) == 0 {
		return nil
	}
	if resp[0] == '{' {
		return resp
	}
	b, _ := json.Marshal(map[string]json.RawMessage{"output": resp})
	return b
}

// Send delivers events in batches and returns one error per event (nil:
// LangSmith has the run).
func (c *Client) Send(ctx context.Context, events []*logevent.Event) []error {
	errs := make([]error, len(events))
	var (
		runs    []json.RawMessage
		members []int
		size    int
	)
	flush := func() {
		if len(members) > 0 {
			c.post(ctx, runs, members, errs)
		}
		runs, members, size = nil, nil, 0
	}
	for i, ev := range events {
		r, err := c.NewRun(ev)
		var b []byte
		if err == nil {
			b, err = json.Marshal(r)
		}
		if err != nil {
			errs[i] = callbacks.Permanent(fmt.Errorf("encode log event %s for LangSmith: %w", ev.ID, err))
			continue
		}
		if len(members) > 0 && (size+len(b) > c.maxBatchBytes || len(members) == MaxBatchEvents) {
			flush()
		}
		runs, members, size = append(runs, b), append(members, i), size+len(b)+1
	}
	flush()
	return errs
}

// post sends one batch. A 409 says LangSmith already has (some of) these
// runs: a batch of one is then delivered, a larger one is sent again run by
// run to learn which.
func (c *Client) post(ctx context.Context, runs []json.RawMessage, members []int, errs []error) {
	err := c.request(ctx, runs)
	var se *callbacks.StatusError
	if errors.As(err, &se) && se.Status == http.StatusConflict {
		if len(runs) == 1 {
			err = nil
		} else {
			for k := range runs {
				c.post(ctx, runs[k:k+1], members[k:k+1], errs)
			}
			return
		}
	}
	for _, i := range members {
		errs[i] = err
	}
}

func (c *Client) request(ctx context.Context, runs []json.RawMessage) error {
	body, err := json.Marshal(map[string]any{"post": runs})
	if err != nil {
		return callbacks.Permanent(fmt.Errorf("encode LangSmith batch: %w", err))
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, c.url, bytes.NewReader(body))
	if err != nil {
		return callbacks.Permanent(fmt.Errorf("LangSmith request: %w", err))
	}
	req.Header.Set("x-api-key", c.apiKey)
	req.Header.Set("Content-Type", "application/json")
	resp, err := c.http.Do(req)
	if err != nil {
		return fmt.Errorf("LangSmith runs batch: %w", err)
	}
	defer callbacks.Drain(resp)
	if resp.StatusCode/100 != 2 {
		return callbacks.ResponseError("LangSmith", resp)
	}
	return nil
}
