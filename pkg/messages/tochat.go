package messages

import (
	"encoding/json"
	"fmt"
	"strings"

	"github.com/sluice-gateway/sluice/pkg/api"
	"github.com/sluice-gateway/sluice/pkg/oai"
)

// chatRequest is the OpenAI chat request a Messages request becomes for a
// provider reached through the chat seam.
type chatRequest struct {
	Model             string          `json:"model"`
	Messages          []chatMessage   `json:"messages"`
	MaxTokens         int64           `json:"max_tokens"`
	Stream            bool            `json:"stream,omitempty"`
	StreamOptions     *streamOptions  `json:"stream_options,omitempty"`
	Stop              []string        `json:"stop,omitempty"`
	Temperature       *float64        `json:"temperature,omitempty"`
	TopP              *float64        `json:"top_p,omitempty"`
	TopK              *int64          `json:"top_k,omitempty"`
	Tools             []chatTool      `json:"tools,omitempty"`
	ToolChoice        any             `json:"tool_choice,omitempty"`
	ParallelToolCalls *bool           `json:"parallel_tool_calls,omitempty"`
	ReasoningEffort   string          `json:"reasoning_effort,omitempty"`
	User              string          `json:"user,omitempty"`
	MockResponse      json.RawMessage `json:"mock_response,omitempty"`
	DropParams        *bool           `json:"drop_params,omitempty"`
}

type streamOptions struct {
	IncludeUsage bool `json:"include_usage"`
}

type chatMessage struct {
	Role       string         `json:"role"`
	Content    any            `json:"content,omitempty"` // string or []chatPart
	ToolCalls  []chatToolCall `json:"tool_calls,omitempty"`
	ToolCallID string         `json:"tool_call_id,omitempty"`
}

type chatPart struct {
	Type     string    `json:"type"`
	Text     string    `json:"text,omitempty"`
	ImageURL *imageURL `json:"image_url,omitempty"`
	File     *chatFile `json:"file,omitempty"`
}

type imageURL struct {
	URL string `json:"url"`
}

type chatFile struct {
	FileData string `json:"file_data"`
}

type chatToolCall struct {
	ID       string       `json:"id"`
	Type     string       `json:"type"`
	Function chatFunction `json:"function"`
}

type chatFunction struct {
	Name      string `json:"name"`
	Arguments string `json:"arguments"`
}

type chatTool struct {
	Type     string      `json:"type"`
	Function chatToolDef `json:"function"`
}

type chatToolDef struct {
	Name        string          `json:"name"`
	Description string          `json:"description,omitempty"`
	Parameters  json.RawMessage `json:"parameters,omitempty"`
}

// effort maps a thinking budget onto OpenAI's reasoning_effort, as LiteLLM
// does: up to 1,024 tokens low, up to 2,048 medium, more high.
func effort(budget int64) string {
	switch {
	case budget <= 1024:
		return "low"
	case budget <= 2048:
		return "medium"
	}
	return "high"
}

// ChatBody translates the request into an OpenAI chat request body, for a
// provider reached through the chat seam. What configures Anthropic's own
// features and has no chat form is left out: other top-level members
// (container, mcp_servers, context_management, service_tier, …),
// cache_control marks, earlier turns' thinking blocks. What the target
// cannot honour of the rest (top_k, reasoning_effort, …) its chat
// translation refuses, or drops with drop_params.
func (p *Parsed) ChatBody() ([]byte, error) {
	if !p.decoded {
		if b, ok := p.appendChatBodyRaw(make([]byte, 0, len(p.Body)+chatBodyExtra)); ok {
			return b, nil
		}
	}
	if err := p.decode(); err != nil {
		return nil, err
	}
	out, err := p.chatRequest()
	if err != nil {
		return nil, err
	}
	if b, ok := appendChatBody(make([]byte, 0, chatBodySize(&out)), &out); ok {
		return b, nil
	}
	b, err := json.Marshal(out)
	if err != nil {
		return nil, fmt.Errorf("messages: encode the chat request: %w", err)
	}
	return b, nil
}

// chatRequest is the decoded request as an OpenAI chat request.
func (p *Parsed) chatRequest() (chatRequest, error) {
	r := &p.Request
	out := p.chatHead()
	if len(r.System.Blocks) > 0 {
		texts := make([]string, 0, len(r.System.Blocks))
		for _, b := range r.System.Blocks {
			texts = append(texts, b.Text)
		}
		out.Messages = append(out.Messages, chatMessage{Role: "system", Content: strings.Join(texts, "\n")})
	}
	for i := range r.Messages {
		msgs, err := chatMessages(&r.Messages[i], fmt.Sprintf("messages[%d]", i))
		if err != nil {
			return chatRequest{}, err
		}
		out.Messages = append(out.Messages, msgs...)
	}
	for i, t := range r.Tools {
		if t.Type != "" && t.Type != "custom" {
			return chatRequest{}, api.InvalidValue(fmt.Sprintf("tools[%d].type", i),
				"The tool '%s' (type %s) is one of Anthropic's server tools, which only Anthropic deployments run.", t.Name, t.Type)
		}
		out.Tools = append(out.Tools, chatTool{Type: "function", Function: chatToolDef{Name: t.Name, Description: t.Description, Parameters: t.InputSchema}})
	}
	if tc := r.ToolChoice; tc != nil {
		switch tc.Type {
		case "auto":
			out.ToolChoice = "auto"
		case "any":
			out.ToolChoice = "required"
		case "none":
			out.ToolChoice = "none"
		case "tool":
			out.ToolChoice = map[string]any{"type": "function", "function": map[string]string{"name": tc.Name}}
		}
		if tc.DisableParallelToolUse && len(r.Tools) > 0 {
			no := false
			out.ParallelToolCalls = &no
		}
		if len(r.Tools) == 0 {
			out.ToolChoice, out.ParallelToolCalls = nil, nil // OpenAI refuses a choice without tools
		}
	}
	return out, nil
}

