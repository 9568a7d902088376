package oai

import (
	"encoding/json"
	"strconv"

	"github.com/sluice-gateway/sluice/pkg/ids"
	"github.com/sluice-gateway/sluice/pkg/jsonscan"
)

// Finish reasons, as OpenAI names them.
const (
	FinishStop          = "stop"
	FinishLength        = "length"
	FinishToolCalls     = "tool_calls"
	FinishContentFilter = "content_filter"
	FinishFunctionCall  = "function_call"
)

// Object names of chat answers.
const (
	ObjectChatCompletion = "chat.completion"
	ObjectChatChunk      = "chat.completion.chunk"
)

// NewChatID returns a fresh chat completion id ("chatcmpl-…"), for answers
// sluice builds itself.
func NewChatID() string { return ids.New(ids.ChatCompletion) }

// ChatCompletion is a chat completions answer (object "chat.completion"),
// what a translating provider builds and encodes with encoding/json.
type ChatCompletion struct {
	ID                string       `json:"id"`
	Object            string       `json:"object"` // ObjectChatCompletion
	Created           int64        `json:"created"`
	Model             string       `json:"model"`
	Choices           []ChatChoice `json:"choices"`
	Usage             *Usage       `json:"usage,omitempty"`
	SystemFingerprint string       `json:"system_fingerprint,omitempty"`
}

// ChatChoice is one choice of an answer.
type ChatChoice struct {
	Index        int           `json:"index"`
	Message      AnswerMessage `json:"message"`
	FinishReason string        `json:"finish_reason"`
	// Logprobs is null unless the provider gave them (in OpenAI's shape).
	Logprobs json.RawMessage `json:"logprobs"`
}

// AnswerMessage is the assistant message of a choice.
type AnswerMessage struct {
	Role string `json:"role"` // RoleAssistant
	// Content is null when the message has only tool calls.
	Content *string `json:"content"`
	Refusal *string `json:"refusal"`
	// ReasoningContent is the model's reasoning, where the provider returns
	// it (Anthropic's thinking, Gemini's thoughts): LiteLLM's extension.
	ReasoningContent string `json:"reasoning_content,omitempty"`
	// ThinkingBlocks are Anthropic's thinking blocks with their signatures,
	// as LiteLLM returns them, for a client to send back.
	ThinkingBlocks json.RawMessage `json:"thinking_blocks,omitempty"`
	ToolCalls      []ToolCall      `json:"tool_calls,omitempty"`
}

// ChatChunk is one event of a streamed answer (object
// "chat.completion.chunk"). The final usage chunk has no choices and a
// Usage; every other chunk has choices and no Usage.
type ChatChunk struct {
	ID                string
	Created           int64
	Model             string
	SystemFingerprint string
	Choices           []ChunkChoice
	Usage             *Usage
}

// ChunkChoice is one choice's delta.
type ChunkChoice struct {
	Index int
	Delta Delta
	// FinishReason is "" (null) until the choice's last chunk.
	FinishReason string
}

// Delta is what a chunk adds to a choice's message. The first chunk of a
// choice carries the Role (and an empty content, as OpenAI sends it).
type Delta struct {
	Role             string
	Content          string
	ReasoningContent string
	Refusal          string
	// ThinkingBlocks are pieces of Anthropic's thinking blocks (a thinking
	// delta, a block's signature, a redacted block) as LiteLLM streams
	// them, for a client to send the blocks back: a JSON array.
	ThinkingBlocks json.RawMessage
	ToolCalls      []ToolCallDelta
}

// ToolCallDelta is a piece of a tool call: the first names it (ID, Type,
// Name), the next add to its Arguments. Index says which call of the
// message it belongs to.
type ToolCallDelta struct {
	Index     int
	ID        string
	Type      string // "function" on a call's first delta
	Name      string
	Arguments string
}

// DoneEvent is the event that ends every OpenAI stream.
const DoneEvent = "data: [DONE]\n\n"

