package bedrock

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"mime"
	"net/http"
	"strings"
	"time"

	"github.com/sluice-gateway/sluice/pkg/api"
	"github.com/sluice-gateway/sluice/pkg/jsonscan"
	"github.com/sluice-gateway/sluice/pkg/models"
	"github.com/sluice-gateway/sluice/pkg/oai"
	"github.com/sluice-gateway/sluice/pkg/providers"
	"github.com/sluice-gateway/sluice/pkg/providers/anthropic"
)

// Converse actions on a model (POST /model/{modelId}/…).
const (
	ActionConverse       = "converse"
	ActionConverseStream = "converse-stream"
)

// EventStreamType is the media type of ConverseStream's answer.
const EventStreamType = "application/vnd.amazon.eventstream"

// Chat sends the request through Converse (or, for a stream,
// ConverseStream) and translates the answer to OpenAI's shape.
func (e *endpoint) Chat(ctx context.Context, req *oai.ChatRequest) (*models.Answer, error) {
	t, err := e.translate(req)
	if err != nil {
		return nil, err
	}
	body, err := json.Marshal(&t.out)
	if err != nil {
		return nil, fmt.Errorf("bedrock: encode the converse request: %w", err)
	}
	if !req.Stream {
		hreq, err := e.request(ctx, e.converseURL, body, "application/json")
		if err != nil {
			return nil, err
		}
		resp, err := providers.DoWith(e.client, Name, hreq, readError)
		if err != nil {
			return nil, err
		}
		cc, err := e.completion(resp.Body, t.jsonMode)
		if err != nil {
			return nil, err
		}
		out, err := json.Marshal(cc)
		if err != nil {
			return nil, fmt.Errorf("bedrock: encode the answer: %w", err)
		}
		return models.Translated(out, cc.Usage, cc.Choices[0].FinishReason), nil
	}
	resp, err := e.send(ctx, e.streamURL, body, EventStreamType)
	if err != nil {
		return nil, err
	}
	if mt, _, _ := mime.ParseMediaType(resp.Header.Get("Content-Type")); mt != EventStreamType {
		resp.Body.Close()
		return nil, &models.ProviderError{Provider: Name, Status: resp.StatusCode,
			Message: fmt.Sprintf("answered ConverseStream with Content-Type %q, not an event stream", mt)}
	}
	s := newConverseStream(resp.Body, e.model, t.jsonMode)
	if err := s.prime(); err != nil {
		resp.Body.Close()
		return nil, err
	}
	return &models.Answer{Body: oai.NewChunkStream(s.next, resp.Body), ContentLength: -1}, nil
}

// request is a Converse call of body to url, SigV4-signed over its exact
// bytes.
func (e *endpoint) request(ctx context.Context, url string, body []byte, accept string) (*http.Request, error) {
	hreq, err := http.NewRequestWithContext(ctx, http.MethodPost, url, bytes.NewReader(body))
	if err != nil {
		return nil, fmt.Errorf("bedrock: build the request: %w", err)
	}
	hreq.Header.Set("Content-Type", "application/json")
	hreq.Header.Set("Accept", accept)
	if err := e.auth.Sign(ctx, hreq, body); err != nil {
		if ctx.Err() != nil {
			return nil, fmt.Errorf("bedrock %s: %w", hreq.URL.Path, err)
		}
		u := api.Unavailable("The gateway has no usable AWS credentials for Bedrock model '%s' (%s).", e.model, e.auth.Source)
		u.Err = err
		return nil, u
	}
	return hreq, nil
}

// send posts a body to url, signed (request). An answer other than 2xx is a
// *models.ProviderError read from Bedrock's error shape.
func (e *endpoint) send(ctx context.Context, url string, body []byte, accept string) (*http.Response, error) {
	hreq, err := e.request(ctx, url, body, accept)
	if err != nil {
		return nil, err
	}
	resp, err := providers.Send(e.client, hreq)
	if err != nil {
		return nil, fmt.Errorf("bedrock %s: %w", hreq.URL.Path, err)
	}
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		return nil, readError(Name, resp)
	}
	return resp, nil
}

// readError reads Bedrock's error answer, {"message": …} with the
// exception's name in X-Amzn-Errortype ("ThrottlingException:http://…"),
// which becomes the error's Code. A quota exceeded (400 on the wire) is a
// 429 to the router: another deployment, or later, may serve.
func readError(provider string, resp *http.Response) *models.ProviderError {
	kind, _, _ := strings.Cut(resp.Header.Get("X-Amzn-Errortype"), ":")
	pe := models.ReadProviderError(provider, resp)
	if kind != "" {
		pe.Code = kind
	}
	if kind == "ServiceQuotaExceededException" {
		pe.Status = http.StatusTooManyRequests
	}
	return pe
}

// malformed is an answer sluice cannot read: the router reports it as the
// provider's unexpected answer.
func malformed(format string, args ...any) *models.ProviderError {
	return &models.ProviderError{Provider: Name, Status: http.StatusOK, Message: "unreadable Converse answer: " + fmt.Sprintf(format, args...)}
}

