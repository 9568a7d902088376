package logevent

import (
	"encoding/json"
	"errors"
	"math"
	"strconv"

	"github.com/sluice-gateway/sluice/pkg/jsonscan"
)

// The event's JSON without reflection. Every model call of a team that
// logs is encoded once by the emitter and decoded once per delivery, so
// encoding/json's reflection — a good part of what a logging callback
// costs — is left to what is rare: model parameters, and any input the
// fast path does not recognize, which encoding/json then reads (it stays
// the reference: the fuzz and field tests hold the two to the same
// results). A field added to Event must be added here too (a test fails
// until it is).

// appendEvent appends ev's JSON, as encoding/json writes it but for HTML
// escapes. Raw members (messages, response) must hold valid JSON.
func appendEvent(b []byte, ev *Event) ([]byte, error) {
	for _, f := range []float64{ev.ResponseCost, ev.StartTime, ev.EndTime, ev.CompletionStartTime, ev.ResponseTime} {
		if math.IsNaN(f) || math.IsInf(f, 0) {
			return nil, errors.New("a time or cost is not a finite number")
		}
	}
	o := jsonscan.StartObject(b)
	o.String("id", ev.ID)
	o.String("trace_id", ev.TraceID)
	o.String("call_type", ev.CallType)
	o.Bool("stream", ev.Stream)
	o.Float("response_cost", ev.ResponseCost)
	o.String("status", ev.Status)
	o.StringOmitEmpty("custom_llm_provider", ev.CustomLLMProvider)
	o.Int("total_tokens", ev.TotalTokens)
	o.Int("prompt_tokens", ev.PromptTokens)
	o.Int("completion_tokens", ev.CompletionTokens)
	o.Float("startTime", ev.StartTime)
	o.Float("endTime", ev.EndTime)
	o.Float("completionStartTime", ev.CompletionStartTime)
	o.Float("response_time", ev.ResponseTime)
	o.String("model", ev.Model)
	o.StringOmitEmpty("model_id", ev.ModelID)
	o.StringOmitEmpty("model_group", ev.ModelGroup)
	o.StringOmitEmpty("api_base", ev.APIBase)
	o.Key("metadata")
	o.B = AppendMetadata(o.B, &ev.Metadata)
	o.Strings("request_tags", ev.RequestTags)
	o.StringOmitEmpty("end_user", ev.EndUser)
	o.RawOmitEmpty("messages", ev.Messages)
	o.RawOmitEmpty("response", ev.Response)
	if len(ev.ModelParameters) > 0 {
		params, err := json.Marshal(ev.ModelParameters)
		if err != nil {
			return nil, err
		}
		o.Raw("model_parameters", params)
	}
	o.StringOmitEmpty("error_str", ev.ErrorStr)
	if e := ev.ErrorInformation; e != nil {
		o.Key("error_information")
		o.B = AppendErrorInfo(o.B, e)
	}
	if p := ev.Passthrough; p != nil {
		o.Key("passthrough")
		o.B = AppendPassthrough(o.B, p)
	}
	o.StringOmitEmpty("finish_reason", ev.FinishReason)
	if ev.UsageEstimated {
		o.Bool("usage_estimated", true)
	}
	if ev.CostUnknown {
		o.Bool("cost_unknown", true)
	}
	if ev.CostEstimated {
		o.Bool("estimated", true)
	}
	if ev.CachedTokens != 0 {
		o.Int("cached_tokens", ev.CachedTokens)
	}
	if ev.NativeBatch {
		o.Bool("native_batch", true)
	}
	if a := ev.BudgetAlert; a != nil {
		// Rare (one per budget period): encoding/json writes and reads it.
		alert, err := json.Marshal(a)
		if err != nil {
			return nil, err
		}
		o.Raw("budget_alert", alert)
	}
	o.StringOmitEmpty("claim_check", ev.ClaimCheck)
	return o.End(), nil
}

// AppendMetadata appends md's JSON as encoding/json writes it (but for HTML
// escapes), for destinations that carry it without reflection.
func AppendMetadata(b []byte, md *Metadata) []byte {
	o := jsonscan.StartObject(b)
	o.StringOmitEmpty("user_api_key_hash", md.UserAPIKeyHash)
	o.StringOmitEmpty("user_api_key_alias", md.UserAPIKeyAlias)
	o.StringOmitEmpty("user_api_key_team_id", md.UserAPIKeyTeamID)
	o.StringOmitEmpty("user_api_key_team_alias", md.UserAPIKeyTeamAlias)
	o.StringOmitEmpty("requester_ip_address", md.RequesterIPAddress)
	o.StringOmitEmpty("request_id", md.RequestID)
	o.StringOmitEmpty("batch_id", md.BatchID)
	o.StringOmitEmpty("custom_id", md.CustomID)
	return o.End()
}

