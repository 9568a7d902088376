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
	"github.com/sluice-gateway/sluice/pkg/providers/anthropic"
)

// Messages serves a Messages call natively when the deployment's model is
// Claude: the client's body with Vertex's anthropic_version and no model,
// to rawPredict (streamRawPredict), with the Google access token; the
// anthropic-beta header is passed on. A Gemini model is not served
// natively (false): the router translates the call for its Chat.
func (e *endpoint) Messages(ctx context.Context, req *models.MessagesRequest) (*models.Answer, bool, error) {
	if !isClaude(e.model) {
		return nil, false, nil
	}
	model := strings.TrimPrefix(e.model, "publishers/anthropic/models/")
	body, err := anthropic.MessagesBody(req.Body, "", nil,
		[2]string{"anthropic_version", `"` + anthropic.VertexVersion + `"`}, [2]string{"stream", fmt.Sprint(req.Stream)})
	if err != nil {
		return nil, true, err
	}
	method := ":rawPredict"
	if req.Stream {
		method = ":streamRawPredict"
	}
	u := e.base + "/v1/projects/" + url.PathEscape(e.project) + "/locations/" + url.PathEscape(e.location) +
		"/publishers/anthropic/models/" + url.PathEscape(model) + method
	hreq, err := http.NewRequestWithContext(ctx, http.MethodPost, u, bytes.NewReader(body))
	if err != nil {
		return nil, true, fmt.Errorf("vertex_ai: build the request: %w", err)
	}
	token, err := e.tokens.AccessToken(ctx)
	if err != nil {
		if ctx.Err() != nil {
			return nil, true, fmt.Errorf("vertex_ai: %w", err)
		}
		return nil, true, api.Upstream(err, "The gateway could not get a Google access token for Vertex AI model '%s' from its service account's token endpoint.", e.model)
	}
	h := hreq.Header
	h.Set("Authorization", "Bearer "+token)
	h.Set("Content-Type", "application/json")
	if req.Beta != "" {
		h.Set("Anthropic-Beta", req.Beta)
	}
	ans, err := anthropic.SendMessages(e.client, Name, hreq, req.Stream)
	return ans, true, err
}
