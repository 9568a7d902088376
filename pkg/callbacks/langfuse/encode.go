package langfuse

import (
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"math"
	"slices"
	"strconv"

	"github.com/sluice-gateway/sluice/pkg/jsonscan"
	"github.com/sluice-gateway/sluice/pkg/logevent"
)

// appendEnvelopes appends the trace-create and generation-create envelopes
// of ev, separated by a comma: what encoding/json writes for Envelopes(ev)
// (envelope_test.go holds the two to the same bytes), but for HTML escapes,
// without reflection — every delivered event is encoded here. ev's raw
// members must hold valid JSON, as decoded events do.
func appendEnvelopes(b []byte, ev *logevent.Event, maxContent int) ([]byte, error) {
	if math.IsNaN(ev.ResponseCost) || math.IsInf(ev.ResponseCost, 0) {
		return nil, errors.New("its cost is not a finite number")
	}
	name, traceID, input, output, level := envelopeFields(ev, maxContent)
	var stamps [3 * 32]byte // start, end, completion start, quoted; on the stack
	start := appendStamp(stamps[:0], ev.StartTime)
	end := appendStamp(start[len(start):], ev.EndTime)
	// The event id, trace id and name appear in both envelopes (the id
	// also in the envelope ids): quoted once, copied after.
	// (A later append may move q, never change what it held.)
	var quoted [256]byte
	q := jsonscan.AppendString(quoted[:0], ev.ID)
	id := q
	qTrace := id
	if traceID != ev.ID {
		n := len(q)
		q = jsonscan.AppendString(q, traceID)
		qTrace = q[n:]
	}
	n := len(q)
	q = jsonscan.AppendString(q, name)
	qName := q[n:]
	env := jsonscan.StartObject(b)
	env.Key("id")
	env.B = append(append(env.B, id[:len(id)-1]...), `-trace"`...)
	env.Key("type")
	env.B = append(env.B, `"trace-create"`...) // needs no escape
	env.Raw("timestamp", start)
	env.Key("body")
	trace := jsonscan.StartObject(env.B)
	trace.Raw("id", qTrace)
	trace.Raw("timestamp", start)
	trace.Raw("name", qName)
	trace.StringOmitEmpty("userId", ev.EndUser)
	trace.RawOmitEmpty("input", input)
	trace.RawOmitEmpty("output", output)
	trace.Key("metadata")
	mark := len(trace.B)
	trace.B = logevent.AppendMetadata(trace.B, &ev.Metadata)
	// The generation carries it again: copied, not encoded twice (a
	// later append may move b, never change what it held).
	metadata := trace.B[mark:]
	tags := ev.RequestTags
	if tags == nil {
		tags = []string{}
	}
	trace.Strings("tags", tags)
	env.B = trace.End()
	b = append(env.End(), ',')

	env = jsonscan.StartObject(b)
	env.Key("id")
	env.B = append(append(env.B, id[:len(id)-1]...), `-generation"`...)
	env.Key("type")
	env.B = append(env.B, `"generation-create"`...) // needs no escape
	env.Raw("timestamp", end)
	env.Key("body")
	gen := jsonscan.StartObject(env.B)
	gen.Raw("id", id)
	gen.Raw("traceId", qTrace)
	gen.Raw("name", qName)
	gen.Raw("startTime", start)
	gen.Raw("endTime", end)
	if ev.CompletionStartTime > 0 {
		gen.Raw("completionStartTime", appendStamp(end[len(end):], ev.CompletionStartTime))
	}
	gen.StringOmitEmpty("model", ev.Model)
	params, err := modelParameters(ev.ModelParameters)
	if err != nil {
		return nil, err
	}
	if scalarCount(params) > 0 {
		gen.Key("modelParameters")
		if gen.B, err = appendScalars(gen.B, params); err != nil {
			return nil, err
		}
	}
	gen.RawOmitEmpty("input", input)
	gen.RawOmitEmpty("output", output)
	gen.Key("usage")
	gen.B = appendTokens(gen.B, ev, "TOKENS")
	gen.Key("usageDetails")
	gen.B = appendTokens(gen.B, ev, "")
	if ev.ResponseCost > 0 {
		gen.Key("costDetails")
		cost := jsonscan.StartObject(gen.B)
		cost.Float("total", ev.ResponseCost)
		gen.B = cost.End()
	}
	gen.Key("metadata")
	gen.B = appendGenerationMetadata(gen.B, ev, metadata)
	gen.Key("level")
	gen.B = append(append(append(gen.B, '"'), level...), '"') // DEFAULT or ERROR: no escape
	gen.StringOmitEmpty("statusMessage", ev.ErrorStr)
	env.B = gen.End()
	return env.End(), nil
}

