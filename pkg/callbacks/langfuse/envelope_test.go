package langfuse

import (
	"bytes"
	"encoding/json"
	"math"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/sluice-gateway/sluice/pkg/callbacks"
	"github.com/sluice-gateway/sluice/pkg/logevent"
)

// The ingestion bodies as structs, encoded by encoding/json: the reference
// that appendEnvelopes, which writes them without reflection, is held to
// byte for byte (but for HTML escapes, which neither side makes here).

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

// stamp is appendStamp's reference: time.Format's.
func stamp(sec float64) string {
	t := callbacks.EventTime(sec)
	if t.IsZero() {
		t = time.Now().UTC()
	}
	return t.Format(stampLayout)
}

// referenceEnvelopes returns the two ingestion events of a log event as
// structs, for encoding/json (the fields are appendEnvelopes's own: what is
// held to the reference is the encoding).
func referenceEnvelopes(ev *logevent.Event, maxContent int) [2]Envelope {
	name, traceID, input, output, level := envelopeFields(ev, maxContent)
	start, end := stamp(ev.StartTime), stamp(ev.EndTime)
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

// scalars keeps the model parameters Langfuse's MapValue takes — strings,
// numbers, booleans — of the event's parameters as encoding/json decodes
// them into a map (nil when there are none, or they are no object).
func scalars(raw json.RawMessage) map[string]any {
	var params map[string]any
	if json.Unmarshal(raw, &params) != nil {
		return nil
	}
	out := map[string]any{}
	for k, v := range params {
		switch v.(type) {
		case string, bool, float64:
			out[k] = v
		}
	}
	if len(out) == 0 {
		return nil
	}
	return out
}

// marshalNoHTMLEscape is encoding/json's output without HTML escapes.
func marshalNoHTMLEscape(v any) json.RawMessage {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		panic(err)
	}
	return bytes.TrimSuffix(buf.Bytes(), []byte("\n"))
}

// reference is what encoding/json writes for ev's two envelopes.
func reference(ev *logevent.Event, maxContent int) string {
	env := referenceEnvelopes(ev, maxContent)
	return string(marshalNoHTMLEscape(env[0])) + "," + string(marshalNoHTMLEscape(env[1]))
}

func encodingCases() map[string]*logevent.Event {
	ok := event("req_ok", logevent.StatusSuccess)
	failed := event("req_bad", logevent.StatusFailure)
	failedWithBody := event("req_bad_body", logevent.StatusFailure)
	failedWithBody.Response = json.RawMessage(`{"error":{"message":"<overloaded> & \u2028"}}`)
	failedWithBody.ErrorInformation = &logevent.ErrorInfo{ErrorCode: "529", ErrorClass: "APIError", LLMProvider: "anthropic", ErrorMessage: "overloaded"}
	passthrough := event("req_pt", logevent.StatusSuccess)
	passthrough.CallType, passthrough.Passthrough = logevent.CallPassthrough, &logevent.Passthrough{Method: "POST", Path: "/v1/messages", StatusCode: 200}
	bare := &logevent.Event{ID: "req_bare", Status: logevent.StatusSuccess, CallType: logevent.CallEmbedding, StartTime: 1.7e9, EndTime: 1.7e9 + 0.25}
	params := event("req_params", logevent.StatusSuccess)
	params.ModelParameters = json.RawMessage(`{"n":2,"none":null,"seed":-5,"stop":["x"],"stream":true,"temperature":0.7,` +
		`"tiny":1e-9,"tools":{},"top_p":0.9,"user":"a\"b\u003cc\u003e","we\"ird":"k","z":1E2,"w":"\u00e9\ud83d\ude00","z":0.50}`)
	onlyNonScalars := event("req_objects", logevent.StatusSuccess)
	onlyNonScalars.ModelParameters = json.RawMessage(`{"stop":["x"],"s":"x","s":null}`)
	cheap := event("req_cheap", logevent.StatusSuccess)
	cheap.ResponseCost, cheap.TraceID, cheap.RequestTags, cheap.EndUser = 2.5e-7, "", nil, "user-1"
	cheap.Metadata = logevent.Metadata{UserAPIKeyHash: "h", UserAPIKeyAlias: "al", UserAPIKeyTeamID: "t", UserAPIKeyTeamAlias: "ta",
		RequesterIPAddress: "127.0.0.1", RequestID: "r", BatchID: "batch_1", CustomID: "line-\"1\""}
	big := event("req_big", logevent.StatusSuccess)
	big.Messages = json.RawMessage(`"` + strings.Repeat("x", 300) + `"`)
	return map[string]*logevent.Event{"success": ok, "failure": failed, "failure with a body": failedWithBody,
		"passthrough": passthrough, "bare": bare, "model parameters": params, "only non-scalar parameters": onlyNonScalars,
		"tiny cost, no trace id, nil tags": cheap, "content over the limit": big}
}

func TestAppendEnvelopesMatchesEncodingJSON(t *testing.T) {
	for name, ev := range encodingCases() {
		t.Run(name, func(t *testing.T) {
			got, err := appendEnvelopes([]byte("["), ev, 256)
			if err != nil {
				t.Fatal(err)
			}
			if want := "[" + reference(ev, 256); string(got) != want {
				t.Errorf("appendEnvelopes:\n got %s\nwant %s", got, want)
			}
		})
	}
}