// chatHead is the chat request of the head's members: all but messages,
// system, tools and tool choice.
func (p *Parsed) chatHead() chatRequest {
	r := &p.Request
	out := chatRequest{
		Model: r.Model, MaxTokens: r.MaxTokens, Stream: r.Stream, Stop: r.StopSequences,
		Temperature: r.Temperature, TopP: r.TopP, TopK: r.TopK,
		MockResponse: r.MockResponse, DropParams: r.DropParams,
	}
	if r.Stream {
		out.StreamOptions = &streamOptions{IncludeUsage: true}
	}
	if r.Metadata != nil {
		out.User = r.Metadata.UserID
	}
	if th := r.Thinking; th != nil && th.Type == "enabled" {
		out.ReasoningEffort = effort(th.BudgetTokens)
	}
	return out
}

// Chat is the request as the chat seam takes it (ChatBody, parsed): the
// request is decoded and checked whole first, if ParseHead read only its
// head.
func (p *Parsed) Chat() (*oai.ChatRequest, error) {
	p.chatOnce.Do(func() { p.chat, p.chatErr = p.translate() })
	return p.chat, p.chatErr
}

func (p *Parsed) translate() (*oai.ChatRequest, error) {
	b, err := p.ChatBody()
	if err != nil {
		return nil, err
	}
	return oai.ParseChatRequest(b)
}

// chatMessages translates one turn: an assistant turn is one message (its
// text, its tool calls); a user turn is its tool results as tool messages,
// first (OpenAI wants them right after the calls), then the rest as one
// user message.
func chatMessages(m *Message, at string) ([]chatMessage, error) {
	if m.Role == "assistant" {
		var texts []string
		msg := chatMessage{Role: "assistant"}
		for j, b := range m.Content.Blocks {
			switch b.Type {
			case BlockText:
				texts = append(texts, b.Text)
			case BlockToolUse:
				msg.ToolCalls = append(msg.ToolCalls, chatToolCall{ID: b.ID, Type: "function", Function: chatFunction{Name: b.Name, Arguments: string(b.Input)}})
			case BlockThinking, BlockRedactedThinking:
				// Only Anthropic can take a thinking block back (its signature).
			default:
				return nil, unsupportedBlock(b.Type, fmt.Sprintf("%s.content[%d]", at, j))
			}
		}
		if len(texts) > 0 || len(msg.ToolCalls) == 0 {
			msg.Content = strings.Join(texts, "")
		}
		return []chatMessage{msg}, nil
	}
	if m.Content.Plain {
		return []chatMessage{{Role: "user", Content: m.Content.Blocks[0].Text}}, nil
	}
	var (
		out   []chatMessage
		parts []chatPart
	)
	for j := range m.Content.Blocks {
		b := &m.Content.Blocks[j]
		bat := fmt.Sprintf("%s.content[%d]", at, j)
		if b.Type == BlockToolResult {
			text, extra, err := toolResult(b, bat)
			if err != nil {
				return nil, err
			}
			out = append(out, chatMessage{Role: "tool", ToolCallID: b.ToolUseID, Content: text})
			parts = append(parts, extra...)
			continue
		}
		part, err := chatPartOf(b, bat)
		if err != nil {
			return nil, err
		}
		parts = append(parts, part)
	}
	if len(parts) > 0 {
		out = append(out, chatMessage{Role: "user", Content: parts})
	}
	return out, nil
}

// toolResult is a tool_result's text for its tool message, and its images
// and documents, which a tool message cannot hold: they follow in the user
// message.
func toolResult(b *Block, at string) (string, []chatPart, error) {
	var (
		texts []string
		extra []chatPart
	)
	if b.Content != nil {
		for k := range b.Content.Blocks {
			in := &b.Content.Blocks[k]
			if in.Type == BlockText {
				texts = append(texts, in.Text)
				continue
			}
			part, err := chatPartOf(in, fmt.Sprintf("%s.content[%d]", at, k))
			if err != nil {
				return "", nil, err
			}
			extra = append(extra, part)
		}
	}
	text := strings.Join(texts, "\n")
	if b.IsError && text == "" {
		text = "Error"
	}
	return text, extra, nil
}

func chatPartOf(b *Block, at string) (chatPart, error) {
	switch b.Type {
	case BlockText:
		return chatPart{Type: "text", Text: b.Text}, nil
	case BlockImage:
		s := b.Source
		if s.Type == "url" {
			return chatPart{Type: "image_url", ImageURL: &imageURL{URL: s.URL}}, nil
		}
		return chatPart{Type: "image_url", ImageURL: &imageURL{URL: "data:" + s.MediaType + ";base64," + s.Data}}, nil
	case BlockDocument:
		s := b.Source
		switch s.Type {
		case "base64":
			return chatPart{Type: "file", File: &chatFile{FileData: "data:" + s.MediaType + ";base64," + s.Data}}, nil
		case "text":
			return chatPart{Type: "text", Text: s.Data}, nil
		}
		return chatPart{}, api.InvalidValue(at+".source.type", "A document's %s source is served by Anthropic deployments only; send it as base64.", s.Type)
	}
	return chatPart{}, unsupportedBlock(b.Type, at)
}

func unsupportedBlock(typ, at string) error {
	return api.InvalidValue(at+".type", "Content blocks of type '%s' are served by Anthropic deployments only.", typ)
}
