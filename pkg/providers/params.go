package providers

import (
	"net/http"
	"strings"

	"github.com/sluice-gateway/sluice/pkg/api"
	"github.com/sluice-gateway/sluice/pkg/config"
	"github.com/sluice-gateway/sluice/pkg/oai"
)

// DropParams is what a translating provider does with request parameters it
// cannot honour: refuse the request with a 400 naming the parameter, or,
// when LiteLLM's drop_params says so (the request's own, else the
// deployment's litellm_params, else litellm_settings), drop them. A
// translator builds one per deployment at Open and asks it per request.
type DropParams struct {
	provider string
	model    string // the model_name, as the client knows it
	drop     bool
}

// NewDropParams returns the deployment d's policy; provider names the
// provider in messages ("anthropic").
func NewDropParams(provider string, d config.Deployment) DropParams {
	return DropParams{provider: provider, model: d.ModelName, drop: d.Params.Drops()}
}

// Check returns nil when unsupported is empty or the parameters are to be
// dropped (the translator then leaves them out); otherwise a 400
// (unsupported_parameter) naming the first of them.
func (p DropParams) Check(req *oai.ChatRequest, unsupported ...string) error {
	if len(unsupported) == 0 || p.drop || req.DropParams {
		return nil
	}
	name := unsupported[0]
	msg := "Unsupported parameter: '" + name + "' is not supported by model '" + p.model + "' (provider " + p.provider + ")."
	if len(unsupported) > 1 {
		msg += " Neither are: '" + strings.Join(unsupported[1:], "', '") + "'."
	}
	msg += " Remove it, or set drop_params: true (in the request, in the deployment's litellm_params, or in litellm_settings) to drop it."
	return &api.Error{Status: http.StatusBadRequest, Type: api.TypeInvalidRequest, Code: "unsupported_parameter", Param: name, Message: msg}
}

// Drops reports whether parameters the provider cannot honour are dropped
// for req.
func (p DropParams) Drops(req *oai.ChatRequest) bool { return p.drop || req.DropParams }
