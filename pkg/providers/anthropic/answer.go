package anthropic

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/sluice-gateway/sluice/pkg/jsonscan"
	"github.com/sluice-gateway/sluice/pkg/models"
	"github.com/sluice-gateway/sluice/pkg/oai"
)

// finishReason maps a stop_reason to OpenAI's finish_reason.
func finishReason(stop []byte) string {
	switch string(stop) {
	case `"max_tokens"`, `"model_context_window_exceeded"`:
		return oai.FinishLength
	case `"tool_use"`:
		return oai.FinishToolCalls
	case `"refusal"`:
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

// read takes the counts a usage object gives (a stream's message_delta
// repeats only some of them, cumulatively): absent and null counts keep
// their value.
func (u *usage) read(raw []byte) error {
	count := func(v []byte, dst *int64) error {
		if jsonscan.Null(v) {
			return nil
		}
		n, ok := jsonscan.Count(v)
		if !ok {
			return errors.New("usage: a token count is not a non-negative integer")
		}
		*dst = n
		return nil
	}
	return jsonscan.Members(raw, func(name, v []byte) error {
		switch string(name) {
		case "input_tokens":
			return count(v, &u.input)
		case "output_tokens":
			return count(v, &u.output)
		case "cache_read_input_tokens":
			return count(v, &u.cacheRead)
		case "cache_creation_input_tokens":
			return count(v, &u.cacheCreation)
		case "output_tokens_details":
			if jsonscan.Null(v) {
				return nil
			}
			return jsonscan.Members(v, func(name, v []byte) error {
				if string(name) == "thinking_tokens" && !jsonscan.Null(v) {
					u.thinkingKnown = true
					return count(v, &u.thinking)
				}
				return nil
			})
		}
		return nil
	})
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

// completion reads a Messages answer: its text blocks become the content,
// its tool_use blocks the tool calls (their input the arguments), its
// thinking blocks the reasoning_content and the thinking_blocks (as they
// are, signatures included, for the client to send back). In JSON mode the
// format tool's input is the content.
func (c *Call) completion(body []byte) (*oai.ChatCompletion, error) {
	var model, content, stop, rawUsage []byte
	err := jsonscan.Members(body, func(name, v []byte) error {
		switch string(name) {
		case "model":
			model = v
		case "content":
			content = v
		case "stop_reason":
			stop = v
		case "usage":
			rawUsage = v
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("the message is not a JSON object: %w", err)
	}
	if len(content) == 0 || content[0] != '[' {
		return nil, errors.New("the message has no content array")
	}
	var (
		msg       = oai.AnswerMessage{Role: oai.RoleAssistant}
		text      strings.Builder
		reasoning strings.Builder
		thinking  []byte // the thinking_blocks array
		jsonText  []byte // JSON mode: the format tool's input
	)
	err = jsonscan.Elements(content, func(block []byte) error {
		var typ, txt, id, toolName, input, think []byte
		if err := jsonscan.Members(block, func(name, v []byte) error {
			switch string(name) {
			case "type":
				typ = v
			case "text":
				txt = v
			case "id":
				id = v
			case "name":
				toolName = v
			case "input":
				input = v
			case "thinking":
				think = v
			}
			return nil
		}); err != nil {
			return fmt.Errorf("a content block is not a JSON object: %w", err)
		}
		switch string(typ) {
		case `"text"`:
			s, err := jsonscan.String(txt)
			if err != nil {
				return errors.New("a text block has no text string")
			}
			text.WriteString(s)
		case `"tool_use"`:
			callID, err1 := jsonscan.String(id)
			fn, err2 := jsonscan.String(toolName)
			if err1 != nil || err2 != nil || len(input) == 0 || input[0] != '{' || !json.Valid(input) {
				return errors.New("a tool_use block lacks its id, name or input object")
			}
			if c.jsonMode && fn == JSONToolName {
				jsonText = input
				return nil
			}
			msg.ToolCalls = append(msg.ToolCalls, oai.ToolCall{ID: callID, Type: "function",
				Function: oai.FunctionCall{Name: fn, Arguments: string(input)}})
		case `"thinking"`:
			s, err := jsonscan.String(think)
			if err != nil {
				return errors.New("a thinking block has no thinking string")
			}
			reasoning.WriteString(s)
			thinking = appendElement(thinking, block)
		case `"redacted_thinking"`:
			thinking = appendElement(thinking, block)
		}
		return nil // server tools' blocks (not asked for) are left out
	})
	if err != nil {
		return nil, err
	}
	var u usage
	if len(rawUsage) > 0 {
		if err := u.read(rawUsage); err != nil {
			return nil, err
		}
	}
	finish := finishReason(stop)
	if jsonText != nil {
		text.Reset()
		text.Write(jsonText)
		if finish == oai.FinishToolCalls && len(msg.ToolCalls) == 0 {
			finish = oai.FinishStop
		}
	}
	if text.Len() > 0 {
		s := text.String()
		msg.Content = &s
	}
	msg.ReasoningContent = reasoning.String()
	if thinking != nil {
		msg.ThinkingBlocks = append(thinking, ']')
	}
	ou := u.openAI(reasoning.Len())
	m := c.model
	if s, err := jsonscan.String(model); err == nil && s != "" {
		m = s
	}
	return &oai.ChatCompletion{
		ID: oai.NewChatID(), Object: oai.ObjectChatCompletion, Created: time.Now().Unix(), Model: m,
		Choices: []oai.ChatChoice{{Message: msg, FinishReason: finish}},
		Usage:   &ou,
	}, nil
}

// appendElement adds el to the JSON array arr is the start of ("[…", not
// yet closed; nil for none).
func appendElement(arr, el []byte) []byte {
	if arr == nil {
		arr = append(arr, '[')
	} else {
		arr = append(arr, ',')
	}
	return append(arr, el...)
}
