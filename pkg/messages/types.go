// Package messages is Anthropic's Messages API in front of every provider:
// POST /v1/messages and POST /v1/messages/count_tokens, routed by model
// through pkg/models like chat. A deployment that speaks Messages itself
// (Anthropic, Claude on Vertex AI: models.Messenger) gets the client's body
// with only its model and credentials changed; every other provider is
// reached through the chat seam — the request translated into an OpenAI
// chat request for its models.Chatter, the OpenAI answer (or chunk stream)
// translated back into a message (or Anthropic's event grammar). Answers
// and errors are Anthropic's shapes either way.
package messages

import (
	"encoding/json"

	"github.com/sluice-gateway/sluice/pkg/jsonscan"
	"github.com/sluice-gateway/sluice/pkg/providers/anthropic"
)

// CallType is the log event's call type of a Messages call (LiteLLM's).
const CallType = "anthropic_messages"

// Request is a Messages request, as far as sluice reads it.
type Request struct {
	Model         string          `json:"model"`
	MaxTokens     int64           `json:"max_tokens"`
	Messages      []Message       `json:"messages"`
	System        Content         `json:"system,omitzero"`
	Stream        bool            `json:"stream,omitempty"`
	StopSequences []string        `json:"stop_sequences,omitempty"`
	Temperature   *float64        `json:"temperature,omitempty"`
	TopP          *float64        `json:"top_p,omitempty"`
	TopK          *int64          `json:"top_k,omitempty"`
	Tools         []Tool          `json:"tools,omitempty"`
	ToolChoice    *ToolChoice     `json:"tool_choice,omitempty"`
	Thinking      *Thinking       `json:"thinking,omitempty"`
	Metadata      *Metadata       `json:"metadata,omitempty"`
	ServiceTier   string          `json:"service_tier,omitempty"`
	MockResponse  json.RawMessage `json:"mock_response,omitempty"`
	DropParams    *bool           `json:"drop_params,omitempty"`

	// Body is the request as the client sent it: what a native deployment
	// is sent, with its model.
	Body []byte `json:"-"`
}

// Message is one turn of the conversation.
type Message struct {
	Role    string  `json:"role"` // "user" or "assistant"
	Content Content `json:"content"`
}

// Content is a message's (or the system prompt's) content: a string, or
// blocks. Decoded, a string is one text block with Plain set.
type Content struct {
	Blocks []Block
	// Plain is true when the content was a string.
	Plain bool
}

// IsZero reports content never given.
func (c Content) IsZero() bool { return !c.Plain && c.Blocks == nil }

// UnmarshalJSON takes a string or an array of blocks. b is valid JSON (the
// decoder calling it checked it): a string is unquoted and the blocks are
// decoded one by one without encoding/json checking b again, a pass over
// the content at each level it nests.
func (c *Content) UnmarshalJSON(b []byte) error {
	switch {
	case len(b) > 0 && b[0] == '"':
		s, err := jsonscan.String(b)
		if err != nil {
			return err
		}
		*c = Content{Blocks: []Block{{Type: BlockText, Text: s}}, Plain: true}
		return nil
	case len(b) > 0 && b[0] == '[':
		blocks := []Block{}
		err := jsonscan.Elements(b, func(v []byte) error {
			blocks = append(blocks, Block{})
			return blocks[len(blocks)-1].UnmarshalJSON(v)
		})
		if err != nil {
			return err
		}
		*c = Content{Blocks: blocks}
		return nil
	}
	var blocks []Block // not a string nor an array: encoding/json's error
	if err := json.Unmarshal(b, &blocks); err != nil {
		return err
	}
	*c = Content{Blocks: blocks}
	return nil
}

// MarshalJSON writes a string back as a string.
func (c Content) MarshalJSON() ([]byte, error) {
	if c.Plain && len(c.Blocks) == 1 {
		return json.Marshal(c.Blocks[0].Text)
	}
	return json.Marshal(c.Blocks)
}

// Block types.
const (
	BlockText             = "text"
	BlockImage            = "image"
	BlockDocument         = "document"
	BlockToolUse          = "tool_use"
	BlockToolResult       = "tool_result"
	BlockThinking         = "thinking"
	BlockRedactedThinking = "redacted_thinking"
)

// Block is one content block (of a request or an answer).
type Block struct {
	Type string `json:"type"`
	// text
	Text string `json:"text,omitempty"`
	// image, document
	Source *Source `json:"source,omitempty"`
	// tool_use
	ID    string          `json:"id,omitempty"`
	Name  string          `json:"name,omitempty"`
	Input json.RawMessage `json:"input,omitempty"`
	// tool_result
	ToolUseID string   `json:"tool_use_id,omitempty"`
	Content   *Content `json:"content,omitempty"`
	IsError   bool     `json:"is_error,omitempty"`
	// thinking, redacted_thinking
	Thinking  string `json:"thinking,omitempty"`
	Signature string `json:"signature,omitempty"`
	Data      string `json:"data,omitempty"`

	CacheControl json.RawMessage `json:"cache_control,omitempty"`

	// Raw is a block of a type sluice does not model (a server tool's
	// result, a search result, …), as it came: only a native deployment
	// takes it.
	Raw json.RawMessage `json:"-"`
}

