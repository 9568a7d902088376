package vertex

import (
	"bytes"
	"context"
	"fmt"
	"net/http"
	"net/url"
	"strings"

	"github.com/sluice-gateway/sluice/pkg/api"
	"github.com/sluice-gateway/sluice/pkg/models"
	"github.com/sluice-gateway/sluice/pkg/oai"
	"github.com/sluice-gateway/sluice/pkg/providers/anthropic"
)

// claudeChat serves a Claude model: the request translated as for
// Anthropic's API (anthropic.NewCall) but with Vertex's body —
// anthropic_version vertex-2023-10-16, no model — sent with the
// deployment's Google access token to its publisher-model path,
//
//	POST {base}/v1/projects/{project}/locations/{location}/publishers/anthropic/models/{model}:rawPredict
//
// (:streamRawPredict for a stream, whose events are Anthropic's), and the
// answer translated back as Anthropic's.
func (e *endpoint) claudeChat(ctx context.Context, req *oai.ChatRequest) (*models.Answer, error) {
	model := strings.TrimPrefix(e.model, "publishers/anthropic/models/")
	call, err := anthropic.NewCall(req, anthropic.Options{Provider: Name, Model: model, Version: anthropic.VertexVersion, Drop: e.drop})
	if err != nil {
		return nil, err
	}
	method := ":rawPredict"
	if req.Stream {
		method = ":streamRawPredict"
	}
	u := e.base + "/v1/projects/" + url.PathEscape(e.project) + "/locations/" + url.PathEscape(e.location) +
		"/publishers/anthropic/models/" + url.PathEscape(model) + method
	hreq, err := http.NewRequestWithContext(ctx, http.MethodPost, u, bytes.NewReader(call.Body))
	if err != nil {
		return nil, fmt.Errorf("vertex_ai: build the request: %w", err)
	}
	token, err := e.tokens.AccessToken(ctx)
	if err != nil {
		if ctx.Err() != nil {
			return nil, fmt.Errorf("vertex_ai: %w", err)
		}
		return nil, api.Upstream(err, "The gateway could not get a Google access token for Vertex AI model '%s' from its service account's token endpoint.", e.model)
	}
	hreq.Header.Set("Authorization", "Bearer "+token)
	return call.Send(e.client, hreq, req.Stream)
}
