package models

import (
	"context"
	"net/http"
	"testing"
	"time"

	"github.com/sluice-gateway/sluice/pkg/api"
	"github.com/sluice-gateway/sluice/pkg/config"
	"github.com/sluice-gateway/sluice/pkg/oai"
)

// benchProvider's endpoint answers every chat at once, so a benchmark
// measures the router's own work around the provider call.
type benchProvider struct{}

func (benchProvider) Open(context.Context, config.Deployment, Resolver) (Endpoint, error) {
	return benchEndpoint{}, nil
}

type benchEndpoint struct{}

func (benchEndpoint) APIBase() string { return "https://bench" }

func (benchEndpoint) Chat(ctx context.Context, req *oai.ChatRequest) (*Answer, error) {
	return &Answer{Body: http.NoBody, ContentLength: 0}, nil
}

// BenchmarkRouterChat routes one chat call to a group of two deployments,
// as a request does: its own cancellable context (net/http's, or a Lambda
// invocation's with its deadline), the per-attempt timeout, the answer
// closed:
// go test -run '^$' -bench RouterChat -benchmem ./pkg/models
func BenchmarkRouterChat(b *testing.B) {
	cfg, err := config.Parse([]byte(`model_list:
  - model_name: gpt-4o-mini
    litellm_params: {model: bench/a}
  - model_name: gpt-4o-mini
    litellm_params: {model: bench/b}
`), func(string) string { return "" })
	if err != nil {
		b.Fatal(err)
	}
	r, err := NewRouter(Options{Config: cfg, Limiter: &countingLimiter{used: map[string]int64{}}, Providers: map[string]Provider{"bench": benchProvider{}}})
	if err != nil {
		b.Fatal(err)
	}
	req, err := oai.ParseChatRequest([]byte(`{"model":"gpt-4o-mini","messages":[{"role":"user","content":"hi"}]}`))
	if err != nil {
		b.Fatal(err)
	}
	// local: the local process's request context, no deadline; lambda: a
	// Lambda invocation's, ending in ChatTimeout's default 600 s.
	for _, c := range []struct {
		name     string
		deadline time.Duration
	}{{"local", 0}, {"lambda", 600 * time.Second}} {
		b.Run(c.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				ctx, cancel := context.WithCancel(api.WithStart(context.Background(), time.Now()))
				if c.deadline > 0 {
					ctx, cancel = context.WithTimeout(api.WithStart(context.Background(), time.Now()), c.deadline)
				}
				rep, err := r.Chat(ctx, admin, req)
				if err != nil {
					b.Fatal(err)
				}
				rep.Answer.Body.Close()
				cancel()
			}
		})
	}
}