// UnmarshalJSON decodes the blocks sluice models; any other is kept raw,
// whatever its members. One decode serves both: a block of another type
// that does not fit Block's members is not an error.
func (b *Block) UnmarshalJSON(data []byte) error {
	type plain Block
	var p plain
	err := json.Unmarshal(data, &p)
	switch p.Type {
	case BlockText, BlockImage, BlockDocument, BlockToolUse, BlockToolResult, BlockThinking, BlockRedactedThinking, "":
		*b = Block(p)
		return err
	}
	*b = Block{Type: p.Type, Raw: append(json.RawMessage(nil), data...)}
	return nil
}

// Source is an image's or a document's data.
type Source struct {
	Type      string `json:"type"` // "base64", "url" (or "text" for a document)
	MediaType string `json:"media_type,omitempty"`
	Data      string `json:"data,omitempty"`
	URL       string `json:"url,omitempty"`
}

// Tool is a client tool (a function the model may call); server tools
// (a type such as "web_search_20250305") are Anthropic's own.
type Tool struct {
	Type         string          `json:"type,omitempty"`
	Name         string          `json:"name"`
	Description  string          `json:"description,omitempty"`
	InputSchema  json.RawMessage `json:"input_schema,omitempty"`
	CacheControl json.RawMessage `json:"cache_control,omitempty"`
}

// ToolChoice says whether and which tools the model must use.
type ToolChoice struct {
	Type                   string `json:"type"` // auto, any, tool, none
	Name                   string `json:"name,omitempty"`
	DisableParallelToolUse bool   `json:"disable_parallel_tool_use,omitempty"`
}

// Thinking turns extended thinking on (enabled, with a budget) or off.
type Thinking struct {
	Type         string `json:"type"` // enabled, disabled
	BudgetTokens int64  `json:"budget_tokens,omitempty"`
}

// Metadata is the request's metadata.
type Metadata struct {
	UserID string `json:"user_id,omitempty"`
}

// Message answer types.
const (
	StopEndTurn      = "end_turn"
	StopMaxTokens    = "max_tokens"
	StopStopSequence = "stop_sequence"
	StopToolUse      = "tool_use"
	StopRefusal      = "refusal"
)

// Response is a Messages answer (type "message").
type Response struct {
	ID           string  `json:"id"`
	Type         string  `json:"type"` // "message"
	Role         string  `json:"role"` // "assistant"
	Model        string  `json:"model"`
	Content      []Block `json:"content"`
	StopReason   *string `json:"stop_reason"`
	StopSequence *string `json:"stop_sequence"`
	Usage        Usage   `json:"usage"`
}

// Usage is an answer's token counts (InputTokens excludes the cache's):
// Anthropic's usage object, whose one schema (and reflection-free decoder,
// for the meters) is anthropic.Usage.
type Usage = anthropic.Usage

// Stream event types, Anthropic's grammar.
const (
	EventMessageStart      = "message_start"
	EventContentBlockStart = "content_block_start"
	EventContentBlockDelta = "content_block_delta"
	EventContentBlockStop  = "content_block_stop"
	EventMessageDelta      = "message_delta"
	EventMessageStop       = "message_stop"
	EventPing              = "ping"
	EventError             = "error"
)

// Delta types of content_block_delta.
const (
	DeltaText      = "text_delta"
	DeltaInputJSON = "input_json_delta"
	DeltaThinking  = "thinking_delta"
	DeltaSignature = "signature_delta"
)

// MessageStart is the message_start event.
type MessageStart struct {
	Type    string   `json:"type"`
	Message Response `json:"message"`
}

// ContentBlockStart is the content_block_start event.
type ContentBlockStart struct {
	Type         string `json:"type"`
	Index        int    `json:"index"`
	ContentBlock Block  `json:"content_block"`
}

// ContentBlockDelta is the content_block_delta event.
type ContentBlockDelta struct {
	Type  string `json:"type"`
	Index int    `json:"index"`
	Delta Delta  `json:"delta"`
}

// Delta is a piece of a content block.
type Delta struct {
	Type        string `json:"type"`
	Text        string `json:"text,omitempty"`
	PartialJSON string `json:"partial_json,omitempty"`
	Thinking    string `json:"thinking,omitempty"`
	Signature   string `json:"signature,omitempty"`
}

// ContentBlockStop is the content_block_stop event.
type ContentBlockStop struct {
	Type  string `json:"type"`
	Index int    `json:"index"`
}

// MessageDelta is the message_delta event: how the message ended, and the
// usage so far.
type MessageDelta struct {
	Type  string            `json:"type"`
	Delta MessageDeltaDelta `json:"delta"`
	Usage Usage             `json:"usage"`
}

// MessageDeltaDelta is the message_delta event's delta.
type MessageDeltaDelta struct {
	StopReason   *string `json:"stop_reason"`
	StopSequence *string `json:"stop_sequence"`
}

// TokenCount is count_tokens' answer.
type TokenCount struct {
	InputTokens int64 `json:"input_tokens"`
	// Estimated is sluice's: true when the count is an estimate (no
	// tokenizer for the model, or parts whose count it cannot know:
	// CountChat), not the model's count.
	Estimated bool `json:"estimated,omitempty"`
}
