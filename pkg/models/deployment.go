package models

import (
	"context"
	"strings"

	"github.com/sluice-gateway/sluice/pkg/api"
	"github.com/sluice-gateway/sluice/pkg/config"
)

// ModelForm is how a vendor's deployment names the model it calls, for the
// 503 of one that names none.
type ModelForm struct {
	// What is the model's noun in that 503: "Anthropic model", "Azure
	// deployment".
	What string
	// Form is litellm_params.model's form: "anthropic/<model>".
	Form string
	// Trim is a prefix the vendor's own paths add, taken off a model that
	// repeats it ("models/" for the Gemini API).
	Trim string
}

// Of is the model deployment d calls at its vendor: litellm_params.model
// after the provider prefix, less f.Trim. None is a 503 saying what to set.
func (f ModelForm) Of(d config.Deployment) (string, error) {
	m := strings.TrimPrefix(d.Params.ProviderModel(), f.Trim)
	if m == "" {
		return "", api.Unavailable("Model '%s' names no %s: litellm_params.model must be %s.", d.ModelName, f.What, f.Form)
	}
	return m, nil
}

// OpenKey resolves what the Open of every API-key vendor starts from, in
// one place: deployment d's credential by spec (Key: its api_key and
// api_base, else spec's environment names) and the model it calls (by
// spec.Model; litellm_params.model's as it is when spec names no form). A
// missing or unusable setting is the 503 that says what to set
// (KeySpec.Unavailable, ModelForm.Of); other errors (a secret store down)
// pass through for the router to report.
func (r Resolver) OpenKey(ctx context.Context, spec KeySpec, d config.Deployment) (Key, string, error) {
	k, err := r.Key(ctx, spec, d.Params.APIKey, d.Params.APIBase)
	if err != nil {
		return Key{}, "", spec.Unavailable(d.ModelName, err)
	}
	if spec.Model == (ModelForm{}) {
		return k, d.Params.ProviderModel(), nil
	}
	model, err := spec.Model.Of(d)
	if err != nil {
		return Key{}, "", err
	}
	return k, model, nil
}
