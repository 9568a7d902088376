package messages

import (
	"bytes"
	"strconv"
	"unicode/utf8"

	"github.com/sluice-gateway/sluice/pkg/jsonscan"
)

// appendChatBody appends out as encoding/json encodes it, member by member
// in the struct's order, when it is in the usual form: messages whose
// content is a string or absent, no tools, tool choice or mock response —
// ok is false for any other, which json.Marshal encodes. It is the
// translated call's request encoder (the messages-openai bench: encoding/json
// spent about 20 instructions a byte of text on it); strings are written by
// jsonscan.AppendString, so <, > and & go unescaped, the same JSON for the
// provider. FuzzChatBody holds it to json.Marshal over chatRequest, whose
// tags are the schema: a member added there fails the fuzz test's seeds
// until it is written here.
func appendChatBody(b []byte, out *chatRequest) ([]byte, bool) {
	if len(out.Tools) > 0 || out.ToolChoice != nil || out.ParallelToolCalls != nil || len(out.MockResponse) > 0 {
		return b, false
	}
	for i := range out.Messages {
		m := &out.Messages[i]
		if _, plain := m.Content.(string); (!plain && m.Content != nil) || len(m.ToolCalls) > 0 || m.ToolCallID != "" {
			return b, false
		}
	}
	b = append(b, `{"model":`...)
	b = jsonscan.AppendString(b, out.Model)
	b = append(b, `,"messages":`...)
	if out.Messages == nil {
		b = append(b, "null"...)
	} else {
		b = append(b, '[')
		for i := range out.Messages {
			m := &out.Messages[i]
			if i > 0 {
				b = append(b, ',')
			}
			b = append(b, `{"role":`...)
			b = jsonscan.AppendString(b, m.Role)
			if s, ok := m.Content.(string); ok {
				b = append(b, `,"content":`...)
				b = jsonscan.AppendString(b, s)
			}
			b = append(b, '}')
		}
		b = append(b, ']')
	}
	return appendChatTail(b, out), true
}

// appendChatTail appends the members of out after messages, and closes the
// object.
func appendChatTail(b []byte, out *chatRequest) []byte {
	b = append(b, `,"max_tokens":`...)
	b = strconv.AppendInt(b, out.MaxTokens, 10)
	if out.Stream {
		b = append(b, `,"stream":true`...)
	}
	if o := out.StreamOptions; o != nil {
		b = append(b, `,"stream_options":{"include_usage":`...)
		b = strconv.AppendBool(b, o.IncludeUsage)
		b = append(b, '}')
	}
	if len(out.Stop) > 0 {
		b = append(b, `,"stop":[`...)
		for i, s := range out.Stop {
			if i > 0 {
				b = append(b, ',')
			}
			b = jsonscan.AppendString(b, s)
		}
		b = append(b, ']')
	}
	for _, f := range [...]struct {
		name string
		v    *float64
	}{{`,"temperature":`, out.Temperature}, {`,"top_p":`, out.TopP}} {
		if f.v != nil {
			b = append(b, f.name...)
			b = jsonscan.AppendFloat(b, *f.v, 64)
		}
	}
	if out.TopK != nil {
		b = append(b, `,"top_k":`...)
		b = strconv.AppendInt(b, *out.TopK, 10)
	}
	if out.ReasoningEffort != "" {
		b = append(b, `,"reasoning_effort":`...)
		b = jsonscan.AppendString(b, out.ReasoningEffort)
	}
	if out.User != "" {
		b = append(b, `,"user":`...)
		b = jsonscan.AppendString(b, out.User)
	}
	if out.DropParams != nil {
		b = append(b, `,"drop_params":`...)
		b = strconv.AppendBool(b, *out.DropParams)
	}
	return append(b, '}')
}

// chatBodyExtra is about how much longer than the request its chat body
// in the plain form is (the members' names, a system message's role).
const chatBodyExtra = 256

