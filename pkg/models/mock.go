package models

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"strings"
	"time"

	"github.com/sluice-gateway/sluice/pkg/config"
	"github.com/sluice-gateway/sluice/pkg/oai"
)

// mockEndpoint answers chat and embeddings calls from LiteLLM's
// mock_response instead of calling a provider: the deployment's, or the
// request's own, which wins. A text answers chat with itself and embeddings
// with vectors derived from each input; a vector answers embeddings with
// itself and serves no chat.
type mockEndpoint struct {
	model string       // the deployment's provider model, which the answer names
	mock  *config.Mock // the deployment's mock_response; nil: the request's
}

func (mockEndpoint) APIBase() string { return "" }

// mockPieces is how many pieces a mock stream's text comes in, at most.
const mockPieces = 4

// Chat builds the answer from the text, with estimated usage.
func (m mockEndpoint) Chat(_ context.Context, req *oai.ChatRequest) (*Answer, error) {
	var text string
	switch {
	case req.MockResponse != nil:
		text = *req.MockResponse
	case m.mock != nil && m.mock.Vector != nil:
		return nil, errUnsupported // an embedding vector is no chat answer
	case m.mock != nil:
		text = m.mock.Text
	}
	prompt := int64(0)
	for _, msg := range req.Messages() {
		prompt += oai.EstimateTokens(msg.Text())
	}
	completion := oai.EstimateTokens(text)
	usage := oai.Usage{PromptTokens: prompt, CompletionTokens: completion, TotalTokens: prompt + completion}
	id, created := oai.NewChatID(), time.Now().Unix()
	if !req.Stream {
		b, err := json.Marshal(oai.ChatCompletion{
			ID: id, Object: oai.ObjectChatCompletion, Created: created, Model: m.model,
			Choices: []oai.ChatChoice{{Message: oai.AnswerMessage{Role: oai.RoleAssistant, Content: &text}, FinishReason: oai.FinishStop}},
			Usage:   &usage,
		})
		if err != nil {
			return nil, err
		}
		return &Answer{Body: io.NopCloser(bytes.NewReader(b)), ContentLength: int64(len(b)), UsageEstimated: true}, nil
	}
	w := oai.NewChunkWriter(id, m.model, created)
	pieces := splitText(text, mockPieces)
	step := -1 // the role chunk, the pieces, then the end
	body := oai.NewChunkStream(func(dst []byte) ([]byte, error) {
		step++
		switch {
		case step == 0:
			return w.Role(dst, 0), nil
		case step <= len(pieces):
			return w.Choice(dst, &oai.ChunkChoice{Delta: oai.Delta{Content: pieces[step-1]}}), nil
		}
		dst = w.Finish(dst, 0, oai.FinishStop)
		dst = w.Usage(dst, &usage)
		return w.Done(dst), io.EOF
	}, nil)
	return &Answer{Body: body, ContentLength: -1, UsageEstimated: true}, nil
}

// splitText cuts s into at most n pieces of about equal length, at spaces
// where it can (a mock stream's deltas).
func splitText(s string, n int) []string {
	if s == "" {
		return nil
	}
	size := (len(s) + n - 1) / n
	var out []string
	for len(s) > 0 {
		if len(s) <= size || len(out) == n-1 {
			return append(out, s)
		}
		cut := strings.IndexByte(s[size:], ' ')
		if cut < 0 {
			return append(out, s)
		}
		cut += size + 1
		out = append(out, s[:cut])
		s = s[cut:]
	}
	return out
}
