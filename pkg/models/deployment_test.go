package models

import (
	"context"
	"errors"
	"testing"

	"github.com/sluice-gateway/sluice/pkg/api"
	"github.com/sluice-gateway/sluice/pkg/config"
)

func TestOpenKeyResolvesTheKeyAndTheModel(t *testing.T) {
	spec := testSpec
	spec.Model = ModelForm{What: "V model", Form: "v/<model>", Trim: "models/"}
	r := Resolver{Getenv: envOf(map[string]string{"V_KEY2": "sk-env"})}
	for _, tc := range []struct{ model, want string }{
		{"v/m1", "m1"},
		{"v/models/m1", "m1"}, // the prefix the vendor's paths add, repeated
		{"v/org/m1", "org/m1"},
	} {
		k, model, err := r.OpenKey(context.Background(), spec, config.Deployment{ModelName: "x", Params: config.Params{Model: tc.model}})
		if err != nil || model != tc.want || k.APIKey != "sk-env" || k.APIBase != "https://api.v.example" {
			t.Errorf("OpenKey(%q) = %+v, %q, %v; want sk-env at the default base, %q", tc.model, k, model, err, tc.want)
		}
	}
}

func TestOpenKeyWithoutAModelFormTakesTheModelAsItIs(t *testing.T) {
	_, model, err := Resolver{}.OpenKey(context.Background(), testSpec, config.Deployment{ModelName: "x", Params: config.Params{Model: "v/", APIKey: "k"}})
	if err != nil || model != "" {
		t.Errorf("OpenKey = %q, %v; want no model and no error", model, err)
	}
}

func TestOpenKeyIsA503SayingWhatToSet(t *testing.T) {
	spec := testSpec
	spec.Model = ModelForm{What: "V model", Form: "v/<model>", Trim: "models/"}
	for _, tc := range []struct {
		name   string
		params config.Params
		want   string
	}{
		{"no key", config.Params{Model: "v/m"}, "Model 'x' (provider v) has no api_key configured: set litellm_params.api_key, or V_KEY."},
		{"no model", config.Params{Model: "v/", APIKey: "k"}, "Model 'x' names no V model: litellm_params.model must be v/<model>."},
		{"only the trimmed prefix", config.Params{Model: "v/models/", APIKey: "k"}, "Model 'x' names no V model: litellm_params.model must be v/<model>."},
		{"the key before the model", config.Params{Model: "v/"}, "Model 'x' (provider v) has no api_key configured: set litellm_params.api_key, or V_KEY."},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, _, err := Resolver{}.OpenKey(context.Background(), spec, config.Deployment{ModelName: "x", Params: tc.params})
			var ae *api.Error
			if !errors.As(err, &ae) || ae.Status != 503 || ae.Message != tc.want {
				t.Errorf("OpenKey = %v; want the 503 %q", err, tc.want)
			}
		})
	}
}

func TestOpenKeyPassesASecretStoreFailureThrough(t *testing.T) {
	down := errors.New("secret store down")
	r := Resolver{Secret: func(context.Context, string) (string, error) { return "", down }}
	_, _, err := r.OpenKey(context.Background(), testSpec, config.Deployment{ModelName: "x", Params: config.Params{Model: "v/m", APIKey: "secretsmanager/k"}})
	var ae *api.Error
	if !errors.Is(err, down) || errors.As(err, &ae) {
		t.Errorf("OpenKey = %v; want the store's error, not a 503", err)
	}
}
