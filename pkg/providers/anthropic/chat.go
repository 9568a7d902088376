package anthropic

import (
	"context"
	"fmt"
	"net/http"
	"strings"

	"github.com/sluice-gateway/sluice/pkg/config"
	"github.com/sluice-gateway/sluice/pkg/models"
	"github.com/sluice-gateway/sluice/pkg/oai"
	"github.com/sluice-gateway/sluice/pkg/providers"
)

// Provider opens anthropic/ deployments.
type Provider struct {
	client *http.Client
}

// New returns the provider, calling out through client.
func New(client *http.Client) *Provider { return &Provider{client: client} }

var (
	_ models.Chatter   = (*endpoint)(nil)
	_ models.Messenger = (*endpoint)(nil)
)

// Open resolves the deployment's credential (Key) and builds its
// Messages URL: {api_base}/v1/messages, or api_base itself when it already
// ends so (LiteLLM accepts both).
func (p *Provider) Open(ctx context.Context, d config.Deployment, resolve models.Resolver) (models.Endpoint, error) {
	cred, model, err := resolve.OpenKey(ctx, Key, d)
	if err != nil {
		return nil, err
	}
	url := cred.APIBase
	if !strings.HasSuffix(url, "/v1/messages") {
		url += "/v1/messages"
	}
	e := &endpoint{
		client: p.client, cred: cred, target: providers.NewTarget(url),
		opts:   Options{Provider: Name, Model: model, Drop: providers.NewDropParams(Name, d)},
		header: http.Header{"Content-Type": {"application/json"}, "Anthropic-Version": {APIVersion}, "Accept": {"application/json"}},
	}
	cred.Authorize(e.header)
	e.streamHeader = e.header.Clone()
	e.streamHeader.Set("Accept", "text/event-stream")
	return e, nil
}

type endpoint struct {
	client *http.Client
	cred   Credential
	target providers.Target // the Messages URL, parsed at Open
	opts   Options
	// A native Messages call's headers when the client asks for
	// APIVersion and no beta (its answer JSON, or an event stream):
	// shared by the calls, so never modified after Open.
	header, streamHeader http.Header
}

func (e *endpoint) APIBase() string { return e.cred.APIBase }

// Chat sends the request translated (NewCall) to POST /v1/messages and
// translates the answer, or the event stream, back.
func (e *endpoint) Chat(ctx context.Context, req *oai.ChatRequest) (*models.Answer, error) {
	call, err := NewCall(req, e.opts)
	if err != nil {
		return nil, err
	}
	// Send sets this call's headers, so it gets a map of its own.
	h := http.Header{"Anthropic-Version": {APIVersion}}
	e.cred.Authorize(h)
	hreq, err := e.target.Post(ctx, h, call.Body)
	if err != nil {
		return nil, fmt.Errorf("anthropic: build the request: %w", err)
	}
	return call.Send(e.client, hreq, req.Stream)
}

// Send sends the call's request — built with Body, its credential on its
// headers — and translates the answer, or the event stream, back.
func (c *Call) Send(client *http.Client, hreq *http.Request, stream bool) (*models.Answer, error) {
	h := hreq.Header
	h.Set("Content-Type", "application/json")
	if stream {
		h.Set("Accept", "text/event-stream")
		ans, err := providers.RelayStream(client, c.provider, hreq)
		if err != nil {
			return nil, err
		}
		return c.Stream(ans.Body), nil
	}
	h.Set("Accept", "application/json")
	resp, err := providers.Do(client, c.provider, hreq)
	if err != nil {
		return nil, err
	}
	return c.Answer(resp.Body)
}
