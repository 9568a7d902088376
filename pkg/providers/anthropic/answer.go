package anthropic

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/sluice-gateway/sluice/pkg/jsonscan"
	"github.com/sluice-gateway/sluice/pkg/models"
	"github.com/sluice-gateway/sluice/pkg/oai"
)

// FinishReason maps a stop_reason to OpenAI's finish_reason. Bedrock's
// Converse stopReason is this vocabulary plus its guardrail reasons, so
// pkg/providers/bedrock maps through it too.
func FinishReason(stop string) string {
	switch stop {
	case "max_tokens", "model_context_window_exceeded":
		return oai.FinishLength
	case "tool_use":
		return oai.FinishToolCalls
	case "refusal":
		return oai.FinishContentFilter
	}
	return oai.FinishStop // end_turn, stop_sequence, pause_turn
}

// usage is a Messages answer's usage: the counts it gave so far.
type usage struct {
	input, output, cacheRead, cacheCreation int64
	// thinking is output_tokens_details.thinking_tokens, when given.
	thinking      int64
	thinkingKnown bool
}

// openAI is the usage as LiteLLM reports Anthropic's: the prompt counts
// every input token — input_tokens plus the cache reads and writes (which
// Anthropic counts apart) —, the cache reads are also the cached tokens,
// and both cache counts are kept. The reasoning tokens are Anthropic's
// thinking_tokens, else an estimate from the reasoning's size (thinkingBytes,
// its JSON text), at most the completion.
func (u *usage) openAI(thinkingBytes int) oai.Usage {
	o := oai.Usage{
		PromptTokens:             u.input + u.cacheRead + u.cacheCreation,
		CompletionTokens:         u.output,
		CacheReadInputTokens:     u.cacheRead,
		CacheCreationInputTokens: u.cacheCreation,
	}
	o.TotalTokens = o.PromptTokens + o.CompletionTokens
	o.PromptTokensDetails.CachedTokens = u.cacheRead
	switch {
	case u.thinkingKnown:
		o.CompletionTokensDetails.ReasoningTokens = min(u.thinking, u.output)
	case thinkingBytes > 0:
		o.CompletionTokensDetails.ReasoningTokens = min(int64(thinkingBytes+3)/4, u.output)
	}
	return o
}

// Answer translates a Messages answer (the whole body) into the OpenAI
// chat.completion the client gets. An answer that cannot be read is a
// *models.ProviderError (the router reports the provider's answer as
// unexpected).
func (c *Call) Answer(body []byte) (*models.Answer, error) {
	cc, err := c.completion(body)
	if err != nil {
		return nil, &models.ProviderError{Provider: c.provider, Status: 200, Message: "unreadable answer: " + err.Error()}
	}
	out, err := json.Marshal(cc)
	if err != nil {
		return nil, fmt.Errorf("%s: encode the answer: %w", c.provider, err)
	}
	return models.Translated(out, cc.Usage, cc.Choices[0].FinishReason), nil
}

// message is the members of a Messages answer the translation reads.
type message struct {
	// Model and StopReason are read when they are strings.
	Model      json.RawMessage `json:"model"`
	Content    []contentBlock  `json:"content"`
	StopReason json.RawMessage `json:"stop_reason"`
	Usage      *answerUsage    `json:"usage"`
}

// answerUsage is a whole answer's usage: Usage's counts (a null count is
// 0), and the thinking tokens when given.
type answerUsage struct {
	Usage
	OutputTokensDetails struct {
		ThinkingTokens *int64 `json:"thinking_tokens"`
	} `json:"output_tokens_details"`
}

// contentBlock is the members of a content block the translation reads;
// which it needs depends on the type (contentBlocks checks them).
type contentBlock struct {
	Type      string          `json:"type"`
	Text      *string         `json:"text"`
	ID        *string         `json:"id"`
	Name      *string         `json:"name"`
	Input     json.RawMessage `json:"input"`
	Thinking  *string         `json:"thinking"`
	Signature *string         `json:"signature"`
	Data      *string         `json:"data"`
}

