package langfuse

import (
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"

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
	params, err := scalarParams(ev.ModelParameters)
	if err != nil {
		return nil, err
	}
	if len(params) > 0 {
		gen.Key("modelParameters")
		gen.B = appendScalars(gen.B, params)
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

// param is a model parameter Langfuse's MapValue takes — a string, a
// number or a boolean — as encoding/json writes what decoding the event
// into a map of interfaces would hold: value is JSON.
type param struct {
	name  string
	value []byte
}

// scalarParams are the scalar members of the model parameters raw (an
// object, else none): the last of a name given twice, in key order, each
// value in encoding/json's form of its decoded self (a string unquoted and
// quoted again, a number as a float64).
func scalarParams(raw []byte) ([]param, error) {
	if len(raw) == 0 || raw[0] != '{' {
		return nil, nil
	}
	var params []param
	err := jsonscan.Members(raw, func(name, value []byte) error {
		p := param{name: string(name)}
		if i := slices.IndexFunc(params, func(q param) bool { return q.name == p.name }); i >= 0 {
			params = slices.Delete(params, i, i+1) // the last copy wins, as in a map
		}
		var err error
		if p.value, err = scalarValue(value); err != nil {
			return fmt.Errorf("model parameter %q: %w", p.name, err)
		}
		if p.value != nil {
			params = append(params, p)
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	slices.SortFunc(params, func(a, b param) int { return strings.Compare(a.name, b.name) })
	return params, nil
}

// scalarValue is a string, number or boolean value v in encoding/json's
// form of its decoded self; nil for anything else.
func scalarValue(v []byte) ([]byte, error) {
	switch v[0] {
	case '"':
		s, ok := jsonscan.Unquote(v)
		if !ok {
			var str string
			if err := json.Unmarshal(v, &str); err != nil {
				return nil, err
			}
			s = []byte(str)
		}
		return jsonscan.AppendString(nil, s), nil
	case 't', 'f':
		return v, nil
	case 'n', '{', '[':
		return nil, nil
	}
	f, err := strconv.ParseFloat(string(v), 64)
	if err != nil || math.IsNaN(f) || math.IsInf(f, 0) {
		return nil, errors.New("not a finite number")
	}
	return jsonscan.AppendFloat(nil, f, 64), nil
}

// appendScalars appends params as an object.
func appendScalars(b []byte, params []param) []byte {
	b = append(b, '{')
	for i, p := range params {
		if i > 0 {
			b = append(b, ',')
		}
		b = jsonscan.AppendString(b, p.name) // a caller's name: escaped
		b = append(append(b, ':'), p.value...)
	}
	return append(b, '}')
}
