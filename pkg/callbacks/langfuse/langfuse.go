// Package langfuse delivers log events to Langfuse through its batch
// ingestion API: POST {host}/api/public/ingestion with HTTP Basic auth
// (public key : secret key) and a body {"batch":[event, ...]}, each event an
// envelope {id, type, timestamp, body}. Every log event becomes a
// trace-create and a generation-create, the way LiteLLM's Langfuse logger
// records a call. Langfuse answers 207 with per-event successes and
// errors; it deduplicates envelopes by id, and sluice's ids are derived
// from the log event's id, so a redelivered event is not recorded twice.
package langfuse

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/sluice-gateway/sluice/pkg/callbacks"
	"github.com/sluice-gateway/sluice/pkg/logevent"
)

// Limits of one ingestion request. Langfuse refuses batches over 3.5 MB.
const (
	MaxBatchBytes  = 3 << 20
	MaxBatchEvents = 200 // log events (two envelopes each)
	// maxContentBytes bounds an event's input or output; larger ones are
	// replaced by a note so the event still fits a batch.
	maxContentBytes = 1 << 20
	// maxAnswerBytes bounds how much of an answer is read.
	maxAnswerBytes = 1 << 20
)

// Client sends to one Langfuse project.
type Client struct {
	http *http.Client
	url  string
	auth string
	// limits, MaxBatchBytes and maxContentBytes unless a test lowers them
	maxBatchBytes, maxContent int
}

// New returns a client for the project of publicKey at host (a base URL such
// as https://cloud.langfuse.com, already checked by the settings service).
func New(httpClient *http.Client, host, publicKey, secretKey string) *Client {
	return &Client{
		http:          httpClient,
		url:           strings.TrimRight(host, "/") + "/api/public/ingestion",
		auth:          "Basic " + base64.StdEncoding.EncodeToString([]byte(publicKey+":"+secretKey)),
		maxBatchBytes: MaxBatchBytes, maxContent: maxContentBytes,
	}
}

// Envelope is one event of an ingestion batch.
type Envelope struct {
	ID        string `json:"id"`
	Type      string `json:"type"`
	Timestamp string `json:"timestamp"`
	Body      any    `json:"body"`
}

// Trace is a trace-create body.
type Trace struct {
	ID        string          `json:"id"`
	Timestamp string          `json:"timestamp"`
	Name      string          `json:"name"`
	UserID    string          `json:"userId,omitempty"`
	Input     json.RawMessage `json:"input,omitempty"`
	Output    json.RawMessage `json:"output,omitempty"`
	Metadata  any             `json:"metadata,omitempty"`
	Tags      []string        `json:"tags"`
}

// Generation is a generation-create body.
type Generation struct {
	ID                  string          `json:"id"`
	TraceID             string          `json:"traceId"`
	Name                string          `json:"name"`
	StartTime           string          `json:"startTime"`
	EndTime             string          `json:"endTime"`
	CompletionStartTime string          `json:"completionStartTime,omitempty"`
	Model               string          `json:"model,omitempty"`
	ModelParameters     map[string]any  `json:"modelParameters,omitempty"`
	Input               json.RawMessage `json:"input,omitempty"`
	Output              json.RawMessage `json:"output,omitempty"`
	Usage               *Usage          `json:"usage,omitempty"`
	UsageDetails        *UsageDetails   `json:"usageDetails,omitempty"`
	CostDetails         *CostDetails    `json:"costDetails,omitempty"`
	Metadata            any             `json:"metadata,omitempty"`
	Level               string          `json:"level"`
	StatusMessage       string          `json:"statusMessage,omitempty"`
}

// UsageDetails are a generation's token counts by kind.
type UsageDetails struct {
	Input  int64 `json:"input"`
	Output int64 `json:"output"`
	Total  int64 `json:"total"`
}

// CostDetails are a generation's costs.
type CostDetails struct {
	Total float64 `json:"total"`
}

// GenerationMetadata is what LiteLLM puts beside a generation: the caller
// (key, team) and the call's routing. (Structs, not maps: they encode
// several times faster, and every delivered event encodes one.)
type GenerationMetadata struct {
	UserAPIKeyMetadata  logevent.Metadata     `json:"user_api_key_metadata"`
	CallType            string                `json:"call_type"`
	CustomLLMProvider   string                `json:"custom_llm_provider"`
	Status              string                `json:"status"`
	ModelGroup          string                `json:"model_group,omitempty"`
	ModelID             string                `json:"model_id,omitempty"`
	APIBase             string                `json:"api_base,omitempty"`
	LiteLLMResponseCost float64               `json:"litellm_response_cost,omitempty"`
	ErrorInformation    *logevent.ErrorInfo   `json:"error_information,omitempty"`
	Passthrough         *logevent.Passthrough `json:"passthrough,omitempty"`
}

