package messages

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"

	"github.com/sluice-gateway/sluice/pkg/api"
	"github.com/sluice-gateway/sluice/pkg/jsonscan"
	"github.com/sluice-gateway/sluice/pkg/oai"
)

// Parsed is a request read as far as its use needs. ParseHead reads what
// routing and the log event need — the top-level members but messages,
// system and tools, which it only delimits — so a natively served request
// goes on as the client sent it, never decoded; Parse (or Chat, for the chat
// seam) decodes and checks the whole.
type Parsed struct {
	Request
	// RawMessages is messages as sent: what the log event keeps.
	RawMessages json.RawMessage
	// tools is the number of tools given: a parameter of the log event.
	tools int
	// asIs: the body has one model member and none of sluice's own
	// (mock_response, drop_params): it can go to a native deployment of
	// that model as it came.
	asIs bool
	// plain: every member is one the head decodes, messages or system
	// (each once), under its exact name, and no tools: the form
	// appendChatBodyRaw may translate. system is where system is in
	// Body (its offsets: a call's state stays in a smaller size class).
	plain bool
	// decoded: Request holds the whole request, checked, or decodeErr
	// says what is wrong with it.
	decoded   bool
	system    [2]int
	decodeErr error
	// chatOnce guards the chat translation (chat, chatErr): the router
	// may try several deployments, each reached through the chat seam.
	chatOnce sync.Once
	chat     *oai.ChatRequest
	chatErr  error
}

// Parse reads and checks a Messages request body: every problem is a 400
// naming the member (messages[1].content[0].source.data).
func Parse(body []byte) (*Parsed, error) {
	p, err := ParseHead(body)
	if err != nil {
		return nil, err
	}
	if err := p.decode(); err != nil {
		return nil, err
	}
	return p, nil
}

// ParseHead reads and checks a Messages request's top-level members — model,
// max_tokens, stream, the sampling parameters, tool_choice, thinking,
// metadata — and delimits messages, system and tools without decoding them:
// what a native deployment checks itself. Each problem is a 400 naming the
// member.
func ParseHead(body []byte) (*Parsed, error) {
	p := &Parsed{}
	if err := p.parseHead(body); err != nil {
		return nil, err
	}
	return p, nil
}

// parseHead is ParseHead into p, which is zero: a call allocates it with
// the rest of its state (messageCall).
func (p *Parsed) parseHead(body []byte) error {
	body = bytes.TrimSpace(body)
	if len(body) == 0 || body[0] != '{' {
		return api.InvalidJSON("The request body must be a JSON object.")
	}
	r := &p.Request
	var (
		given            struct{ model, maxTokens, messages bool }
		models           int
		own              bool
		others           bool // a member the head does not know, a second messages or system, tools
		messages, system int
	)
	err := jsonscan.Members(body, func(name, value []byte) error {
		n := string(name)
		null := jsonscan.Null(value)
		switch {
		case n == "messages":
			p.RawMessages, given.messages = value, !null
			messages++
			return nil
		case n == "system":
			p.system[0], p.system[1] = jsonscan.Span(body, value)
			system++
			return nil
		case n == "tools":
			others = true
			p.tools = 0
			if !null && jsonscan.Elements(value, func([]byte) error { p.tools++; return nil }) != nil {
				return api.InvalidValue("tools", "'tools' must be an array of tools.")
			}
			return nil
		}
		switch n {
		case "model":
			given.model = !null
			models++
		case "max_tokens":
			given.maxTokens = !null
		case "mock_response", "drop_params":
			own = true
		}
		if err := decodeMember(r, n, value); err != errUnknownMember {
			return err
		}
		others = true
		return nil // an unknown member is ignored, as encoding/json does
	})
	if err != nil {
		var ae *api.Error
		if errors.As(err, &ae) {
			return err
		}
		return api.InvalidJSON("The request body is not valid JSON.")
	}
	p.Body = body
	p.asIs = models == 1 && !own
	p.plain = !others && messages == 1 && system <= 1
	switch {
	case !given.model:
		return api.MissingParam("model")
	case strings.TrimSpace(r.Model) == "":
		return api.InvalidValue("model", "'model' must name a model.")
	case !given.maxTokens:
		return api.MissingParam("max_tokens")
	case r.MaxTokens < 1:
		return api.InvalidValue("max_tokens", "'max_tokens' must be at least 1.")
	case !given.messages:
		return api.MissingParam("messages")
	case r.Temperature != nil && (*r.Temperature < 0 || *r.Temperature > 1):
		return api.InvalidValue("temperature", "'temperature' must be between 0 and 1.")
	case r.TopP != nil && (*r.TopP < 0 || *r.TopP > 1):
		return api.InvalidValue("top_p", "'top_p' must be between 0 and 1.")
	case r.TopK != nil && *r.TopK < 0:
		return api.InvalidValue("top_k", "'top_k' must not be negative.")
	}
	return checkToolingAndThinking(r)
}