// appendChatBodyRaw appends the chat body of a request in the plainest
// usual form — system absent or a string, each message an object of a role
// (exactly user or assistant) and a string content, no tools, tool choice
// or mock response, every member under its exact name (plain) — from the
// body's raw strings, without decoding the request: what ChatBody's decode,
// chatRequest and appendChatBody write of it, byte for byte
// (FuzzChatBodyRaw). A string that AppendString would write as it came
// (no escape, valid UTF-8, no U+2028 or U+2029) is copied; any other is
// unquoted and written by AppendString. ok is false for any other request
// (or one that is not valid JSON), which ChatBody decodes; b is then to be
// dropped.
func (p *Parsed) appendChatBodyRaw(b []byte) ([]byte, bool) {
	if !p.plain || len(p.MockResponse) > 0 || p.ToolChoice != nil || !jsonscan.Valid(p.Body) {
		return b, false
	}
	out := p.chatHead()
	b = append(b, `{"model":`...)
	b = jsonscan.AppendString(b, out.Model)
	b = append(b, `,"messages":`...)
	n := 0
	next := func() {
		if n == 0 {
			b = append(b, '[')
		} else {
			b = append(b, ',')
		}
		n++
	}
	if sys := p.Body[p.system[0]:p.system[1]]; len(sys) > 0 {
		if sys[0] != '"' {
			return b, false
		}
		next()
		b = append(b, `{"role":"system","content":`...)
		b = appendRawString(b, sys)
		b = append(b, '}')
	}
	err := jsonscan.Elements(p.RawMessages, func(m []byte) error {
		var role, content []byte
		if m[0] != '{' || jsonscan.Members(m, func(name, v []byte) error {
			switch {
			case string(name) == "role" && role == nil:
				role = v
			case string(name) == "content" && content == nil && v[0] == '"':
				content = v
			default:
				return errNotUsual
			}
			return nil
		}) != nil || content == nil || string(role) != `"user"` && string(role) != `"assistant"` {
			return errNotUsual
		}
		next()
		b = append(b, `{"role":`...)
		b = append(b, role...)
		b = append(b, `,"content":`...)
		b = appendRawString(b, content)
		b = append(b, '}')
		return nil
	})
	if err != nil {
		return b, false
	}
	if n == 0 {
		b = append(b, "null"...)
	} else {
		b = append(b, ']')
	}
	return appendChatTail(b, &out), true
}

// appendRawString appends the valid JSON string lit as AppendString writes
// what it decodes to: as it came when that is the same bytes.
func appendRawString(b, lit []byte) []byte {
	inner := lit[1 : len(lit)-1]
	if bytes.IndexByte(inner, '\\') < 0 && utf8.Valid(inner) &&
		(bytes.IndexByte(inner, 0xe2) < 0 || !bytes.Contains(inner, []byte("\u2028")) && !bytes.Contains(inner, []byte("\u2029"))) {
		return append(b, lit...)
	}
	s, _ := jsonscan.String(lit) // valid: the body is
	return jsonscan.AppendString(b, s)
}

// chatBodySize is about the encoded size of out's usual form, for one
// allocation.
func chatBodySize(out *chatRequest) int {
	n := 256 + len(out.Model) + len(out.User)
	for i := range out.Messages {
		n += 32 + len(out.Messages[i].Role)
		if s, ok := out.Messages[i].Content.(string); ok {
			n += len(s) + len(s)/8
		}
	}
	return n
}

// appendAnswer appends r as AnswerJSON's json.Marshal encodes it, when its
// blocks are text only (the usual translated answer); ok is false for any
// other, which json.Marshal encodes. Strings are written by
// jsonscan.AppendString (<, > and & unescaped, as Anthropic writes them;
// the same JSON), usage by its Fields, the schema's one source.
// FuzzAnswerJSON holds it to json.Marshal.
func appendAnswer(b []byte, r *Response) ([]byte, bool) {
	for i := range r.Content {
		if r.Content[i].Type != BlockText {
			return b, false
		}
	}
	b = append(b, `{"id":`...)
	b = jsonscan.AppendString(b, r.ID)
	b = append(b, `,"type":`...)
	b = jsonscan.AppendString(b, r.Type)
	b = append(b, `,"role":`...)
	b = jsonscan.AppendString(b, r.Role)
	b = append(b, `,"model":`...)
	b = jsonscan.AppendString(b, r.Model)
	b = append(b, `,"stop_reason":`...)
	b = appendStringPtr(b, r.StopReason)
	b = append(b, `,"stop_sequence":`...)
	b = appendStringPtr(b, r.StopSequence)
	b = append(b, `,"usage":{`...)
	u := r.Usage
	for i, f := range u.Fields() {
		if i > 0 {
			b = append(b, ',')
		}
		b = jsonscan.AppendString(b, f.Name)
		b = append(b, ':')
		b = strconv.AppendInt(b, *f.Dst, 10)
	}
	// content last, where AnswerJSON's json.Marshal puts it (its
	// outer field).
	b = append(b, `},"content":[`...)
	for i := range r.Content {
		if i > 0 {
			b = append(b, ',')
		}
		b = append(b, `{"type":"text","text":`...)
		b = jsonscan.AppendString(b, r.Content[i].Text)
		b = append(b, '}')
	}
	return append(b, "]}"...), true
}

func appendStringPtr(b []byte, s *string) []byte {
	if s == nil {
		return append(b, "null"...)
	}
	return jsonscan.AppendString(b, *s)
}

// answerSize is about the encoded size of r, for one allocation.
func answerSize(r *Response) int {
	n := 256 + len(r.ID) + len(r.Model)
	for i := range r.Content {
		n += 32 + len(r.Content[i].Text) + len(r.Content[i].Text)/8
	}
	return n
}