// AppendChunk appends c as one server-sent event: "data: {…}\n\n".
func AppendChunk(dst []byte, c *ChatChunk) []byte {
	dst = appendChunkHead(dst, c.ID, c.Created, c.Model, c.SystemFingerprint)
	for i := range c.Choices {
		if i > 0 {
			dst = append(dst, ',')
		}
		dst = appendChoice(dst, &c.Choices[i])
	}
	dst = append(dst, ']')
	if c.Usage != nil {
		dst = append(dst, `,"usage":`...)
		dst = AppendUsage(dst, c.Usage)
	}
	return append(dst, "}\n\n"...)
}

func appendChunkHead(dst []byte, id string, created int64, model, fingerprint string) []byte {
	dst = append(dst, `data: {"id":`...)
	dst = jsonscan.AppendString(dst, id)
	dst = append(dst, `,"object":"chat.completion.chunk","created":`...)
	dst = strconv.AppendInt(dst, created, 10)
	dst = append(dst, `,"model":`...)
	dst = jsonscan.AppendString(dst, model)
	if fingerprint != "" {
		dst = append(dst, `,"system_fingerprint":`...)
		dst = jsonscan.AppendString(dst, fingerprint)
	}
	return append(dst, `,"choices":[`...)
}

func appendChoice(dst []byte, c *ChunkChoice) []byte {
	dst = append(dst, `{"index":`...)
	dst = strconv.AppendInt(dst, int64(c.Index), 10)
	dst = append(dst, `,"delta":{`...)
	d := &c.Delta
	sep := false
	field := func(name string) {
		if sep {
			dst = append(dst, ',')
		}
		sep = true
		dst = append(dst, name...)
	}
	if d.Role != "" {
		field(`"role":`)
		dst = jsonscan.AppendString(dst, d.Role)
	}
	if d.Content != "" || (d.Role != "" && len(d.ToolCalls) == 0) {
		field(`"content":`)
		dst = jsonscan.AppendString(dst, d.Content)
	}
	if d.ReasoningContent != "" {
		field(`"reasoning_content":`)
		dst = jsonscan.AppendString(dst, d.ReasoningContent)
	}
	if d.Refusal != "" {
		field(`"refusal":`)
		dst = jsonscan.AppendString(dst, d.Refusal)
	}
	if len(d.ThinkingBlocks) > 0 {
		field(`"thinking_blocks":`)
		dst = append(dst, d.ThinkingBlocks...)
	}
	if len(d.ToolCalls) > 0 {
		field(`"tool_calls":[`)
		for i := range d.ToolCalls {
			if i > 0 {
				dst = append(dst, ',')
			}
			dst = appendToolCallDelta(dst, &d.ToolCalls[i])
		}
		dst = append(dst, ']')
	}
	dst = append(dst, `},"logprobs":null,"finish_reason":`...)
	return appendFinish(dst, c.FinishReason)
}

func appendFinish(dst []byte, reason string) []byte {
	if reason == "" {
		return append(dst, "null}"...)
	}
	dst = jsonscan.AppendString(dst, reason)
	return append(dst, '}')
}

func appendToolCallDelta(dst []byte, t *ToolCallDelta) []byte {
	dst = append(dst, `{"index":`...)
	dst = strconv.AppendInt(dst, int64(t.Index), 10)
	if t.ID != "" {
		dst = append(dst, `,"id":`...)
		dst = jsonscan.AppendString(dst, t.ID)
	}
	if t.Type != "" {
		dst = append(dst, `,"type":`...)
		dst = jsonscan.AppendString(dst, t.Type)
	}
	dst = append(dst, `,"function":{`...)
	if t.Name != "" {
		dst = append(dst, `"name":`...)
		dst = jsonscan.AppendString(dst, t.Name)
		dst = append(dst, ',')
	}
	dst = append(dst, `"arguments":`...)
	dst = jsonscan.AppendString(dst, t.Arguments)
	return append(dst, "}}"...)
}

