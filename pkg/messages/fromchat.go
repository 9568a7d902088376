package messages

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"

	"github.com/sluice-gateway/sluice/pkg/api"
	"github.com/sluice-gateway/sluice/pkg/jsonscan"
	"github.com/sluice-gateway/sluice/pkg/oai"
)

// stopReason maps an OpenAI finish reason onto Anthropic's stop reason.
func stopReason(finish string) string {
	switch finish {
	case oai.FinishLength:
		return StopMaxTokens
	case oai.FinishToolCalls, oai.FinishFunctionCall:
		return StopToolUse
	case oai.FinishContentFilter:
		return StopRefusal
	}
	return StopEndTurn
}

// messageID is the answer's id: the provider's, as a message id.
func messageID(id string) string {
	if strings.HasPrefix(id, "msg_") {
		return id
	}
	id = strings.TrimPrefix(id, "chatcmpl-")
	if id == "" {
		return "msg_" + strings.TrimPrefix(oai.NewChatID(), "chatcmpl-")
	}
	return "msg_" + id
}

// usageOf is an OpenAI usage as Anthropic counts it: input_tokens without
// the cache's reads and writes.
func usageOf(u *oai.Usage) Usage {
	if u == nil {
		return Usage{}
	}
	read := u.PromptTokensDetails.CachedTokens
	if u.CacheReadInputTokens > read {
		read = u.CacheReadInputTokens
	}
	in := u.PromptTokens - read - u.CacheCreationInputTokens
	if in < 0 {
		in = 0
	}
	return Usage{InputTokens: in, OutputTokens: u.CompletionTokens, CacheReadInputTokens: read, CacheCreationInputTokens: u.CacheCreationInputTokens}
}

// chatAnswer is the members of an OpenAI chat.completion FromChat reads
// (oai.ChatCompletion's names): the others — created, model, logprobs,
// annotations, system_fingerprint — are skipped, not decoded.
type chatAnswer struct {
	ID      string       `json:"id"`
	Choices []chatChoice `json:"choices"`
	Usage   *oai.Usage   `json:"usage"`
}

// chatChoice is one choice of chatAnswer.
type chatChoice = struct {
	Message struct {
		Content          *string        `json:"content"`
		Refusal          *string        `json:"refusal"`
		ReasoningContent string         `json:"reasoning_content"`
		ToolCalls        []oai.ToolCall `json:"tool_calls"`
	} `json:"message"`
	FinishReason string `json:"finish_reason"`
}

// decodeChatAnswer decodes body into c as json.Unmarshal does. An answer in
// the usual form (readChatAnswer) is read without reflection — checked as
// Valid would in the same walk, the text, the bulk of it, unquoted in one
// pass —, any other by encoding/json (FuzzChatAnswer holds the two to each
// other).
func decodeChatAnswer(body []byte, c *chatAnswer) error {
	if valid, ok := readChatAnswer(body, c); ok && (valid || jsonscan.Valid(body)) {
		return nil
	}
	*c = chatAnswer{}
	return json.Unmarshal(body, c)
}

var (
	chatAnswerNames = []string{"id", "choices", "usage"}
	chatChoiceNames = []string{"message", "finish_reason"}
	chatMsgNames    = []string{"content", "refusal", "reasoning_content", "tool_calls"}
)

// readChatAnswer reads an answer into c; ok false when it is not in the
// form it reads (jsonscan.Fields), encoding/json's to decode. The choices
// and each choice's message are read as they are crossed
// (jsonscan.FieldsPrefixBy), so the text is delimited once, not once a
// level it nests, and checked in the same walk: valid true means body is
// JSON as jsonscan.Valid would say (false: not known), and what c holds is
// only meant when body is JSON.
func readChatAnswer(body []byte, c *chatAnswer) (valid, ok bool) {
	choices, choicesValid := false, false // read by the delimiter
	end, valid, ok := jsonscan.FieldsPrefixBy(body, chatAnswerNames, func(i int, v []byte) bool {
		switch i {
		case 0:
			return readString(v, &c.ID)
		case 1:
			return choices || jsonscan.Null(v)
		}
		if jsonscan.Null(v) {
			return true
		}
		c.Usage = new(oai.Usage)
		return json.Unmarshal(v, c.Usage) == nil // small: encoding/json's
	}, func(name, rest []byte) (int, bool) {
		if string(name) != "choices" || rest[0] != '[' {
			return 0, false
		}
		var n int
		n, choicesValid, choices = readChatChoices(rest, c)
		return n, choicesValid
	})
	return valid && ok && jsonscan.SkipSpace(body, end) == len(body), ok
}

// readChatChoices reads the array of choices that starts rest into c,
// returning its length and whether it is JSON (false: not known); ok false
// when a choice is not in the form it reads.
func readChatChoices(rest []byte, c *chatAnswer) (n int, valid, ok bool) {
	c.Choices = []chatChoice{}
	valid = true
	end, err := jsonscan.ElementsPrefixEnd(rest, func(v []byte) (int, error) {
		c.Choices = append(c.Choices, chatChoice{})
		n, choiceValid, ok := readChatChoice(v, &c.Choices[len(c.Choices)-1])
		if !ok {
			return 0, jsonscan.ErrSyntax
		}
		valid = valid && choiceValid
		return n, nil
	})
	return end, valid && err == nil, err == nil
}