func TestAppendEnvelopesRefusesWhatJSONCannotCarry(t *testing.T) {
	for name, mutate := range map[string]func(*logevent.Event){
		"NaN cost":           func(ev *logevent.Event) { ev.ResponseCost = math.NaN() },
		"infinite parameter": func(ev *logevent.Event) { ev.ModelParameters = json.RawMessage(`{"t":1e400}`) },
		"bad number":         func(ev *logevent.Event) { ev.ModelParameters = json.RawMessage(`{"t":0x1}`) },
	} {
		ev := event("req_x", logevent.StatusSuccess)
		mutate(ev)
		if got, err := appendEnvelopes(nil, ev, 1<<20); err == nil {
			t.Errorf("%s: encoded %s, want an error", name, got)
		}
	}
}

func FuzzAppendEnvelopes(f *testing.F) {
	f.Add("req_1", "acompletion", "success", "gpt-4o", "<b>&\u2028", "team", `[{"role":"user","content":"hi"}]`, `{"a":1}`, 0.002, int64(12), 1.7e9, "x", 0.5)
	f.Add("", "", "failure", "", "", "", ``, ``, 1e-7, int64(-1), 0.0, "", -1e21)
	f.Fuzz(func(t *testing.T, id, callType, status, model, errStr, team, messages, response string, cost float64, tokens int64, start float64, param string, paramValue float64) {
		valid := func(s string) string { return strings.ToValidUTF8(s, "\uFFFD") }
		raw := func(s string) json.RawMessage {
			if s == "" || !json.Valid([]byte(s)) {
				return nil
			}
			var buf bytes.Buffer
			_ = json.Compact(&buf, []byte(s)) // encoding/json compacts raw values; decoded events hold them compact
			return buf.Bytes()
		}
		ev := &logevent.Event{ID: valid(id), TraceID: valid(team), CallType: valid(callType), Status: valid(status), Model: valid(model),
			ErrorStr: valid(errStr), ResponseCost: cost, PromptTokens: tokens, TotalTokens: tokens,
			Messages: raw(messages), Response: raw(response),
			Metadata:        logevent.Metadata{UserAPIKeyTeamID: valid(team)},
			ModelParameters: fuzzParams(valid(param), paramValue)}
		if !(start > 0 && start < 1e11) {
			start = 1.7e9 // a time of its own: a missing one is "now", on each side its own
		}
		ev.StartTime, ev.EndTime = start, start+1
		got, err := appendEnvelopes(nil, ev, 64)
		if math.IsNaN(cost) || math.IsInf(cost, 0) || math.IsNaN(paramValue) || math.IsInf(paramValue, 0) {
			if err == nil {
				t.Fatalf("a non-finite number encoded: %s", got)
			}
			return
		}
		if err != nil {
			t.Fatal(err)
		}
		if want := reference(ev, 64); string(got) != want {
			t.Fatalf("appendEnvelopes:\n got %s\nwant %s", got, want)
		}
	})
}

// fuzzParams is the model parameters {name: value, "s": name}, the number
// as strconv writes it (NaN and infinities make it no JSON).
func fuzzParams(name string, value float64) json.RawMessage {
	q, _ := json.Marshal(name)
	return json.RawMessage(`{` + string(q) + `:` + strconv.FormatFloat(value, 'g', -1, 64) + `,"s":` + string(q) + `}`)
}

// appendStamp writes what time.Format writes, quoted, for any event time:
// the epoch, today, the microsecond's rounding, years past 9999.
func FuzzAppendStamp(f *testing.F) {
	for _, sec := range []float64{1e-6, 1, 1.5, 1764230400.123456, 1764230400.9999996, 253402300799.999999, 253402300800, 1e15} {
		f.Add(sec)
	}
	f.Fuzz(func(t *testing.T, sec float64) {
		if !(sec > 0) || sec > 1e15 { // no time is now; past that, microseconds overflow
			return
		}
		want := `"` + stamp(sec) + `"`
		if got := string(appendStamp([]byte("x"), sec)); got != "x"+want {
			t.Errorf("appendStamp(%v) = %s, want x%s", sec, got, want)
		}
	})
}

// BenchmarkAppendEnvelopes: every delivered event is encoded here; this
// one is an embeddings call's, as make bench's callback scenario makes.
func BenchmarkAppendEnvelopes(b *testing.B) {
	ev := event("req_ok", logevent.StatusSuccess)
	ev.CallType, ev.Model, ev.ModelParameters = logevent.CallEmbedding, "text-embedding-3-small", nil
	ev.Messages = json.RawMessage(`"` + strings.Repeat("A paragraph of a retrieval corpus. ", 14) + `"`)
	ev.Response = json.RawMessage(`{"object":"list","model":"text-embedding-3-small","data_count":1,"dimensions":1536,"encoding_format":"float","usage":{"prompt_tokens":120,"total_tokens":120}}`)
	ev.Metadata = logevent.Metadata{UserAPIKeyHash: strings.Repeat("0f", 32), UserAPIKeyAlias: "bench", UserAPIKeyTeamID: "team-4f1c2b",
		UserAPIKeyTeamAlias: "bench-callback", RequesterIPAddress: "127.0.0.1", RequestID: "req_8c1f0e7a2b"}
	var buf []byte
	b.ReportAllocs()
	for b.Loop() {
		var err error
		if buf, err = appendEnvelopes(buf[:0], ev, maxContentBytes); err != nil {
			b.Fatal(err)
		}
	}
	b.SetBytes(int64(len(buf)))
}
