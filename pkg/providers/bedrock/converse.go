package bedrock

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"strings"
	"time"

	"github.com/sluice-gateway/sluice/pkg/api"
	"github.com/sluice-gateway/sluice/pkg/jsonscan"
	"github.com/sluice-gateway/sluice/pkg/models"
	"github.com/sluice-gateway/sluice/pkg/oai"
	"github.com/sluice-gateway/sluice/pkg/providers"
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
		resp, err := e.send(ctx, e.converseURL, body, "application/json")
		if err != nil {
			return nil, err
		}
		raw, err := readAnswer(resp)
		if err != nil {
			return nil, err
		}
		cc, err := e.completion(raw, t.jsonMode)
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

// send posts a Converse body to url, SigV4-signed over its exact bytes. An
// answer other than 2xx is a *models.ProviderError read from Bedrock's
// error shape.
func (e *endpoint) send(ctx context.Context, url string, body []byte, accept string) (*http.Response, error) {
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
	resp, err := providers.Send(e.client, hreq)
	if err != nil {
		return nil, fmt.Errorf("bedrock %s: %w", hreq.URL.Path, err)
	}
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		return nil, readError(resp)
	}
	return resp, nil
}

// readError reads Bedrock's error answer, {"message": …} with the
// exception's name in X-Amzn-Errortype ("ThrottlingException:http://…"),
// which becomes the error's Code. A quota exceeded (400 on the wire) is a
// 429 to the router: another deployment, or later, may serve.
func readError(resp *http.Response) *models.ProviderError {
	kind, _, _ := strings.Cut(resp.Header.Get("X-Amzn-Errortype"), ":")
	pe := models.ReadProviderError(Name, resp)
	if kind != "" {
		pe.Code = kind
	}
	if kind == "ServiceQuotaExceededException" {
		pe.Status = http.StatusTooManyRequests
	}
	return pe
}

// readAnswer reads a Converse answer whole (it is translated), within
// providers.MaxAnswerBytes.
func readAnswer(resp *http.Response) ([]byte, error) {
	defer resp.Body.Close()
	if mt, _, _ := mime.ParseMediaType(resp.Header.Get("Content-Type")); mt != "" && mt != "application/json" {
		return nil, &models.ProviderError{Provider: Name, Status: resp.StatusCode,
			Message: fmt.Sprintf("answered Converse with Content-Type %q, not JSON", mt)}
	}
	body, err := io.ReadAll(io.LimitReader(resp.Body, providers.MaxAnswerBytes+1))
	if err != nil {
		return nil, fmt.Errorf("bedrock %s: read the answer: %w", resp.Request.URL.Path, err)
	}
	if len(body) > providers.MaxAnswerBytes {
		return nil, malformed("the answer is over %d bytes", providers.MaxAnswerBytes)
	}
	return body, nil
}

// malformed is an answer sluice cannot read: the router reports it as the
// provider's unexpected answer.
func malformed(format string, args ...any) *models.ProviderError {
	return &models.ProviderError{Provider: Name, Status: http.StatusOK, Message: "unreadable Converse answer: " + fmt.Sprintf(format, args...)}
}

// finishReason maps Converse's stopReason to OpenAI's finish_reason.
func finishReason(stop string) string {
	switch stop {
	case "max_tokens", "model_context_window_exceeded":
		return oai.FinishLength
	case "tool_use":
		return oai.FinishToolCalls
	case "guardrail_intervened", "content_filtered":
		return oai.FinishContentFilter
	}
	return oai.FinishStop // end_turn, stop_sequence, and what else may come
}

// parseUsage reads Converse's TokenUsage (ConverseUsage.OpenAI).
func parseUsage(raw []byte) (oai.Usage, error) {
	var u ConverseUsage
	if !u.Decode(raw) || !jsonscan.NonNegative(u.Fields()) {
		return oai.Usage{}, errors.New("usage: a token count is not a count")
	}
	return u.OpenAI(), nil
}

// thinkingBlock is a reasoning block in LiteLLM's thinking_blocks shape,
// which a client sends back on its next turn.
type thinkingBlock struct {
	Type      string `json:"type"` // "thinking" or "redacted_thinking"
	Thinking  string `json:"thinking,omitempty"`
	Signature string `json:"signature,omitempty"`
	Data      string `json:"data,omitempty"`
}