// finishReason maps Converse's stopReason to OpenAI's finish_reason: its
// guardrail reasons are a content filter, the rest are Anthropic's
// stop_reason vocabulary (end_turn, tool_use, max_tokens, …).
func finishReason(stop string) string {
	switch stop {
	case "guardrail_intervened", "content_filtered":
		return oai.FinishContentFilter
	}
	return anthropic.FinishReason(stop)
}

// thinkingBlock is a reasoning block in LiteLLM's thinking_blocks shape,
// which a client sends back on its next turn.
type thinkingBlock struct {
	Type      string `json:"type"` // "thinking" or "redacted_thinking"
	Thinking  string `json:"thinking,omitempty"`
	Signature string `json:"signature,omitempty"`
	Data      string `json:"data,omitempty"`
}

// converseAnswer is a Converse answer: {"output":{"message":{"role",
// "content":[…]}},"stopReason","usage",…}.
type converseAnswer struct {
	Output struct {
		Message *struct {
			Content []answerBlock `json:"content"`
		} `json:"message"`
	} `json:"output"`
	StopReason string         `json:"stopReason"`
	Usage      *ConverseUsage `json:"usage"`
}

// answerBlock is a ContentBlock of the answer: text, toolUse or
// reasoningContent.
type answerBlock struct {
	Text             *string           `json:"text"`
	ToolUse          *toolUse          `json:"toolUse"`
	ReasoningContent *reasoningContent `json:"reasoningContent"`
}

// reasoningContent is {"reasoningText":{"text","signature"}} or
// {"redactedContent": base64}.
type reasoningContent struct {
	ReasoningText   *reasoningText `json:"reasoningText"`
	RedactedContent *string        `json:"redactedContent"`
}

// completion translates a Converse answer into a chat.completion.
func (e *endpoint) completion(raw []byte, jsonMode bool) (*oai.ChatCompletion, error) {
	var a converseAnswer
	if err := json.Unmarshal(raw, &a); err != nil {
		return nil, malformed("%v", err)
	}
	var usage *oai.Usage
	if a.Usage != nil {
		if !jsonscan.NonNegative(a.Usage.Fields()) {
			return nil, malformed("usage: a token count is not a count")
		}
		u := a.Usage.OpenAI()
		usage = &u
	}
	var (
		text, thoughts strings.Builder
		thinking       []thinkingBlock
		calls          []oai.ToolCall
		jsonArgs       *string
	)
	if msg := a.Output.Message; msg != nil {
		for _, b := range msg.Content {
			if b.Text != nil {
				text.WriteString(*b.Text)
			}
			if b.ToolUse != nil {
				c, err := b.ToolUse.call()
				if err != nil {
					return nil, malformed("%v", err)
				}
				if jsonMode && c.Function.Name == ResponseFormatTool && jsonArgs == nil {
					jsonArgs = &c.Function.Arguments
				} else {
					calls = append(calls, c)
				}
			}
			if r := b.ReasoningContent; r != nil {
				tb := r.block()
				thoughts.WriteString(tb.Thinking)
				thinking = append(thinking, tb)
			}
		}
	}
	m := oai.AnswerMessage{Role: oai.RoleAssistant, ToolCalls: calls, ReasoningContent: thoughts.String()}
	content := text.String()
	finish := finishReason(a.StopReason)
	if jsonArgs != nil {
		// The response format's tool call is the answer itself.
		content = *jsonArgs
		if len(calls) == 0 && finish == oai.FinishToolCalls {
			finish = oai.FinishStop
		}
	}
	if content != "" || len(calls) == 0 {
		m.Content = &content
	}
	if thinking != nil {
		var err error
		if m.ThinkingBlocks, err = json.Marshal(thinking); err != nil {
			return nil, fmt.Errorf("bedrock: encode thinking blocks: %w", err)
		}
	}
	return &oai.ChatCompletion{
		ID: oai.NewChatID(), Object: oai.ObjectChatCompletion, Created: time.Now().Unix(), Model: e.model,
		Choices: []oai.ChatChoice{{Message: m, FinishReason: finish}},
		Usage:   usage,
	}, nil
}

// call is the toolUse block as an OpenAI tool call, its input as the JSON
// text of the arguments ({} when it has none).
func (u *toolUse) call() (oai.ToolCall, error) {
	c := oai.ToolCall{ID: u.ToolUseID, Type: "function"}
	c.Function.Name = u.Name
	var err error
	c.Function.Arguments, err = compactInput(u.Input)
	return c, err
}

// compactInput is a toolUse input as the compact JSON text of a tool
// call's arguments: {} when absent or null.
func compactInput(input []byte) (string, error) {
	if len(input) == 0 || string(input) == "null" {
		return "{}", nil
	}
	var b bytes.Buffer
	if err := json.Compact(&b, input); err != nil {
		return "", fmt.Errorf("toolUse input: %w", err)
	}
	return b.String(), nil
}

// block is the reasoning block in thinking_blocks' shape.
func (r *reasoningContent) block() thinkingBlock {
	var tb thinkingBlock
	if t := r.ReasoningText; t != nil {
		tb = thinkingBlock{Type: "thinking", Thinking: t.Text, Signature: t.Signature}
	}
	if r.RedactedContent != nil {
		tb = thinkingBlock{Type: "redacted_thinking", Data: *r.RedactedContent}
	}
	return tb
}