// Usage is Langfuse's usage object.
type Usage struct {
	Input  int64  `json:"input"`
	Output int64  `json:"output"`
	Total  int64  `json:"total"`
	Unit   string `json:"unit"`
}

// Envelope ids: unique per log event and kind, stable across redeliveries
// (Langfuse deduplicates on them).
func traceEnvelopeID(ev *logevent.Event) string      { return ev.ID + "-trace" }
func generationEnvelopeID(ev *logevent.Event) string { return ev.ID + "-generation" }

// Envelopes returns the two ingestion events of a log event, its input and
// output bounded to maxContent bytes each.
func Envelopes(ev *logevent.Event, maxContent int) [2]Envelope {
	start := stamp(ev.StartTime)
	end := stamp(ev.EndTime)
	name := "litellm-" + ev.CallType // LiteLLM's trace name: dashboards keep working
	traceID := ev.TraceID
	if traceID == "" {
		traceID = ev.ID
	}
	input := content(ev.Messages, maxContent)
	output := content(ev.Response, maxContent)
	level := "DEFAULT"
	if ev.Status == logevent.StatusFailure {
		level = "ERROR"
		if len(output) == 0 {
			output, _ = json.Marshal(ev.ErrorStr)
		}
	}
	gen := Generation{
		ID: ev.ID, TraceID: traceID, Name: name, StartTime: start, EndTime: end,
		Model: ev.Model, ModelParameters: scalars(ev.ModelParameters), Input: input, Output: output,
		Usage:        &Usage{Input: ev.PromptTokens, Output: ev.CompletionTokens, Total: ev.TotalTokens, Unit: "TOKENS"},
		UsageDetails: &UsageDetails{Input: ev.PromptTokens, Output: ev.CompletionTokens, Total: ev.TotalTokens},
		Metadata:     generationMetadata(ev),
		Level:        level, StatusMessage: ev.ErrorStr,
	}
	if ev.CompletionStartTime > 0 {
		gen.CompletionStartTime = stamp(ev.CompletionStartTime)
	}
	if ev.ResponseCost > 0 {
		gen.CostDetails = &CostDetails{Total: ev.ResponseCost}
	}
	trace := Trace{ID: traceID, Timestamp: start, Name: name, UserID: ev.EndUser, Input: input, Output: output,
		Metadata: ev.Metadata, Tags: ev.RequestTags}
	if trace.Tags == nil {
		trace.Tags = []string{}
	}
	return [2]Envelope{
		{ID: traceEnvelopeID(ev), Type: "trace-create", Timestamp: start, Body: trace},
		{ID: generationEnvelopeID(ev), Type: "generation-create", Timestamp: end, Body: gen},
	}
}

func generationMetadata(ev *logevent.Event) *GenerationMetadata {
	return &GenerationMetadata{UserAPIKeyMetadata: ev.Metadata, CallType: ev.CallType, CustomLLMProvider: ev.CustomLLMProvider,
		Status: ev.Status, ModelGroup: ev.ModelGroup, ModelID: ev.ModelID, APIBase: ev.APIBase,
		LiteLLMResponseCost: ev.ResponseCost, ErrorInformation: ev.ErrorInformation, Passthrough: ev.Passthrough}
}

// scalars keeps the model parameters Langfuse's MapValue takes: strings,
// numbers, booleans.
func scalars(params map[string]any) map[string]any {
	out := map[string]any{}
	for k, v := range params {
		switch v.(type) {
		case string, bool, float64, float32, int, int64, json.Number:
			out[k] = v
		}
	}
	if len(out) == 0 {
		return nil
	}
	return out
}

// content bounds an input or output: past max bytes it becomes a note.
func content(raw json.RawMessage, max int) json.RawMessage {
	if len(raw) <= max {
		return raw
	}
	note, _ := json.Marshal(fmt.Sprintf("[omitted by sluice: %d bytes, more than a Langfuse batch may carry]", len(raw)))
	return note
}

func stamp(sec float64) string {
	t := callbacks.EventTime(sec)
	if t.IsZero() {
		t = time.Now().UTC()
	}
	return t.Format("2006-01-02T15:04:05.000000Z")
}