// thinkingBlock is a thinking or redacted_thinking block as the client gets
// it back in thinking_blocks (to send it back with its signature).
type thinkingBlock struct {
	Type      string  `json:"type"`
	Thinking  *string `json:"thinking,omitempty"`
	Signature *string `json:"signature,omitempty"`
	Data      *string `json:"data,omitempty"`
}

// completion reads a Messages answer: its text blocks become the content,
// its tool_use blocks the tool calls (their input the arguments), its
// thinking blocks the reasoning_content and the thinking_blocks (as they
// are, signatures included, for the client to send back). In JSON mode the
// format tool's input is the content.
func (c *Call) completion(body []byte) (*oai.ChatCompletion, error) {
	var m message
	if err := decodeMessage(body, &m); err != nil {
		return nil, fmt.Errorf("the message is not a JSON object: %w", err)
	}
	if m.Content == nil {
		return nil, errors.New("the message has no content array")
	}
	msg, jsonText, err := c.contentBlocks(m.Content)
	if err != nil {
		return nil, err
	}
	var u usage
	if a := m.Usage; a != nil {
		if err := u.set(a); err != nil {
			return nil, err
		}
	}
	finish := FinishReason(stringOf(m.StopReason))
	content := ""
	if msg.Content != nil {
		content = *msg.Content
	}
	if jsonText != nil {
		content = string(jsonText)
		if finish == oai.FinishToolCalls && len(msg.ToolCalls) == 0 {
			finish = oai.FinishStop
		}
	}
	msg.Content = nil
	if content != "" {
		msg.Content = &content
	}
	ou := u.openAI(len(msg.ReasoningContent))
	model := c.model
	if s := stringOf(m.Model); s != "" {
		model = s
	}
	return &oai.ChatCompletion{
		ID: oai.NewChatID(), Object: oai.ObjectChatCompletion, Created: time.Now().Unix(), Model: model,
		Choices: []oai.ChatChoice{{Message: *msg, FinishReason: finish}},
		Usage:   &ou,
	}, nil
}

// contentBlocks translates an answer's content blocks into the message
// (its text, reasoning, thinking blocks and tool calls) and, in JSON mode,
// the format tool's input. Server tools' blocks (not asked for) are left
// out.
func (c *Call) contentBlocks(blocks []contentBlock) (msg *oai.AnswerMessage, jsonText []byte, err error) {
	msg = &oai.AnswerMessage{Role: oai.RoleAssistant}
	var (
		text, reasoning strings.Builder
		thinking        []thinkingBlock
		// only is the text when it is one block (the usual answer): taken
		// as decoded, not copied through text.
		only  *string
		texts int
	)
	for i := range blocks {
		b := &blocks[i]
		switch b.Type {
		case "text":
			if b.Text == nil {
				return nil, nil, errors.New("a text block has no text string")
			}
			if texts++; texts == 1 {
				only = b.Text
			} else {
				if texts == 2 {
					text.WriteString(*only)
				}
				text.WriteString(*b.Text)
			}
		case "tool_use":
			if b.ID == nil || b.Name == nil || len(b.Input) == 0 || b.Input[0] != '{' {
				return nil, nil, errors.New("a tool_use block lacks its id, name or input object")
			}
			if c.jsonMode && *b.Name == JSONToolName {
				jsonText = b.Input
				continue
			}
			msg.ToolCalls = append(msg.ToolCalls, oai.ToolCall{ID: *b.ID, Type: "function",
				Function: oai.FunctionCall{Name: *b.Name, Arguments: string(b.Input)}})
		case "thinking":
			if b.Thinking == nil {
				return nil, nil, errors.New("a thinking block has no thinking string")
			}
			reasoning.WriteString(*b.Thinking)
			thinking = append(thinking, thinkingBlock{Type: b.Type, Thinking: b.Thinking, Signature: b.Signature})
		case "redacted_thinking":
			thinking = append(thinking, thinkingBlock{Type: b.Type, Data: b.Data})
		}
	}
	switch {
	case texts == 1 && *only != "":
		msg.Content = only
	case text.Len() > 0:
		s := text.String()
		msg.Content = &s
	}
	msg.ReasoningContent = reasoning.String()
	if thinking != nil {
		if msg.ThinkingBlocks, err = json.Marshal(thinking); err != nil {
			return nil, nil, err
		}
	}
	return msg, jsonText, nil
}