// AppendErrorInfo appends e's JSON as encoding/json writes it (but for HTML
// escapes).
func AppendErrorInfo(b []byte, e *ErrorInfo) []byte {
	o := jsonscan.StartObject(b)
	o.StringOmitEmpty("error_code", e.ErrorCode)
	o.StringOmitEmpty("error_class", e.ErrorClass)
	o.StringOmitEmpty("llm_provider", e.LLMProvider)
	o.StringOmitEmpty("error_message", e.ErrorMessage)
	return o.End()
}

// AppendPassthrough appends p's JSON as encoding/json writes it (but for
// HTML escapes).
func AppendPassthrough(b []byte, p *Passthrough) []byte {
	o := jsonscan.StartObject(b)
	o.String("method", p.Method)
	o.String("path", p.Path)
	o.Int("status_code", int64(p.StatusCode))
	return o.End()
}

// errSlowPath sends a document to encoding/json.
var errSlowPath = errors.New("logevent: not in the fast path's form")

// decodeEvent decodes one event: the fast path, else encoding/json.
func decodeEvent(doc []byte) (*Event, error) {
	ev := new(Event)
	if err := decodeFast(doc, ev); err == nil {
		return ev, nil
	}
	ev = new(Event)
	if err := json.Unmarshal(doc, ev); err != nil {
		return nil, err
	}
	return ev, nil
}

// decodeFast reads doc into ev when every member is one the encoder writes,
// named exactly, given once, with a value of its type (strict JSON); else
// errSlowPath.
func decodeFast(doc []byte, ev *Event) error {
	var seen uint64
	return jsonscan.Members(doc, func(name, v []byte) error {
		bit := uint64(1) << fieldIndex(name)
		if seen&bit != 0 {
			return errSlowPath
		}
		seen |= bit
		switch string(name) {
		case "id":
			return str(v, &ev.ID)
		case "trace_id":
			return str(v, &ev.TraceID)
		case "call_type":
			return str(v, &ev.CallType)
		case "stream":
			return boolean(v, &ev.Stream)
		case "response_cost":
			return float(v, &ev.ResponseCost)
		case "status":
			return str(v, &ev.Status)
		case "custom_llm_provider":
			return str(v, &ev.CustomLLMProvider)
		case "total_tokens":
			return integer(v, &ev.TotalTokens)
		case "prompt_tokens":
			return integer(v, &ev.PromptTokens)
		case "completion_tokens":
			return integer(v, &ev.CompletionTokens)
		case "startTime":
			return float(v, &ev.StartTime)
		case "endTime":
			return float(v, &ev.EndTime)
		case "completionStartTime":
			return float(v, &ev.CompletionStartTime)
		case "response_time":
			return float(v, &ev.ResponseTime)
		case "model":
			return str(v, &ev.Model)
		case "model_id":
			return str(v, &ev.ModelID)
		case "model_group":
			return str(v, &ev.ModelGroup)
		case "api_base":
			return str(v, &ev.APIBase)
		case "metadata":
			return decodeMetadata(v, &ev.Metadata)
		case "request_tags":
			if string(v) == "null" {
				return nil
			}
			ev.RequestTags = []string{}
			return jsonscan.Elements(v, func(e []byte) error {
				var t string
				if err := str(e, &t); err != nil {
					return err
				}
				ev.RequestTags = append(ev.RequestTags, t)
				return nil
			})
		case "end_user":
			return str(v, &ev.EndUser)
		case "messages":
			return rawValue(v, &ev.Messages)
		case "response":
			return rawValue(v, &ev.Response)
		case "model_parameters":
			if string(v) == "null" {
				return errSlowPath
			}
			return json.Unmarshal(v, &ev.ModelParameters)
		case "error_str":
			return str(v, &ev.ErrorStr)
		case "error_information":
			e := new(ErrorInfo)
			ev.ErrorInformation = e
			return object(v, map[string]*string{"error_code": &e.ErrorCode, "error_class": &e.ErrorClass,
				"llm_provider": &e.LLMProvider, "error_message": &e.ErrorMessage}, nil)
		case "passthrough":
			p := new(Passthrough)
			ev.Passthrough = p
			return object(v, map[string]*string{"method": &p.Method, "path": &p.Path}, func(name, v []byte) error {
				if string(name) != "status_code" {
					return errSlowPath
				}
				var n int64
				if err := integer(v, &n); err != nil || n != int64(int(n)) {
					return errSlowPath
				}
				p.StatusCode = int(n)
				return nil
			})
		case "finish_reason":
			return str(v, &ev.FinishReason)
		case "usage_estimated":
			return boolean(v, &ev.UsageEstimated)
		case "cost_unknown":
			return boolean(v, &ev.CostUnknown)
		case "estimated":
			return boolean(v, &ev.CostEstimated)
		case "cached_tokens":
			return integer(v, &ev.CachedTokens)
		case "native_batch":
			return boolean(v, &ev.NativeBatch)
		case "claim_check":
			return str(v, &ev.ClaimCheck)
		case "budget_alert":
			ev.BudgetAlert = new(BudgetAlert)
			return json.Unmarshal(v, ev.BudgetAlert)
		}
		return errSlowPath
	})
}

