package providers

import (
	"errors"
	"testing"

	"github.com/sluice-gateway/sluice/pkg/api"
	"github.com/sluice-gateway/sluice/pkg/config"
	"github.com/sluice-gateway/sluice/pkg/oai"
)

func TestDropParams(t *testing.T) {
	parse := func(body string) *oai.ChatRequest {
		r, err := oai.ParseChatRequest([]byte(body))
		if err != nil {
			t.Fatal(err)
		}
		return r
	}
	deployment := func(yaml string) config.Deployment {
		cfg, err := config.Parse([]byte(yaml), func(string) string { return "" })
		if err != nil {
			t.Fatal(err)
		}
		return cfg.ModelList[0]
	}
	plain := parse(`{"model":"claude","messages":[{"role":"user","content":"hi"}],"logit_bias":{"1":1}}`)
	asked := parse(`{"model":"claude","messages":[{"role":"user","content":"hi"}],"logit_bias":{"1":1},"drop_params":true}`)
	for _, tc := range []struct {
		name    string
		yaml    string
		req     *oai.ChatRequest
		refuses bool
	}{
		{"nothing says drop", "model_list:\n  - model_name: claude\n    litellm_params: {model: anthropic/claude-x}\n", plain, true},
		{"the deployment drops", "model_list:\n  - model_name: claude\n    litellm_params: {model: anthropic/claude-x, drop_params: true}\n", plain, false},
		{"litellm_settings drops", "model_list:\n  - model_name: claude\n    litellm_params: {model: anthropic/claude-x}\nlitellm_settings: {drop_params: true}\n", plain, false},
		{"the deployment overrides litellm_settings", "model_list:\n  - model_name: claude\n    litellm_params: {model: anthropic/claude-x, drop_params: false}\nlitellm_settings: {drop_params: true}\n", plain, true},
		{"the request drops", "model_list:\n  - model_name: claude\n    litellm_params: {model: anthropic/claude-x}\n", asked, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := NewDropParams("anthropic", deployment(tc.yaml))
			err := p.Check(tc.req, tc.req.OthersExcept()...)
			var ae *api.Error
			switch {
			case !tc.refuses && err != nil:
				t.Errorf("refused: %v", err)
			case tc.refuses && (!errors.As(err, &ae) || ae.Status != 400 || ae.Param != "logit_bias" || ae.Code != "unsupported_parameter"):
				t.Errorf("error %v, want a 400 naming logit_bias", err)
			}
			if p.Drops(tc.req) == tc.refuses {
				t.Errorf("Drops = %v", p.Drops(tc.req))
			}
			if err := p.Check(tc.req); err != nil {
				t.Errorf("nothing unsupported, still refused: %v", err)
			}
		})
	}
}