// readChatChoice reads the choice that starts v (null or an object),
// returning its length and whether it is JSON (false: not known).
func readChatChoice(v []byte, ch *chatChoice) (n int, valid, ok bool) {
	if v[0] == 'n' {
		return len("null"), bytes.HasPrefix(v, []byte("null")), true
	}
	m := &ch.Message
	message := false // read by the delimiter
	return jsonscan.FieldsPrefixBy(v, chatChoiceNames, func(i int, v []byte) bool {
		if i == 1 {
			return readString(v, &ch.FinishReason)
		}
		return message || jsonscan.Null(v)
	}, func(name, rest []byte) (int, bool) {
		if string(name) != "message" || rest[0] != '{' {
			return 0, false
		}
		n, valid, ok := jsonscan.FieldsPrefixBy(rest, chatMsgNames, func(i int, v []byte) bool {
			switch i {
			case 0:
				return readStringPtr(v, &m.Content)
			case 1:
				return readStringPtr(v, &m.Refusal)
			case 2:
				return readString(v, &m.ReasoningContent)
			}
			return json.Unmarshal(v, &m.ToolCalls) == nil // rare: encoding/json's
		}, nil)
		if message = ok; !ok {
			return 0, false
		}
		return n, valid
	})
}

// readString decodes a string (null leaves dst as it is, as encoding/json
// does); false for any other value.
func readString(v []byte, dst *string) bool {
	if jsonscan.Null(v) {
		return true
	}
	s, err := jsonscan.String(v)
	*dst = s
	return err == nil
}

// readStringPtr decodes a string into a new *string (null: nil).
func readStringPtr(v []byte, dst **string) bool {
	if jsonscan.Null(v) {
		*dst = nil
		return true
	}
	s, err := jsonscan.String(v)
	*dst = &s
	return err == nil
}

// FromChat translates an OpenAI chat.completion into a message answering
// model: reasoning as a thinking block (no signature: only Anthropic signs),
// the text, the tool calls as tool_use blocks; the first choice only.
func FromChat(body []byte, model string) (*Response, error) {
	var c chatAnswer
	if err := decodeChatAnswer(body, &c); err != nil {
		return nil, api.Upstream(err, "The provider's answer is not a chat completion.")
	}
	if len(c.Choices) == 0 {
		return nil, api.Upstream(nil, "The provider's answer has no choice.")
	}
	ch := &c.Choices[0]
	m := &ch.Message
	res := &Response{ID: messageID(c.ID), Type: "message", Role: "assistant", Model: model, Content: []Block{}, Usage: usageOf(c.Usage)}
	if m.ReasoningContent != "" {
		res.Content = append(res.Content, Block{Type: BlockThinking, Thinking: m.ReasoningContent})
	}
	switch {
	case m.Content != nil && *m.Content != "":
		res.Content = append(res.Content, Block{Type: BlockText, Text: *m.Content})
	case m.Refusal != nil && *m.Refusal != "":
		res.Content = append(res.Content, Block{Type: BlockText, Text: *m.Refusal})
	}
	for i, tc := range m.ToolCalls {
		input := json.RawMessage(tc.Function.Arguments)
		if strings.TrimSpace(tc.Function.Arguments) == "" {
			input = json.RawMessage("{}")
		}
		if !isObject(input) || !json.Valid(input) {
			return nil, api.Upstream(nil, "The provider's tool call %d has arguments that are not a JSON object.", i)
		}
		res.Content = append(res.Content, Block{Type: BlockToolUse, ID: tc.ID, Name: tc.Function.Name, Input: input})
	}
	stop := stopReason(ch.FinishReason)
	if stop == StopEndTurn && len(m.ToolCalls) > 0 {
		stop = StopToolUse
	}
	res.StopReason = &stop
	return res, nil
}

// AnswerJSON encodes a message answer. A thinking block keeps its
// (empty) signature and a text block its text, as Anthropic always sends
// them.
func AnswerJSON(r *Response) ([]byte, error) {
	if b, ok := appendAnswer(make([]byte, 0, answerSize(r)), r); ok {
		return b, nil
	}
	return marshalAnswer(r)
}

// marshalAnswer is AnswerJSON by encoding/json: any answer, and the
// reference FuzzAnswerJSON holds appendAnswer to.
func marshalAnswer(r *Response) ([]byte, error) {
	type wire struct {
		Response
		Content []any `json:"content"`
	}
	w := wire{Response: *r, Content: make([]any, len(r.Content))}
	for i := range r.Content {
		w.Content[i] = answerBlock(&r.Content[i])
	}
	b, err := json.Marshal(w)
	if err != nil {
		return nil, fmt.Errorf("messages: encode the answer: %w", err)
	}
	return b, nil
}

// blockJSON encodes an answer's block with the members its type always has.
func blockJSON(b *Block) ([]byte, error) { return json.Marshal(answerBlock(b)) }

// answerBlock is an answer's block as encoded: with the members its type
// always has.
func answerBlock(b *Block) any {
	switch b.Type {
	case BlockText:
		return struct {
			Type string `json:"type"`
			Text string `json:"text"`
		}{b.Type, b.Text}
	case BlockThinking:
		return struct {
			Type      string `json:"type"`
			Thinking  string `json:"thinking"`
			Signature string `json:"signature"`
		}{b.Type, b.Thinking, b.Signature}
	case BlockToolUse:
		input := b.Input
		if len(input) == 0 {
			input = json.RawMessage("{}")
		}
		return struct {
			Type  string          `json:"type"`
			ID    string          `json:"id"`
			Name  string          `json:"name"`
			Input json.RawMessage `json:"input"`
		}{b.Type, b.ID, b.Name, input}
	}
	return b
}
