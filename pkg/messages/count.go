package messages

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
	"strings"

	"github.com/sluice-gateway/sluice/pkg/api"
	"github.com/sluice-gateway/sluice/pkg/auth"
	"github.com/sluice-gateway/sluice/pkg/oai"
	"github.com/sluice-gateway/sluice/pkg/tokenizer"
)

// CountTokens is POST /v1/messages/count_tokens: the request checked as a
// Messages request (max_tokens may be left out), the model one p may use,
// and the prompt's tokens counted. A model whose every deployment is an
// OpenAI model of o200k_base (GPT-4o, GPT-4.1, GPT-5, the o-series) is
// counted with that tokenizer, over what the translated chat request
// carries; the rest — Claude, Gemini, OpenAI's older models, whose
// tokenizers do not ship offline — is estimated, and marked so.
func (s *Service) CountTokens(ctx context.Context, p auth.Principal, body []byte) (*TokenCount, error) {
	parsed, err := parseCount(body)
	if err != nil {
		return nil, err
	}
	if !p.AllowsModel(parsed.Model) {
		return nil, api.Forbidden("This key may not use model '%s'.", parsed.Model)
	}
	if !s.router.Has(parsed.Model) {
		return nil, api.ModelNotFound(parsed.Model)
	}
	if s.encodingOf(parsed.Model) == tokenizer.O200kBase {
		n, estimated, err := CountChat(&parsed.Request, s.o200k)
		if err == nil {
			return &TokenCount{InputTokens: n, Estimated: estimated}, nil
		}
		// The ranks ship in the binary: this is a broken build, which the
		// estimate answers around.
		slog.ErrorContext(ctx, "count_tokens: the tokenizer failed; estimating", "model", parsed.Model, "error", err)
	}
	return &TokenCount{InputTokens: Estimate(&parsed.Request), Estimated: true}, nil
}

// encodingOf is the tokenizer every deployment of the model group has (by
// its model_info.base_model, else its model), "" when they have none or
// differ.
func (s *Service) encodingOf(group string) string {
	enc, found := "", false
	for _, d := range s.router.Deployments() {
		if d.ModelName != group {
			continue
		}
		model := d.Params.Model
		if base, ok := d.ModelInfo.Extra["base_model"].(string); ok && base != "" {
			model = base
		}
		e := tokenizer.EncodingOf(model)
		if found && e != enc {
			return ""
		}
		enc, found = e, true
	}
	return enc
}

// parseCount parses a count_tokens body: a Messages request without
// max_tokens.
func parseCount(body []byte) (*Parsed, error) {
	var top map[string]json.RawMessage
	if json.Unmarshal(body, &top) == nil && top != nil && top["max_tokens"] == nil {
		top["max_tokens"] = json.RawMessage("1")
		if _, ok := top["thinking"]; ok {
			top["max_tokens"] = json.RawMessage("1000000")
		}
		b, err := json.Marshal(top)
		if err != nil {
			return nil, fmt.Errorf("messages: re-encode the request: %w", err)
		}
		body = b
	}
	return Parse(body)
}

// imageTokens stands in for an image's tokens: Anthropic's count for an
// image at its largest size before it is scaled down (about 1.15 megapixels
// / 750).
const imageTokens = 1600

// Estimate estimates a request's input tokens: its texts, tool
// definitions, tool inputs and results at oai.EstimateTokens' 4 bytes a
// token, each image and document at imageTokens.
func Estimate(r *Request) int64 {
	var n int64
	for _, b := range r.System.Blocks {
		n += oai.EstimateTokens(b.Text)
	}
	var blocks func([]Block)
	blocks = func(bs []Block) {
		for i := range bs {
			b := &bs[i]
			switch b.Type {
			case BlockImage, BlockDocument:
				n += imageTokens
			default:
				n += oai.EstimateTokens(b.Text) + oai.EstimateTokens(b.Thinking) + oai.EstimateTokens(string(b.Input)) + oai.EstimateTokens(b.Name)
			}
			if b.Content != nil {
				blocks(b.Content.Blocks)
			}
		}
	}
	for i := range r.Messages {
		n += 3 // the turn's framing
		blocks(r.Messages[i].Content.Blocks)
	}
	for _, t := range r.Tools {
		n += oai.EstimateTokens(t.Name) + oai.EstimateTokens(t.Description) + oai.EstimateTokens(string(t.InputSchema))
	}
	return n
}