// fields are the event's member names, for the duplicate check (an
// unknown name is the slow path's anyway).
var fields = []string{"id", "trace_id", "call_type", "stream", "response_cost", "status", "custom_llm_provider",
	"total_tokens", "prompt_tokens", "completion_tokens", "startTime", "endTime", "completionStartTime",
	"response_time", "model", "model_id", "model_group", "api_base", "metadata", "request_tags", "end_user",
	"messages", "response", "model_parameters", "error_str", "error_information", "passthrough",
	"finish_reason", "usage_estimated", "cost_unknown", "estimated", "cached_tokens", "native_batch", "claim_check", "budget_alert"}

func fieldIndex(name []byte) int {
	for i, f := range fields {
		if f == string(name) {
			return i
		}
	}
	return 63
}

func decodeMetadata(v []byte, md *Metadata) error {
	var seen uint16
	return jsonscan.Members(v, func(name, v []byte) error {
		var dst *string
		var bit uint16
		switch string(name) {
		case "user_api_key_hash":
			dst, bit = &md.UserAPIKeyHash, 1
		case "user_api_key_alias":
			dst, bit = &md.UserAPIKeyAlias, 2
		case "user_api_key_team_id":
			dst, bit = &md.UserAPIKeyTeamID, 4
		case "user_api_key_team_alias":
			dst, bit = &md.UserAPIKeyTeamAlias, 8
		case "requester_ip_address":
			dst, bit = &md.RequesterIPAddress, 16
		case "request_id":
			dst, bit = &md.RequestID, 32
		case "batch_id":
			dst, bit = &md.BatchID, 64
		case "custom_id":
			dst, bit = &md.CustomID, 128
		default:
			return errSlowPath
		}
		if seen&bit != 0 {
			return errSlowPath
		}
		seen |= bit
		return str(v, dst)
	})
}

// object reads an object of string members into fields; other members go
// to other (nil: none may be there). A member given twice is the slow
// path's.
func object(v []byte, fields map[string]*string, other func(name, v []byte) error) error {
	seen := map[string]bool{}
	return jsonscan.Members(v, func(name, v []byte) error {
		if seen[string(name)] {
			return errSlowPath
		}
		seen[string(name)] = true
		if f, ok := fields[string(name)]; ok {
			return str(v, f)
		}
		if other == nil {
			return errSlowPath
		}
		return other(name, v)
	})
}

func str(v []byte, dst *string) error {
	s, ok := jsonscan.Unquote(v)
	if !ok {
		return errSlowPath
	}
	*dst = string(s)
	return nil
}

func boolean(v []byte, dst *bool) error {
	switch string(v) {
	case "true":
		*dst = true
	case "false":
		*dst = false
	default:
		return errSlowPath
	}
	return nil
}

func integer(v []byte, dst *int64) error {
	if !jsonscan.ValidNumber(v) {
		return errSlowPath
	}
	n, err := strconv.ParseInt(string(v), 10, 64)
	if err != nil {
		return errSlowPath
	}
	*dst = n
	return nil
}

func float(v []byte, dst *float64) error {
	if !jsonscan.ValidNumber(v) {
		return errSlowPath
	}
	f, err := strconv.ParseFloat(string(v), 64)
	if err != nil {
		return errSlowPath
	}
	*dst = f
	return nil
}

// rawValue keeps a copy of a raw value, as json.RawMessage does.
func rawValue(v []byte, dst *json.RawMessage) error {
	if !jsonscan.Valid(v) {
		return errSlowPath
	}
	*dst = append(json.RawMessage(nil), v...)
	return nil
}