// checkToolingAndThinking checks the head's tool_choice and thinking
// members, which decode as given but take only some values.
func checkToolingAndThinking(r *Request) error {
	if tc := r.ToolChoice; tc != nil {
		switch tc.Type {
		case "auto", "any", "none":
		case "tool":
			if tc.Name == "" {
				return api.MissingParam("tool_choice.name")
			}
		default:
			return api.InvalidValue("tool_choice.type", "'tool_choice.type' must be auto, any, tool or none.")
		}
	}
	if th := r.Thinking; th != nil {
		switch th.Type {
		case "enabled":
			if th.BudgetTokens < 1024 {
				return api.InvalidValue("thinking.budget_tokens", "'thinking.budget_tokens' must be at least 1024.")
			}
			if th.BudgetTokens >= r.MaxTokens {
				return api.InvalidValue("thinking.budget_tokens", "'thinking.budget_tokens' must be less than 'max_tokens'.")
			}
		case "disabled", "adaptive":
		default:
			return api.InvalidValue("thinking.type", "'thinking.type' must be enabled, disabled or adaptive.")
		}
	}
	return nil
}

// decodeMember decodes the member name of a request into r when it is one
// of the head's, the small ones; any other name is errUnknownMember.
func decodeMember(r *Request, name string, value []byte) error {
	if decodeCommon(r, name, value) {
		return nil
	}
	var dst any
	switch name {
	case "model":
		dst = &r.Model
	case "max_tokens":
		dst = &r.MaxTokens
	case "stream":
		dst = &r.Stream
	case "stop_sequences":
		dst = &r.StopSequences
	case "temperature":
		dst = &r.Temperature
	case "top_p":
		dst = &r.TopP
	case "top_k":
		dst = &r.TopK
	case "tool_choice":
		dst = &r.ToolChoice
	case "thinking":
		dst = &r.Thinking
	case "metadata":
		dst = &r.Metadata
	case "mock_response":
		r.MockResponse = nil
		if !jsonscan.Null(value) {
			r.MockResponse = value
		}
		return nil
	case "drop_params":
		dst = &r.DropParams
	case "service_tier":
		dst = &r.ServiceTier
	default:
		return errUnknownMember
	}
	if err := json.Unmarshal(value, dst); err != nil {
		// Name the member as a decode of the whole request would.
		if te, ok := err.(*json.UnmarshalTypeError); ok {
			te.Field = strings.TrimSuffix(name+"."+te.Field, ".")
		}
		return api.InvalidValue(fieldOf(err), "Invalid request: %s.", describe(err))
	}
	return nil
}

// decodeCommon reads the usual forms of the members every request has
// without reflection — a model string, max_tokens in plain digits, stream
// true or false — and reports whether it did; any other form is
// encoding/json's (decodeMember). FuzzParse holds the head to
// encoding/json's decode of the whole request.
func decodeCommon(r *Request, name string, value []byte) bool {
	switch name {
	case "model":
		if s, err := jsonscan.String(value); err == nil {
			r.Model = s
			return true
		}
	case "max_tokens":
		if n, ok := jsonscan.PlainInt(value); ok {
			r.MaxTokens = n
			return true
		}
	case "stream":
		switch string(value) {
		case "true", "false":
			r.Stream = value[0] == 't'
			return true
		}
	}
	return false
}

// decode decodes the whole request and checks what ParseHead left: the
// system prompt, each message and block, the tools.
func (p *Parsed) decode() error {
	if !p.decoded {
		p.decoded = true
		p.decodeErr = p.decodeWhole()
	}
	return p.decodeErr
}

