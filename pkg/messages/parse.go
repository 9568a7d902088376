package messages

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"

	"github.com/sluice-gateway/sluice/pkg/api"
	"github.com/sluice-gateway/sluice/pkg/jsonscan"
)

// Parsed is a checked request with what the translation needs beyond it.
type Parsed struct {
	Request
	// RawMessages is messages as sent: what the log event keeps.
	RawMessages json.RawMessage
}

// Parse reads and checks a Messages request body: every problem is a 400
// naming the member (messages[1].content[0].source.data).
func Parse(body []byte) (*Parsed, error) {
	body = bytes.TrimSpace(body)
	if len(body) == 0 || body[0] != '{' {
		return nil, api.InvalidJSON("The request body must be a JSON object.")
	}
	// One structural pass names the members given (a required one may be
	// absent, or null); the typed decode below checks the rest.
	top := map[string]bool{}
	p := &Parsed{}
	err := jsonscan.Members(body, func(name, value []byte) error {
		if !jsonscan.Null(value) {
			top[string(name)] = true
		}
		if string(name) == "messages" {
			p.RawMessages = value
		}
		return nil
	})
	if err != nil {
		return nil, api.InvalidJSON("The request body is not valid JSON.")
	}
	dec := json.NewDecoder(bytes.NewReader(body))
	if err := dec.Decode(&p.Request); err != nil {
		return nil, api.InvalidValue(fieldOf(err), "Invalid request: %s.", describe(err))
	}
	p.Body = body
	r := &p.Request
	switch {
	case !top["model"]:
		return nil, api.MissingParam("model")
	case strings.TrimSpace(r.Model) == "":
		return nil, api.InvalidValue("model", "'model' must name a model.")
	case !top["max_tokens"]:
		return nil, api.MissingParam("max_tokens")
	case r.MaxTokens < 1:
		return nil, api.InvalidValue("max_tokens", "'max_tokens' must be at least 1.")
	case !top["messages"]:
		return nil, api.MissingParam("messages")
	case r.Temperature != nil && (*r.Temperature < 0 || *r.Temperature > 1):
		return nil, api.InvalidValue("temperature", "'temperature' must be between 0 and 1.")
	case r.TopP != nil && (*r.TopP < 0 || *r.TopP > 1):
		return nil, api.InvalidValue("top_p", "'top_p' must be between 0 and 1.")
	case r.TopK != nil && *r.TopK < 0:
		return nil, api.InvalidValue("top_k", "'top_k' must not be negative.")
	}
	if err := checkSystem(r.System); err != nil {
		return nil, err
	}
	for i := range r.Messages {
		if err := checkMessage(&r.Messages[i], fmt.Sprintf("messages[%d]", i)); err != nil {
			return nil, err
		}
	}
	names := map[string]bool{}
	for i, t := range r.Tools {
		at := fmt.Sprintf("tools[%d]", i)
		if t.Name == "" {
			return nil, api.InvalidValue(at+".name", "'%s.name' must name the tool.", at)
		}
		if names[t.Name] {
			return nil, api.InvalidValue(at+".name", "Tool names must be unique: '%s' is given twice.", t.Name)
		}
		names[t.Name] = true
		if len(t.InputSchema) > 0 && !isObject(t.InputSchema) {
			return nil, api.InvalidValue(at+".input_schema", "'%s.input_schema' must be a JSON Schema object.", at)
		}
		if (t.Type == "" || t.Type == "custom") && len(t.InputSchema) == 0 {
			return nil, api.MissingParam(at + ".input_schema")
		}
	}
	if tc := r.ToolChoice; tc != nil {
		switch tc.Type {
		case "auto", "any", "none":
		case "tool":
			if tc.Name == "" {
				return nil, api.MissingParam("tool_choice.name")
			}
			if !names[tc.Name] {
				return nil, api.InvalidValue("tool_choice.name", "tool_choice names the tool '%s', which is not in 'tools'.", tc.Name)
			}
		default:
			return nil, api.InvalidValue("tool_choice.type", "'tool_choice.type' must be auto, any, tool or none.")
		}
	}
	if th := r.Thinking; th != nil {
		switch th.Type {
		case "enabled":
			if th.BudgetTokens < 1024 {
				return nil, api.InvalidValue("thinking.budget_tokens", "'thinking.budget_tokens' must be at least 1024.")
			}
			if th.BudgetTokens >= r.MaxTokens {
				return nil, api.InvalidValue("thinking.budget_tokens", "'thinking.budget_tokens' must be less than 'max_tokens'.")
			}
		case "disabled", "adaptive":
		default:
			return nil, api.InvalidValue("thinking.type", "'thinking.type' must be enabled, disabled or adaptive.")
		}
	}
	return p, nil
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