// Chat framing as OpenAI counts it (openai-cookbook, "How to count tokens
// with tiktoken", for gpt-4o and later): each message costs 3 tokens and
// its role's, and the answer is primed with 3.
const (
	chatPerMessage = 3
	chatPriming    = 3
)

// CountChat counts r's input tokens with enc as the chat request the
// translation makes of it (ChatBody) carries them: the system prompt as one
// message (its texts joined by newlines), an assistant turn as one message
// (its texts joined, its tool calls; thinking blocks, which only Anthropic
// takes back, dropped), a user turn as its tool results' tool messages and
// one message of the rest, OpenAI's framing of each message.
//
// The count is OpenAI's exactly for text alone. estimated is true when r
// holds what OpenAI counts by rules of its own that are not published
// exactly: tool definitions, tool calls and results (their texts are
// counted, not the way OpenAI lays them out), images and documents
// (imageTokens each), and a user turn of several parts.
func CountChat(r *Request, enc *tokenizer.Encoding) (n int64, estimated bool, err error) {
	count := func(text string) {
		if err != nil {
			return
		}
		var c int
		c, err = enc.Count(text)
		n += int64(c)
	}
	message := func(role string) {
		n += chatPerMessage
		count(role)
	}
	if len(r.System.Blocks) > 0 {
		texts := make([]string, 0, len(r.System.Blocks))
		for _, b := range r.System.Blocks {
			texts = append(texts, b.Text)
		}
		message("system")
		count(strings.Join(texts, "\n"))
	}
	for i := range r.Messages {
		m := &r.Messages[i]
		if m.Role == "assistant" {
			message("assistant")
			for _, b := range m.Content.Blocks {
				switch b.Type {
				case BlockText:
					count(b.Text)
				case BlockToolUse:
					count(b.Name)
					count(string(b.Input))
					estimated = true
				}
			}
			continue
		}
		parts := 0
		for _, b := range m.Content.Blocks {
			switch b.Type {
			case BlockToolResult:
				message("tool")
				estimated = true
				if b.IsError && !hasText(b.Content) {
					count("Error") // what the translation sends for a bare error
				}
				if b.Content == nil {
					continue
				}
				for _, in := range b.Content.Blocks {
					if in.Type == BlockText {
						count(in.Text)
					} else { // an image or document, in the user message
						parts++
						n += imageTokens
					}
				}
			case BlockImage, BlockDocument:
				parts++
				n += imageTokens
				estimated = true
			default:
				parts++
				count(b.Text)
			}
		}
		if parts > 0 {
			message("user")
		}
		if parts > 1 {
			estimated = true
		}
	}
	for _, t := range r.Tools {
		count(t.Name)
		count(t.Description)
		count(string(t.InputSchema))
		estimated = true
	}
	return n + chatPriming, estimated, err
}

// hasText reports whether c holds a text block.
func hasText(c *Content) bool {
	if c != nil {
		for _, b := range c.Blocks {
			if b.Type == BlockText && b.Text != "" {
				return true
			}
		}
	}
	return false
}

// CountHandler is the HTTP handler of count_tokens.
func (s *Service) CountHandler(jsonLimit int64) func(w http.ResponseWriter, r *http.Request) error {
	return func(w http.ResponseWriter, r *http.Request) error {
		body, err := api.ReadBody(w, r, jsonLimit)
		if err != nil {
			return err
		}
		n, err := s.CountTokens(r.Context(), auth.FromContext(r.Context()), body)
		if err != nil {
			return err
		}
		api.WriteJSON(w, http.StatusOK, n)
		return nil
	}
}
