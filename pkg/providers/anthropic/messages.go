package anthropic

import (
	"context"
	"fmt"
	"net/http"

	"github.com/sluice-gateway/sluice/pkg/api"
	"github.com/sluice-gateway/sluice/pkg/jsonscan"
	"github.com/sluice-gateway/sluice/pkg/models"
	"github.com/sluice-gateway/sluice/pkg/providers"
)

// sluiceMembers are a Messages body's members that are sluice's (LiteLLM's)
// and never reach Anthropic.
var sluiceMembers = []string{"mock_response", "drop_params"}

// MessagesBody is a client's Messages body as a native deployment sends
// it: model set to model (left out when ""), sluice's own members and those
// named in drop removed, and the members of add appended (raw JSON values).
// The other members are copied as they came.
func MessagesBody(body []byte, model string, drop []string, add ...[2]string) ([]byte, error) {
	out := make([]byte, 0, len(body)+len(model)+64)
	out = append(out, '{')
	first := true
	member := func(name string, value []byte) {
		if !first {
			out = append(out, ',')
		}
		first = false
		out = jsonscan.AppendString(out, name)
		out = append(out, ':')
		out = append(out, value...)
	}
	if model != "" {
		member("model", jsonscan.AppendString(nil, model))
	}
	err := jsonscan.Members(body, func(name, value []byte) error {
		n := string(name)
		if n == "model" || contains(sluiceMembers, n) || contains(drop, n) {
			return nil
		}
		for _, a := range add {
			if a[0] == n {
				return nil
			}
		}
		member(n, value)
		return nil
	})
	if err != nil {
		return nil, api.InvalidJSON("The request body is not a JSON object.")
	}
	for _, a := range add {
		member(a[0], []byte(a[1]))
	}
	return append(out, '}'), nil
}

func contains(list []string, s string) bool {
	for _, v := range list {
		if v == s {
			return true
		}
	}
	return false
}

// Messages sends the client's Messages body to POST /v1/messages with the
// deployment's model and key, and its anthropic-version (else APIVersion)
// and anthropic-beta headers; the answer (a message, or its event stream)
// comes back as Anthropic wrote it. A body that already names the
// deployment's model, and nothing of sluice's, goes as it came.
func (e *endpoint) Messages(ctx context.Context, req *models.MessagesRequest) (*models.Answer, bool, error) {
	body := req.Body
	if !req.AsIs || req.Model != e.opts.Model {
		var err error
		if body, err = MessagesBody(req.Body, e.opts.Model, nil); err != nil {
			return nil, true, err
		}
	}
	hreq, err := e.target.Post(ctx, e.messagesHeader(req), body)
	if err != nil {
		return nil, true, fmt.Errorf("anthropic: build the request: %w", err)
	}
	ans, err := relayMessages(e.client, Name, hreq, req.Stream)
	return ans, true, err
}

// messagesHeader is a native call's headers: the shared ones of Open when
// the client asks for APIVersion (or no version) and no beta, as most do;
// else a copy with the client's version and beta set.
func (e *endpoint) messagesHeader(req *models.MessagesRequest) http.Header {
	h := e.header
	if req.Stream {
		h = e.streamHeader
	}
	if (req.Version == "" || req.Version == APIVersion) && req.Beta == "" {
		return h
	}
	h = h.Clone()
	if req.Version != "" {
		h.Set("Anthropic-Version", req.Version)
	}
	if req.Beta != "" {
		h.Set("Anthropic-Beta", req.Beta)
	}
	return h
}

// SendMessages sends a native Messages call and relays its answer: an
// event stream when stream, else the JSON message.
func SendMessages(client *http.Client, provider string, hreq *http.Request, stream bool) (*models.Answer, error) {
	if stream {
		hreq.Header.Set("Accept", "text/event-stream")
	} else {
		hreq.Header.Set("Accept", "application/json")
	}
	return relayMessages(client, provider, hreq, stream)
}

// relayMessages is SendMessages of a request whose headers are already
// complete (and may be shared: it writes none).
func relayMessages(client *http.Client, provider string, hreq *http.Request, stream bool) (*models.Answer, error) {
	if stream {
		return providers.RelayStream(client, provider, hreq)
	}
	return providers.Relay(client, provider, hreq)
}