// decodeMessage decodes a Messages answer into m as json.Unmarshal does.
// An answer in the usual form (readMessage) is read without reflection —
// its text, the bulk of it, unquoted in one pass —, any other by
// encoding/json (FuzzMessage holds the two to each other). m's raw members
// are slices of body.
func decodeMessage(body []byte, m *message) error {
	if jsonscan.Valid(body) && readMessage(body, m) {
		return nil
	}
	*m = message{}
	return json.Unmarshal(body, m)
}

var (
	messageNames = []string{"model", "content", "stop_reason", "usage"}
	blockNames   = []string{"type", "text", "id", "name", "input", "thinking", "signature", "data"}
)

// readMessage reads a valid JSON answer into m; false when it is not in the
// form it reads (jsonscan.Fields), encoding/json's to decode.
func readMessage(body []byte, m *message) bool {
	return jsonscan.Fields(body, messageNames, func(i int, v []byte) bool {
		switch i {
		case 0:
			m.Model = v
		case 1:
			if jsonscan.Null(v) {
				return true
			}
			m.Content = []contentBlock{}
			return jsonscan.Elements(v, func(v []byte) error {
				m.Content = append(m.Content, contentBlock{})
				if !readBlock(v, &m.Content[len(m.Content)-1]) {
					return jsonscan.ErrSyntax
				}
				return nil
			}) == nil
		case 2:
			m.StopReason = v
		default:
			if jsonscan.Null(v) {
				return true
			}
			m.Usage = new(answerUsage)
			return json.Unmarshal(v, m.Usage) == nil // small: encoding/json's
		}
		return true
	})
}

func readBlock(v []byte, b *contentBlock) bool {
	if jsonscan.Null(v) {
		return true
	}
	return jsonscan.Fields(v, blockNames, func(i int, v []byte) bool {
		switch i {
		case 0:
			if jsonscan.Null(v) {
				return true
			}
			s, err := jsonscan.String(v)
			b.Type = s
			return err == nil
		case 4:
			b.Input = v
			return true
		}
		dst := [...]**string{1: &b.Text, 2: &b.ID, 3: &b.Name, 5: &b.Thinking, 6: &b.Signature, 7: &b.Data}[i]
		if jsonscan.Null(v) {
			*dst = nil
			return true
		}
		s, err := jsonscan.String(v)
		*dst = &s
		return err == nil
	})
}

// stringOf is the string v holds; "" when it holds another value.
func stringOf(v json.RawMessage) string {
	if len(v) < 2 || v[0] != '"' {
		return ""
	}
	if !bytes.Contains(v, []byte{'\\'}) { // decoded already: a valid literal without escapes
		return string(v[1 : len(v)-1])
	}
	var s string
	json.Unmarshal(v, &s)
	return s
}

// set takes a whole answer's usage.
func (u *usage) set(a *answerUsage) error {
	t := a.OutputTokensDetails.ThinkingTokens
	if a.InputTokens < 0 || a.OutputTokens < 0 || a.CacheReadInputTokens < 0 || a.CacheCreationInputTokens < 0 || (t != nil && *t < 0) {
		return errors.New("usage: a token count is not a non-negative integer")
	}
	u.input, u.output = a.InputTokens, a.OutputTokens
	u.cacheRead, u.cacheCreation = a.CacheReadInputTokens, a.CacheCreationInputTokens
	if t != nil {
		u.thinking, u.thinkingKnown = *t, true
	}
	return nil
}
