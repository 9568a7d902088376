package gemini

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"time"

	"github.com/sluice-gateway/sluice/pkg/models"
	"github.com/sluice-gateway/sluice/pkg/oai"
	"github.com/sluice-gateway/sluice/pkg/providers"
	"github.com/sluice-gateway/sluice/pkg/sse"
)

var _ models.Chatter = (*ChatEndpoint)(nil)

// ChatEndpoint serves chat completions on one Gemini model through
// generateContent (streamGenerateContent?alt=sse for a stream): the Gemini
// API's models, and Vertex AI's (pkg/providers/vertex), which take the same
// body and answer alike.
type ChatEndpoint struct {
	// Provider names the provider in errors ("gemini", "vertex_ai").
	Provider string
	// Model is the provider's model name: the answers' model, and what
	// picks the thinking configuration.
	Model string
	// URL is the model's resource URL; the method (":generateContent", …)
	// is appended to it.
	URL     string
	Dialect Dialect
	Drop    providers.DropParams
	Client  *http.Client
	// Authorize puts the call's credential on its headers.
	Authorize func(ctx context.Context, h http.Header) error
}

// Chat translates req into a generateContent call and its answer (or
// stream) back into OpenAI's shape. An answer other than 2xx is a
// *models.ProviderError read from Google's error body.
func (e *ChatEndpoint) Chat(ctx context.Context, req *oai.ChatRequest) (*models.Answer, error) {
	greq, err := buildRequest(req, e.Model, e.Dialect, e.Drop)
	if err != nil {
		return nil, err
	}
	url := e.URL + ":generateContent"
	if req.Stream {
		url = e.URL + ":streamGenerateContent?alt=sse"
	}
	hreq, _, err := providers.NewRequest(ctx, e.Provider, url, greq)
	if err != nil {
		return nil, err
	}
	if req.Stream {
		hreq.Header.Set("Accept", "text/event-stream")
	}
	if err := e.Authorize(ctx, hreq.Header); err != nil {
		return nil, err
	}
	if req.Stream {
		a, err := providers.RelayStreamWith(e.Client, e.Provider, hreq, ReadError)
		if err != nil {
			return nil, err
		}
		w := oai.NewChunkWriter(oai.NewChatID(), e.Model, time.Now().Unix())
		a.Body = oai.NewSSEStream(a.Body, sse.Limits{}, newStreamer(w, req.N))
		return a, nil
	}
	resp, err := providers.DoWith(e.Client, e.Provider, hreq, ReadError)
	if err != nil {
		return nil, err
	}
	cc, err := translateAnswer(resp.Body, e.Model, req.N)
	if err != nil {
		return nil, &models.ProviderError{Provider: e.Provider, Status: resp.Status, Message: "unreadable answer: " + err.Error()}
	}
	out, err := encodeAnswer(cc)
	if err != nil {
		return nil, fmt.Errorf("%s: encode the answer: %w", e.Provider, err)
	}
	return models.Translated(out, cc.Usage, cc.Choices[0].FinishReason), nil
}

// maxErrorBody bounds how much of an error answer is read.
const maxErrorBody = 64 << 10

// ReadError reads and closes an answer other than 2xx from a Google API:
// {"error":{"code","message","status","details"}} (an array of one such
// object from the streaming method). Code is Google's status
// (INVALID_ARGUMENT, RESOURCE_EXHAUSTED, …); RESOURCE_EXHAUSTED is a 429
// (retried, with backoff); a refused API key — which the Gemini API answers
// with a 400 — is a 401: the gateway's credential, not the client's
// request.
func ReadError(provider string, resp *http.Response) *models.ProviderError {
	body, _ := io.ReadAll(io.LimitReader(resp.Body, maxErrorBody))
	resp.Body.Close()
	resp.Body = io.NopCloser(bytes.NewReader(body))
	pe := models.ReadProviderError(provider, resp)
	type googleError struct {
		Error struct {
			Message string `json:"message"`
			Status  string `json:"status"`
			Details []struct {
				Reason string `json:"reason"`
			} `json:"details"`
		} `json:"error"`
	}
	var g googleError
	if trimmed := bytes.TrimSpace(body); len(trimmed) > 0 && trimmed[0] == '[' {
		var list []googleError
		if json.Unmarshal(trimmed, &list) == nil && len(list) > 0 {
			g = list[0]
		}
	} else {
		json.Unmarshal(body, &g)
	}
	if g.Error.Message != "" {
		pe.Message = truncate(g.Error.Message, 1000)
	}
	if g.Error.Status != "" {
		pe.Code = g.Error.Status
	}
	switch {
	case g.Error.Status == "RESOURCE_EXHAUSTED":
		pe.Status = http.StatusTooManyRequests
	case pe.Status == http.StatusBadRequest && hasReason(g.Error.Details, "API_KEY_INVALID"):
		pe.Status = http.StatusUnauthorized
	default:
		refusedKey(pe)
	}
	return pe
}

func hasReason(details []struct {
	Reason string `json:"reason"`
}, reason string) bool {
	for _, d := range details {
		if d.Reason == reason {
			return true
		}
	}
	return false
}
