package models

import (
	"context"

	"github.com/sluice-gateway/sluice/pkg/auth"
	"github.com/sluice-gateway/sluice/pkg/oai"
)

// Messenger is an Endpoint that serves Anthropic's Messages API natively
// (Anthropic's API, Claude on Vertex AI): it sends the client's Messages
// body with its own model and credentials, and its Answer is Anthropic's —
// a message, or for a stream Anthropic's event stream. Errors as for Embed.
type Messenger interface {
	// Messages reports false when this deployment's model is not one it
	// serves natively (a Gemini model on Vertex AI): the call then goes
	// through the chat seam.
	Messages(ctx context.Context, req *MessagesRequest) (ans *Answer, native bool, err error)
}

// MessagesRequest is a Messages call as the router carries it: the body for
// native deployments, the chat translation for the rest.
type MessagesRequest struct {
	// Model is the model group the client named.
	Model string
	// Body is the client's Messages body; Stream its stream member.
	Body   []byte
	Stream bool
	// Version and Beta are the client's anthropic-version and
	// anthropic-beta headers, passed on to Anthropic's API.
	Version, Beta string
	// Chat translates the request for the chat seam, when a deployment
	// that is not native is tried (an error: only a native deployment can
	// serve the request).
	Chat func() (*oai.ChatRequest, error)
	// Mock: the request carries its own mock_response.
	Mock bool
	// AsIs: Body names the model once, Model, and has none of sluice's
	// own members: a native deployment whose model is Model sends it as it
	// came, not rebuilt.
	AsIs bool
}

// Messages routes a Messages call. A deployment that is a Messenger for its
// model answers in Anthropic's shape (native true); any other Chatter
// answers the chat translation in OpenAI's (native false). As for Embed, the
// Reply is never nil.
func (r *Router) Messages(ctx context.Context, p auth.Principal, req *MessagesRequest) (rep *Reply, native bool, err error) {
	rep, err = r.call(ctx, p, req.Model, "the Messages API", req.Mock, func(ctx context.Context, ep Endpoint) (*Answer, error) {
		native = false
		if m, ok := ep.(Messenger); ok {
			ans, served, err := m.Messages(ctx, req)
			if served {
				native = true
				return ans, err
			}
		}
		c, ok := ep.(Chatter)
		if !ok {
			return nil, errUnsupported
		}
		chat, err := req.Chat()
		if err != nil {
			return nil, err
		}
		return c.Chat(ctx, chat)
	})
	return rep, native, err
}
