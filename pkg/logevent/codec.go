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
	floats := []float64{ev.ResponseCost, ev.StartTime, ev.EndTime, ev.CompletionStartTime, ev.ResponseTime}
	for _, f := range floats {
		if math.IsNaN(f) || math.IsInf(f, 0) {
			return nil, errors.New("a time or cost is not a finite number")
		}
	}
	str := func(name, v string) {
		b = append(b, ',', '"')
		b = append(b, name...)
		b = append(b, '"', ':')
		b = jsonscan.AppendString(b, v)
	}
	opt := func(name, v string) {
		if v != "" {
			str(name, v)
		}
	}
	num := func(name string, v int64) {
		b = append(b, ',', '"')
		b = append(b, name...)
		b = append(b, '"', ':')
		b = strconv.AppendInt(b, v, 10)
	}
	float := func(name string, v float64) {
		b = append(b, ',', '"')
		b = append(b, name...)
		b = append(b, '"', ':')
		format := byte('f') // as encoding/json chooses
		if a := math.Abs(v); a != 0 && (a < 1e-6 || a >= 1e21) {
			format = 'e'
		}
		b = strconv.AppendFloat(b, v, format, -1, 64)
	}
	raw := func(name string, v json.RawMessage) {
		if len(v) > 0 {
			b = append(b, ',', '"')
			b = append(b, name...)
			b = append(b, '"', ':')
			b = append(b, v...)
		}
	}
	b = append(b, `{"id":`...)
	b = jsonscan.AppendString(b, ev.ID)
	str("trace_id", ev.TraceID)
	str("call_type", ev.CallType)
	b = append(b, `,"stream":`...)
	b = strconv.AppendBool(b, ev.Stream)
	float("response_cost", ev.ResponseCost)
	str("status", ev.Status)
	opt("custom_llm_provider", ev.CustomLLMProvider)
	num("total_tokens", ev.TotalTokens)
	num("prompt_tokens", ev.PromptTokens)
	num("completion_tokens", ev.CompletionTokens)
	float("startTime", ev.StartTime)
	float("endTime", ev.EndTime)
	float("completionStartTime", ev.CompletionStartTime)
	float("response_time", ev.ResponseTime)
	str("model", ev.Model)
	opt("model_id", ev.ModelID)
	opt("model_group", ev.ModelGroup)
	opt("api_base", ev.APIBase)
	b = append(b, `,"metadata":{`...)
	mark := len(b)
	md := ev.Metadata
	opt("user_api_key_hash", md.UserAPIKeyHash)
	opt("user_api_key_alias", md.UserAPIKeyAlias)
	opt("user_api_key_team_id", md.UserAPIKeyTeamID)
	opt("user_api_key_team_alias", md.UserAPIKeyTeamAlias)
	opt("requester_ip_address", md.RequesterIPAddress)
	opt("request_id", md.RequestID)
	opt("batch_id", md.BatchID)
	opt("custom_id", md.CustomID)
	if len(b) > mark {
		b = append(b[:mark], b[mark+1:]...) // the first member's comma
	}
	b = append(b, '}')
	if ev.RequestTags == nil {
		b = append(b, `,"request_tags":null`...)
	} else {
		b = append(b, `,"request_tags":[`...)
		for i, t := range ev.RequestTags {
			if i > 0 {
				b = append(b, ',')
			}
			b = jsonscan.AppendString(b, t)
		}
		b = append(b, ']')
	}
	opt("end_user", ev.EndUser)
	raw("messages", ev.Messages)
	raw("response", ev.Response)
	if len(ev.ModelParameters) > 0 {
		params, err := json.Marshal(ev.ModelParameters)
		if err != nil {
			return nil, err
		}
		raw("model_parameters", params)
	}
	opt("error_str", ev.ErrorStr)
	if e := ev.ErrorInformation; e != nil {
		b = append(b, `,"error_information":{`...)
		mark := len(b)
		opt("error_code", e.ErrorCode)
		opt("error_class", e.ErrorClass)
		opt("llm_provider", e.LLMProvider)
		opt("error_message", e.ErrorMessage)
		if len(b) > mark {
			b = append(b[:mark], b[mark+1:]...)
		}
		b = append(b, '}')
	}
	if p := ev.Passthrough; p != nil {
		b = append(b, `,"passthrough":{"method":`...)
		b = jsonscan.AppendString(b, p.Method)
		str("path", p.Path)
		num("status_code", int64(p.StatusCode))
		b = append(b, '}')
	}
	opt("finish_reason", ev.FinishReason)
	if ev.UsageEstimated {
		b = append(b, `,"usage_estimated":true`...)
	}
	opt("claim_check", ev.ClaimCheck)
	return append(b, '}'), nil
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
		case "claim_check":
			return str(v, &ev.ClaimCheck)
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
	"finish_reason", "usage_estimated", "claim_check"}

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
	if !json.Valid(v) {
		return errSlowPath
	}
	*dst = append(json.RawMessage(nil), v...)
	return nil
}
