package anthropic

import (
	"context"
	"errors"
	"net/http"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func identity(_ context.Context, v string) (string, error) { return v, nil }

func env(m map[string]string) func(string) string { return func(k string) string { return m[k] } }

func TestResolve(t *testing.T) {
	for _, tc := range []struct {
		name string
		s    Settings
		env  map[string]string
		want Credential
	}{
		{"configured", Settings{APIKey: " sk-ant-conf ", APIBase: "https://proxy.internal/anthropic/"}, map[string]string{KeyEnv: "sk-env"},
			Credential{APIKey: "sk-ant-conf", APIBase: "https://proxy.internal/anthropic"}},
		{"environment", Settings{}, map[string]string{KeyEnv: "sk-env", BaseEnv: "http://127.0.0.1:9"},
			Credential{APIKey: "sk-env", APIBase: "http://127.0.0.1:9"}},
		{"default base", Settings{APIKey: "k"}, nil, Credential{APIKey: "k", APIBase: DefaultAPIBase}},
	} {
		got, err := Resolve(context.Background(), tc.s, identity, env(tc.env))
		if err != nil {
			t.Errorf("%s: %v", tc.name, err)
			continue
		}
		if diff := cmp.Diff(tc.want, got); diff != "" {
			t.Errorf("%s (-want +got):\n%s", tc.name, diff)
		}
	}
}

func TestResolveRefuses(t *testing.T) {
	if _, err := Resolve(context.Background(), Settings{}, identity, env(nil)); !errors.Is(err, ErrNoKey) {
		t.Errorf("no key: %v", err)
	}
	_, err := Resolve(context.Background(), Settings{APIKey: "sk-secret", APIBase: "ftp://x"}, identity, env(nil))
	if err == nil || strings.Contains(err.Error(), "sk-secret") {
		t.Errorf("bad base: %v", err)
	}
	failing := func(context.Context, string) (string, error) { return "", errors.New("secrets manager down") }
	if _, err := Resolve(context.Background(), Settings{APIKey: "secretsmanager/k"}, failing, env(nil)); err == nil || errors.Is(err, ErrNoKey) {
		t.Errorf("secret store down: %v", err)
	}
}

func TestAuthorize(t *testing.T) {
	h := http.Header{}
	Credential{APIKey: "sk-ant"}.Authorize(h)
	if h.Get("X-Api-Key") != "sk-ant" || len(h) != 1 {
		t.Errorf("%v", h)
	}
}