func (p *Parsed) decodeWhole() error {
	var r Request
	if !decodeRequest(p.Body, &r) {
		r = Request{}
		if err := json.Unmarshal(p.Body, &r); err != nil {
			return api.InvalidValue(fieldOf(err), "Invalid request: %s.", describe(err))
		}
	}
	r.Body = p.Body
	if jsonscan.Null(r.MockResponse) {
		r.MockResponse = nil // null is not given, as the head reads it
	}
	p.Request = r
	if err := checkSystem(r.System); err != nil {
		return err
	}
	for i := range r.Messages {
		if err := checkMessage(&r.Messages[i], fmt.Sprintf("messages[%d]", i)); err != nil {
			return err
		}
	}
	names := make(map[string]bool, len(r.Tools))
	for i, t := range r.Tools {
		at := fmt.Sprintf("tools[%d]", i)
		if t.Name == "" {
			return api.InvalidValue(at+".name", "'%s.name' must name the tool.", at)
		}
		if names[t.Name] {
			return api.InvalidValue(at+".name", "Tool names must be unique: '%s' is given twice.", t.Name)
		}
		names[t.Name] = true
		if len(t.InputSchema) > 0 && !isObject(t.InputSchema) {
			return api.InvalidValue(at+".input_schema", "'%s.input_schema' must be a JSON Schema object.", at)
		}
		if (t.Type == "" || t.Type == "custom") && len(t.InputSchema) == 0 {
			return api.MissingParam(at + ".input_schema")
		}
	}
	if tc := r.ToolChoice; tc != nil && tc.Type == "tool" && !names[tc.Name] {
		return api.InvalidValue("tool_choice.name", "tool_choice names the tool '%s', which is not in 'tools'.", tc.Name)
	}
	return nil
}

// errUnknownMember is decodeMember's answer for a name it does not decode:
// its switch is the one list of the members read one by one.
var errUnknownMember = errors.New("messages: not a member decodeMember reads")

// errNotUsual stops decodeRequest at a form it leaves to encoding/json.
var errNotUsual = errors.New("messages: not the usual form")

// decodeRequest decodes a valid request in the usual form into r as
// json.Unmarshal does, and reports whether it did: every member under its
// exact name, messages once, each message an object of role (a string) and
// content (a string or blocks). The messages — the bulk: the text — are
// read without reflection, their text scanned by jsonscan instead of by
// encoding/json's checker and then its decoder; the other members go
// through decodeMember or encoding/json. Any other form (a case-folded or
// unknown name, a null, a wrong type) is encoding/json's to decode and to
// name the error of (FuzzDecodeRequest holds the two to each other).
func decodeRequest(body []byte, r *Request) bool {
	if !jsonscan.Valid(body) {
		return false
	}
	msgs := false
	err := jsonscan.Members(body, func(name, v []byte) error {
		switch n := string(name); n {
		case "messages":
			if msgs || !decodeMessages(v, &r.Messages) {
				return errNotUsual
			}
			msgs = true
		case "system":
			if len(v) == 0 || (v[0] != '"' && v[0] != '[') {
				return errNotUsual
			}
			return r.System.UnmarshalJSON(v)
		case "tools":
			return json.Unmarshal(v, &r.Tools)
		default:
			if err := decodeMember(r, n, v); err != errUnknownMember {
				return err
			}
			return errNotUsual
		}
		return nil
	})
	return err == nil
}

// decodeMessages reads messages in the usual form (decodeRequest).
func decodeMessages(v []byte, dst *[]Message) bool {
	if len(v) == 0 || v[0] != '[' {
		return false
	}
	msgs := []Message{}
	err := jsonscan.Elements(v, func(v []byte) error {
		if len(v) == 0 || v[0] != '{' {
			return errNotUsual
		}
		msgs = append(msgs, Message{})
		m := &msgs[len(msgs)-1]
		return jsonscan.Members(v, func(name, v []byte) error {
			switch {
			case string(name) == "role" && len(v) > 0 && v[0] == '"':
				s, err := jsonscan.String(v)
				m.Role = s
				return err
			case string(name) == "content" && len(v) > 0 && (v[0] == '"' || v[0] == '['):
				return m.Content.UnmarshalJSON(v)
			}
			return errNotUsual
		})
	})
	if err != nil {
		return false
	}
	*dst = msgs
	return true
}

