package models

import (
	"context"
	"testing"

	"github.com/sluice-gateway/sluice/pkg/api"
)

// A provider that cannot honour a parameter answers a 400 of its own (an
// *api.Error): it goes back to the client as is, at once — no retry, no
// other deployment, no cooldown — as the provider's own 400 would; while a
// gateway-side failure (no token, no credential) moves on to the next
// deployment.
func TestProviderRefusalsFromTheGateway(t *testing.T) {
	h := newHarness(t, `
model_list:
  - {model_name: m, litellm_params: {model: fake/a}}
  - {model_name: m, litellm_params: {model: fake/b}}
  - {model_name: fb, litellm_params: {model: fake/fb}}
router_settings: {fallbacks: [{m: [fb]}]}
`, func(ctx context.Context, model string, n int) error {
		switch model {
		case "a", "b":
			return api.InvalidValue("dimensions", "Model 'm' does not take 'dimensions'.")
		}
		return nil
	})
	_, err := h.embed(t, admin, "m")
	e := wantAPIError(t, err, 400, "invalid_value")
	if e.Param != "dimensions" {
		t.Errorf("param %q", e.Param)
	}
	if calls := h.fake.callsTo("a") + h.fake.callsTo("b"); calls != 1 || h.fake.callsTo("fb") != 0 || len(h.sleeps) != 0 {
		t.Errorf("%d calls, %d to the fallback, %d sleeps: a refusal of the request must not be retried", calls, h.fake.callsTo("fb"), len(h.sleeps))
	}
	for _, d := range h.router.groups["m"].deployments {
		if d.health.cooling(h.now) {
			t.Errorf("deployment %s cooled down for the client's parameter", d.target.Model)
		}
	}

	h2 := newHarness(t, `
model_list:
  - {model_name: m, litellm_params: {model: fake/a}}
  - {model_name: m, litellm_params: {model: fake/b}}
`, func(ctx context.Context, model string, n int) error {
		if model == "a" {
			return api.Upstream(nil, "no Google access token")
		}
		return nil
	})
	for range 10 {
		if _, err := h2.embed(t, admin, "m"); err != nil {
			t.Fatalf("a deployment without a token should give way to the other: %v", err)
		}
	}
}