// IngestionResponse is Langfuse's answer.
type IngestionResponse struct {
	Successes []struct {
		ID     string `json:"id"`
		Status int    `json:"status"`
	} `json:"successes"`
	Errors []IngestionError `json:"errors"`
}

// IngestionError is one refused envelope.
type IngestionError struct {
	ID      string          `json:"id"`
	Status  int             `json:"status"`
	Message string          `json:"message,omitempty"`
	Error   json.RawMessage `json:"error,omitempty"`
}

// Send delivers events, in as few requests as the batch limits allow, and
// returns one error per event (nil: Langfuse accepted both its envelopes).
func (c *Client) Send(ctx context.Context, events []*logevent.Event) []error {
	errs := make([]error, len(events))
	var (
		batch   []json.RawMessage
		members []int // indexes of the events in batch
		size    int
	)
	flush := func() {
		if len(members) == 0 {
			return
		}
		c.post(ctx, batch, members, events, errs)
		batch, members, size = nil, nil, 0
	}
	for i, ev := range events {
		env := Envelopes(ev, c.maxContent)
		var encoded [2]json.RawMessage
		var err error
		for k := range env {
			if encoded[k], err = json.Marshal(env[k]); err != nil {
				break
			}
		}
		if err != nil {
			errs[i] = callbacks.Permanent(fmt.Errorf("encode log event %s for Langfuse: %w", ev.ID, err))
			continue
		}
		n := len(encoded[0]) + len(encoded[1]) + 2
		if len(members) > 0 && (size+n > c.maxBatchBytes || len(members) == MaxBatchEvents) {
			flush()
		}
		batch = append(batch, encoded[0], encoded[1])
		members = append(members, i)
		size += n
	}
	flush()
	return errs
}

// post sends one batch and sets the errors of its members.
func (c *Client) post(ctx context.Context, batch []json.RawMessage, members []int, events []*logevent.Event, errs []error) {
	fail := func(err error) {
		for _, i := range members {
			errs[i] = err
		}
	}
	// The envelopes are encoded JSON already: joined, not encoded again.
	size := 128
	for _, env := range batch {
		size += len(env) + 1
	}
	body := make([]byte, 0, size)
	body = append(body, `{"batch":[`...)
	for i, env := range batch {
		if i > 0 {
			body = append(body, ',')
		}
		body = append(body, env...)
	}
	body = append(body, `],"metadata":{"batch_size":`...)
	body = strconv.AppendInt(body, int64(len(batch)), 10)
	body = append(body, `,"sdk_integration":"sluice","sdk_name":"sluice"}}`...)
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, c.url, bytes.NewReader(body))
	if err != nil {
		fail(callbacks.Permanent(fmt.Errorf("Langfuse request: %w", err)))
		return
	}
	req.Header.Set("Authorization", c.auth)
	req.Header.Set("Content-Type", "application/json")
	resp, err := c.http.Do(req)
	if err != nil {
		fail(fmt.Errorf("Langfuse ingestion: %w", err))
		return
	}
	defer resp.Body.Close()
	if resp.StatusCode/100 != 2 {
		fail(callbacks.ResponseError("Langfuse", resp))
		return
	}
	var answer IngestionResponse
	if err := json.NewDecoder(io.LimitReader(resp.Body, maxAnswerBytes)).Decode(&answer); err != nil {
		if resp.StatusCode == http.StatusMultiStatus {
			// A 207 says some envelopes may have failed, but not which:
			// send them all again (Langfuse deduplicates the others).
			fail(fmt.Errorf("Langfuse ingestion answered 207 with an unreadable body: %w", err))
		}
		return
	}
	byEnvelope := map[string]int{}
	for _, i := range members {
		byEnvelope[traceEnvelopeID(events[i])] = i
		byEnvelope[generationEnvelopeID(events[i])] = i
	}
	for _, e := range answer.Errors {
		i, ok := byEnvelope[e.ID]
		if !ok || errs[i] != nil && callbacks.IsPermanent(errs[i]) {
			continue
		}
		msg := e.Message
		if msg == "" {
			msg = string(e.Error)
		}
		errs[i] = callbacks.ClassifyStatus(e.Status, &callbacks.StatusError{Destination: "Langfuse", Status: e.Status,
			Message: fmt.Sprintf("envelope %s: %s", e.ID, msg)})
	}
}