// completion translates a Converse answer into a chat.completion.
func (e *endpoint) completion(raw []byte, jsonMode bool) (*oai.ChatCompletion, error) {
	var (
		msg      []byte
		stop     string
		usage    *oai.Usage
		text     strings.Builder
		thoughts strings.Builder
		thinking []thinkingBlock
		calls    []oai.ToolCall
		jsonArgs *string
	)
	err := jsonscan.Members(raw, func(name, v []byte) error {
		switch string(name) {
		case "output":
			return jsonscan.Members(v, func(name, v []byte) error {
				if string(name) == "message" {
					msg = v
				}
				return nil
			})
		case "stopReason":
			s, err := jsonscan.String(v)
			stop = s
			return err
		case "usage":
			if jsonscan.Null(v) {
				return nil
			}
			u, err := parseUsage(v)
			usage = &u
			return err
		}
		return nil
	})
	if err == nil && !jsonscan.Null(msg) {
		err = jsonscan.Members(msg, func(name, v []byte) error {
			if string(name) != "content" || jsonscan.Null(v) {
				return nil
			}
			return jsonscan.Elements(v, func(b []byte) error {
				return jsonscan.Members(b, func(name, v []byte) error {
					switch string(name) {
					case "text":
						s, err := jsonscan.String(v)
						text.WriteString(s)
						return err
					case "toolUse":
						c, err := toolCall(v)
						if err != nil {
							return err
						}
						if jsonMode && c.Function.Name == ResponseFormatTool && jsonArgs == nil {
							jsonArgs = &c.Function.Arguments
							return nil
						}
						calls = append(calls, c)
					case "reasoningContent":
						tb, err := reasoning(v)
						if err != nil {
							return err
						}
						thoughts.WriteString(tb.Thinking)
						thinking = append(thinking, tb)
					}
					return nil
				})
			})
		})
	}
	if err != nil {
		return nil, malformed("%v", err)
	}
	m := oai.AnswerMessage{Role: oai.RoleAssistant, ToolCalls: calls, ReasoningContent: thoughts.String()}
	content := text.String()
	finish := finishReason(stop)
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

// toolCall reads a toolUse block ({toolUseId, name, input}) as an OpenAI
// tool call, its input as the JSON text of the arguments.
func toolCall(v []byte) (oai.ToolCall, error) {
	c := oai.ToolCall{Type: "function"}
	var input []byte
	err := jsonscan.Members(v, func(name, v []byte) error {
		var err error
		switch string(name) {
		case "toolUseId":
			c.ID, err = jsonscan.String(v)
		case "name":
			c.Function.Name, err = jsonscan.String(v)
		case "input":
			input = v
		}
		return err
	})
	if err != nil {
		return c, fmt.Errorf("toolUse: %w", err)
	}
	if jsonscan.Null(input) {
		c.Function.Arguments = "{}"
		return c, nil
	}
	var b bytes.Buffer
	if err := json.Compact(&b, input); err != nil {
		return c, fmt.Errorf("toolUse input: %w", err)
	}
	c.Function.Arguments = b.String()
	return c, nil
}

// reasoning reads a reasoningContent block: {"reasoningText": {"text",
// "signature"}} or {"redactedContent": base64}.
func reasoning(v []byte) (thinkingBlock, error) {
	var tb thinkingBlock
	err := jsonscan.Members(v, func(name, v []byte) error {
		var err error
		switch string(name) {
		case "reasoningText":
			tb.Type = "thinking"
			err = jsonscan.Members(v, func(name, v []byte) error {
				var err error
				switch string(name) {
				case "text":
					tb.Thinking, err = jsonscan.String(v)
				case "signature":
					tb.Signature, err = jsonscan.String(v)
				}
				return err
			})
		case "redactedContent":
			tb.Type = "redacted_thinking"
			tb.Data, err = jsonscan.String(v)
		}
		return err
	})
	if err != nil {
		return tb, fmt.Errorf("reasoningContent: %w", err)
	}
	return tb, nil
}