func checkSystem(c Content) error {
	for i, b := range c.Blocks {
		if b.Type != BlockText {
			return api.InvalidValue(fmt.Sprintf("system[%d].type", i), "System blocks must be text blocks.")
		}
	}
	return nil
}

func checkMessage(m *Message, at string) error {
	switch m.Role {
	case "user", "assistant":
	case "":
		return api.MissingParam(at + ".role")
	default:
		return api.InvalidValue(at+".role", "'%s.role' must be user or assistant.", at)
	}
	if m.Content.IsZero() {
		return api.MissingParam(at + ".content")
	}
	for j := range m.Content.Blocks {
		if err := checkBlock(&m.Content.Blocks[j], m.Role, fmt.Sprintf("%s.content[%d]", at, j)); err != nil {
			return err
		}
	}
	return nil
}

func checkBlock(b *Block, role, at string) error {
	switch b.Type {
	case BlockText:
	case BlockImage, BlockDocument:
		if role != "user" {
			return api.InvalidValue(at+".type", "%s blocks belong in user messages.", b.Type)
		}
		return checkSource(b, at)
	case BlockToolUse:
		if role != "assistant" {
			return api.InvalidValue(at+".type", "tool_use blocks belong in assistant messages.")
		}
		if b.ID == "" {
			return api.MissingParam(at + ".id")
		}
		if b.Name == "" {
			return api.MissingParam(at + ".name")
		}
		if !isObject(b.Input) {
			return api.InvalidValue(at+".input", "'%s.input' must be a JSON object.", at)
		}
	case BlockToolResult:
		if role != "user" {
			return api.InvalidValue(at+".type", "tool_result blocks belong in user messages.")
		}
		if b.ToolUseID == "" {
			return api.MissingParam(at + ".tool_use_id")
		}
		if b.Content != nil {
			for k := range b.Content.Blocks {
				in := &b.Content.Blocks[k]
				switch in.Type {
				case BlockText:
				case BlockImage, BlockDocument:
					if err := checkSource(in, fmt.Sprintf("%s.content[%d]", at, k)); err != nil {
						return err
					}
				default:
					return api.InvalidValue(fmt.Sprintf("%s.content[%d].type", at, k), "A tool result holds text, image and document blocks.")
				}
			}
		}
	case BlockThinking, BlockRedactedThinking:
		if role != "assistant" {
			return api.InvalidValue(at+".type", "%s blocks belong in assistant messages.", b.Type)
		}
	case "":
		return api.MissingParam(at + ".type")
	default:
		// Anthropic's other blocks (server tool results, search results,
		// containers) go to native deployments as they are; a translation
		// refuses them (Chat).
	}
	return nil
}

func checkSource(b *Block, at string) error {
	s := b.Source
	if s == nil {
		return api.MissingParam(at + ".source")
	}
	switch s.Type {
	case "base64":
		if s.MediaType == "" {
			return api.MissingParam(at + ".source.media_type")
		}
		if s.Data == "" {
			return api.MissingParam(at + ".source.data")
		}
	case "url":
		if s.URL == "" {
			return api.MissingParam(at + ".source.url")
		}
	case "text", "file", "content":
		if b.Type != BlockDocument {
			return api.InvalidValue(at+".source.type", "An image's source must be base64 or url.")
		}
	default:
		return api.InvalidValue(at+".source.type", "'%s.source.type' must be base64 or url.", at)
	}
	return nil
}

func isObject(raw json.RawMessage) bool {
	raw = bytes.TrimSpace(raw)
	return len(raw) > 0 && raw[0] == '{'
}

// fieldOf names the member a decoding error is about.
func fieldOf(err error) string {
	if te, ok := err.(*json.UnmarshalTypeError); ok && te.Field != "" {
		return te.Field
	}
	return ""
}

func describe(err error) string {
	if te, ok := err.(*json.UnmarshalTypeError); ok {
		if te.Field != "" {
			return fmt.Sprintf("'%s' cannot be a JSON %s", te.Field, te.Value)
		}
		return fmt.Sprintf("a JSON %s where %s was expected", te.Value, te.Type)
	}
	return err.Error()
}