// envelopeFields are what a log event's two envelopes are made of, but
// for its times: LiteLLM's trace name (dashboards keep working), the
// trace id, the input and output bounded to maxContent bytes each (a failed
// call without output shows its error), and the generation's level.
func envelopeFields(ev *logevent.Event, maxContent int) (name, traceID string, input, output json.RawMessage, level string) {
	name = "litellm-" + ev.CallType
	traceID = ev.TraceID
	if traceID == "" {
		traceID = ev.ID
	}
	input = content(ev.Messages, maxContent)
	output = content(ev.Response, maxContent)
	level = "DEFAULT"
	if ev.Status == logevent.StatusFailure {
		level = "ERROR"
		if len(output) == 0 {
			output = jsonscan.AppendString(nil, ev.ErrorStr)
		}
	}
	return name, traceID, input, output, level
}

// appendTokens appends a generation's token counts, {input, output,
// total}, and unit when one is given (Usage has one, UsageDetails none).
func appendTokens(b []byte, ev *logevent.Event, unit string) []byte {
	o := jsonscan.StartObject(b)
	o.Int("input", ev.PromptTokens)
	o.Int("output", ev.CompletionTokens)
	o.Int("total", ev.TotalTokens)
	o.StringOmitEmpty("unit", unit)
	return o.End()
}

// appendGenerationMetadata appends what LiteLLM puts beside a generation:
// the caller (key, team: keyMetadata, ev.Metadata encoded) and the call's
// routing (GenerationMetadata).
func appendGenerationMetadata(b []byte, ev *logevent.Event, keyMetadata []byte) []byte {
	md := jsonscan.StartObject(b)
	md.Raw("user_api_key_metadata", keyMetadata)
	md.String("call_type", ev.CallType)
	md.String("custom_llm_provider", ev.CustomLLMProvider)
	md.String("status", ev.Status)
	md.StringOmitEmpty("model_group", ev.ModelGroup)
	md.StringOmitEmpty("model_id", ev.ModelID)
	md.StringOmitEmpty("api_base", ev.APIBase)
	if ev.ResponseCost != 0 {
		md.Float("litellm_response_cost", ev.ResponseCost)
	}
	if e := ev.ErrorInformation; e != nil {
		md.Key("error_information")
		md.B = logevent.AppendErrorInfo(md.B, e)
	}
	if p := ev.Passthrough; p != nil {
		md.Key("passthrough")
		md.B = logevent.AppendPassthrough(md.B, p)
	}
	return md.End()
}

// modelParameters decodes the event's model parameters (raw JSON) as
// decoding the event did before they were kept as bytes: a map of
// interfaces, numbers as float64. The delivery job is off the relay path,
// so encoding/json reads them.
func modelParameters(raw []byte) (map[string]any, error) {
	if len(raw) == 0 || raw[0] != '{' {
		return nil, nil
	}
	var params map[string]any
	if err := json.Unmarshal(raw, &params); err != nil {
		return nil, fmt.Errorf("model parameters: %w", err)
	}
	return params, nil
}

// scalar reports whether Langfuse's MapValue takes v: a string, a number
// or a boolean.
func scalar(v any) bool {
	switch v.(type) {
	case string, bool, float64, float32, int, int64, json.Number:
		return true
	}
	return false
}

func scalarCount(params map[string]any) int {
	n := 0
	for _, v := range params {
		if scalar(v) {
			n++
		}
	}
	return n
}

// appendScalars appends the scalar model parameters as an object in key
// order, as encoding/json writes a map.
func appendScalars(b []byte, params map[string]any) ([]byte, error) {
	b = append(b, '{')
	first := true
	for _, k := range slices.Sorted(maps.Keys(params)) {
		v := params[k]
		if !scalar(v) {
			continue
		}
		if !first {
			b = append(b, ',')
		}
		first = false
		b = jsonscan.AppendString(b, k) // a caller's name: escaped
		b = append(b, ':')
		switch v := v.(type) {
		case string:
			b = jsonscan.AppendString(b, v)
		case bool:
			b = strconv.AppendBool(b, v)
		case float64:
			if math.IsNaN(v) || math.IsInf(v, 0) {
				return nil, fmt.Errorf("model parameter %q is not a finite number", k)
			}
			b = jsonscan.AppendFloat(b, v, 64)
		case float32:
			if math.IsNaN(float64(v)) || math.IsInf(float64(v), 0) {
				return nil, fmt.Errorf("model parameter %q is not a finite number", k)
			}
			b = jsonscan.AppendFloat(b, float64(v), 32)
		case int:
			b = strconv.AppendInt(b, int64(v), 10)
		case int64:
			b = strconv.AppendInt(b, v, 10)
		case json.Number:
			switch {
			case v == "":
				b = append(b, '0') // as encoding/json writes it
			case jsonscan.ValidNumber([]byte(v)):
				b = append(b, v...)
			default:
				return nil, fmt.Errorf("model parameter %q is not a number: %q", k, string(v))
			}
		}
	}
	return append(b, '}'), nil
}