// AppendUsage appends u as OpenAI's usage object (the details always, as
// OpenAI sends them; Anthropic's cache counts when set).
func AppendUsage(dst []byte, u *Usage) []byte {
	dst = append(dst, `{"prompt_tokens":`...)
	dst = strconv.AppendInt(dst, u.PromptTokens, 10)
	dst = append(dst, `,"completion_tokens":`...)
	dst = strconv.AppendInt(dst, u.CompletionTokens, 10)
	dst = append(dst, `,"total_tokens":`...)
	dst = strconv.AppendInt(dst, u.TotalTokens, 10)
	dst = append(dst, `,"prompt_tokens_details":{"cached_tokens":`...)
	dst = strconv.AppendInt(dst, u.PromptTokensDetails.CachedTokens, 10)
	dst = append(dst, `},"completion_tokens_details":{"reasoning_tokens":`...)
	dst = strconv.AppendInt(dst, u.CompletionTokensDetails.ReasoningTokens, 10)
	dst = append(dst, '}')
	if u.CacheCreationInputTokens > 0 {
		dst = append(dst, `,"cache_creation_input_tokens":`...)
		dst = strconv.AppendInt(dst, u.CacheCreationInputTokens, 10)
	}
	if u.CacheReadInputTokens > 0 {
		dst = append(dst, `,"cache_read_input_tokens":`...)
		dst = strconv.AppendInt(dst, u.CacheReadInputTokens, 10)
	}
	return append(dst, '}')
}

// ChunkWriter writes the chunks of one streamed answer: what every chunk
// repeats (id, created, model) is encoded once, and the common chunks —
// a text delta, a finish, the usage — are appended without building a
// ChatChunk. A translator holds one per stream.
type ChunkWriter struct {
	head []byte // `data: {"id":…,"choices":[`
}

// NewChunkWriter returns the writer of the stream of answer id (NewChatID)
// for model, created at created (Unix seconds).
func NewChunkWriter(id, model string, created int64) *ChunkWriter {
	return &ChunkWriter{head: appendChunkHead(nil, id, created, model, "")}
}

// Role appends the first chunk of choice index: the assistant role and an
// empty content, as OpenAI starts every choice.
func (w *ChunkWriter) Role(dst []byte, index int) []byte {
	return w.Choice(dst, &ChunkChoice{Index: index, Delta: Delta{Role: RoleAssistant}})
}

// Choice appends a chunk with the one choice c.
func (w *ChunkWriter) Choice(dst []byte, c *ChunkChoice) []byte {
	dst = append(dst, w.head...)
	dst = appendChoice(dst, c)
	return append(dst, "]}\n\n"...)
}

// Text appends a content delta of choice index; lit is the text as a JSON
// string literal ("…" with its escapes), as a provider's JSON answer holds
// it: it is copied, never decoded and encoded again. Reasoning appends a
// reasoning_content delta the same way.
func (w *ChunkWriter) Text(dst []byte, index int, lit []byte) []byte {
	return w.literal(dst, index, `"content":`, lit)
}

// Reasoning appends a reasoning_content delta; see Text.
func (w *ChunkWriter) Reasoning(dst []byte, index int, lit []byte) []byte {
	return w.literal(dst, index, `"reasoning_content":`, lit)
}

func (w *ChunkWriter) literal(dst []byte, index int, member string, lit []byte) []byte {
	dst = append(dst, w.head...)
	dst = append(dst, `{"index":`...)
	dst = strconv.AppendInt(dst, int64(index), 10)
	dst = append(dst, `,"delta":{`...)
	dst = append(dst, member...)
	dst = append(dst, lit...)
	return append(dst, "},\"logprobs\":null,\"finish_reason\":null}]}\n\n"...)
}

// Finish appends the last chunk of choice index: an empty delta and the
// finish reason.
func (w *ChunkWriter) Finish(dst []byte, index int, reason string) []byte {
	return w.Choice(dst, &ChunkChoice{Index: index, FinishReason: reason})
}

// Usage appends the final usage chunk: no choices, and u.
func (w *ChunkWriter) Usage(dst []byte, u *Usage) []byte {
	dst = append(dst, w.head...)
	dst = append(dst, `],"usage":`...)
	dst = AppendUsage(dst, u)
	return append(dst, "}\n\n"...)
}

// End appends the stream's last events: the usage chunk when u is not nil
// (the gateway counts tokens by it), then data: [DONE].
func (w *ChunkWriter) End(dst []byte, u *Usage) []byte {
	if u != nil {
		dst = w.Usage(dst, u)
	}
	return w.Done(dst)
}

// Done appends the event that ends the stream, data: [DONE].
func (w *ChunkWriter) Done(dst []byte) []byte { return append(dst, DoneEvent...) }
