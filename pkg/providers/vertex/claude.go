package vertex

import (
	"bytes"
	"context"
	"fmt"
	"net/http"
	"net/url"
	"strings"

	"github.com/sluice-gateway/sluice/pkg/models"
	"github.com/sluice-gateway/sluice/pkg/oai"
	"github.com/sluice-gateway/sluice/pkg/providers/anthropic"
)

// Claude models on Vertex AI take Anthropic's Messages body with Vertex's
// anthropic_version (vertex-2023-10-16) and no model, sent with the
// deployment's Google access token to its publisher-model path,
//
//	POST {base}/v1/projects/{project}/locations/{location}/publishers/anthropic/models/{model}:rawPredict
//
// (:streamRawPredict for a stream, whose events are Anthropic's).

// claudeModel is the deployment's Claude model as its path names it.
func (e *endpoint) claudeModel() string {
	return strings.TrimPrefix(e.model, "publishers/anthropic/models/")
}

// claudeRequest is the rawPredict (streamRawPredict) call carrying body,
// with the deployment's access token.
func (e *endpoint) claudeRequest(ctx context.Context, body []byte, stream bool) (*http.Request, error) {
	method := ":rawPredict"
	if stream {
		method = ":streamRawPredict"
	}
	u := e.base + "/v1/projects/" + url.PathEscape(e.project) + "/locations/" + url.PathEscape(e.location) +
		"/publishers/anthropic/models/" + url.PathEscape(e.claudeModel()) + method
	hreq, err := http.NewRequestWithContext(ctx, http.MethodPost, u, bytes.NewReader(body))
	if err != nil {
		return nil, fmt.Errorf("vertex_ai: build the request: %w", err)
	}
	if err := e.authorize(ctx, hreq.Header); err != nil {
		return nil, err
	}
	return hreq, nil
}

// claudeChat serves a chat completion on a Claude model: the request
// translated as for Anthropic's API (anthropic.NewCall) but with Vertex's
// body, and the answer translated back as Anthropic's.
func (e *endpoint) claudeChat(ctx context.Context, req *oai.ChatRequest) (*models.Answer, error) {
	call, err := anthropic.NewCall(req, anthropic.Options{Provider: Name, Model: e.claudeModel(), Version: anthropic.VertexVersion, Drop: e.drop})
	if err != nil {
		return nil, err
	}
	hreq, err := e.claudeRequest(ctx, call.Body, req.Stream)
	if err != nil {
		return nil, err
	}
	return call.Send(e.client, hreq, req.Stream)
}

// Messages serves a Messages call natively when the deployment's model is
// Claude: the client's body with Vertex's anthropic_version and no model;
// the anthropic-beta header is passed on. A Gemini model is not served
// natively (false): the router translates the call for its Chat.
func (e *endpoint) Messages(ctx context.Context, req *models.MessagesRequest) (*models.Answer, bool, error) {
	if !isClaude(e.model) {
		return nil, false, nil
	}
	body, err := anthropic.MessagesBody(req.Body, "", nil,
		[2]string{"anthropic_version", `"` + anthropic.VertexVersion + `"`}, [2]string{"stream", fmt.Sprint(req.Stream)})
	if err != nil {
		return nil, true, err
	}
	hreq, err := e.claudeRequest(ctx, body, req.Stream)
	if err != nil {
		return nil, true, err
	}
	hreq.Header.Set("Content-Type", "application/json")
	if req.Beta != "" {
		hreq.Header.Set("Anthropic-Beta", req.Beta)
	}
	ans, err := anthropic.SendMessages(e.client, Name, hreq, req.Stream)
	return ans, true, err
}
