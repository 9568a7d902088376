package models

import (
	"context"
	"errors"
	"net/http"
	"net/url"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func envOf(m map[string]string) func(string) string { return func(k string) string { return m[k] } }

func TestResolverSetting(t *testing.T) {
	r := Resolver{
		Secret: func(_ context.Context, v string) (string, error) {
			if v == "secretsmanager/broken" {
				return "", errors.New("unreadable")
			}
			return v, nil
		},
		Getenv: envOf(map[string]string{"B": " from-b ", "C": "from-c"}),
	}
	ctx := context.Background()
	for _, tc := range []struct {
		value string
		envs  []string
		want  string
	}{
		{" configured ", []string{"B"}, "configured"},
		{"", []string{"A", "B", "C"}, "from-b"},
		{"", []string{"C"}, "from-c"},
		{"  ", []string{"A"}, ""},
		{"", nil, ""},
	} {
		got, err := r.Setting(ctx, tc.value, tc.envs...)
		if err != nil || got != tc.want {
			t.Errorf("Setting(%q, %v) = %q, %v; want %q", tc.value, tc.envs, got, err, tc.want)
		}
	}
	if _, err := r.Setting(ctx, "secretsmanager/broken", "B"); err == nil {
		t.Error("an unreadable secret fell back to the environment")
	}
	if got, err := (Resolver{}).Setting(ctx, "", "B"); got != "" || err != nil {
		t.Errorf("the zero Resolver read an environment: %q, %v", got, err)
	}
}

var testSpec = KeySpec{Vendor: "v", KeyEnv: []string{"V_KEY", "V_KEY2"}, BaseEnv: []string{"V_BASE"},
	DefaultBase: "https://api.v.example", Header: "X-Api-Key"}

func TestResolverKey(t *testing.T) {
	compat := KeySpec{Vendor: "c", KeyEnv: []string{"C_KEY"}, DefaultBase: "https://api.c.example/v1",
		Header: "Authorization", Scheme: "Bearer ", OwnBaseOwnKey: true}
	for _, tc := range []struct {
		name          string
		spec          KeySpec
		key, base     string
		env           map[string]string
		wantKey, want string
	}{
		{"configured", testSpec, " sk-conf ", "https://proxy.internal/v/", map[string]string{"V_KEY": "sk-env"}, "sk-conf", "https://proxy.internal/v"},
		{"environment", testSpec, "", "", map[string]string{"V_KEY2": "sk-env", "V_BASE": "http://127.0.0.1:9"}, "sk-env", "http://127.0.0.1:9"},
		{"default base", testSpec, "k", "", nil, "k", "https://api.v.example"},
		{"own base, no key", compat, "", "http://127.0.0.1:8000/v1", map[string]string{"C_KEY": "sk-env"}, "", "http://127.0.0.1:8000/v1"},
		{"vendor's base, environment key", compat, "", "", map[string]string{"C_KEY": "sk-env"}, "sk-env", "https://api.c.example/v1"},
	} {
		got, err := Resolver{Getenv: envOf(tc.env)}.Key(context.Background(), tc.spec, tc.key, tc.base)
		if err != nil {
			t.Errorf("%s: %v", tc.name, err)
			continue
		}
		if diff := cmp.Diff([2]string{tc.wantKey, tc.want}, [2]string{got.APIKey, got.APIBase}); diff != "" {
			t.Errorf("%s (-want +got):\n%s", tc.name, diff)
		}
	}
}

func TestResolverKeyRefuses(t *testing.T) {
	ctx := context.Background()
	if _, err := (Resolver{}).Key(ctx, testSpec, "", ""); !errors.Is(err, ErrNoKey) {
		t.Errorf("no key: %v", err)
	}
	if _, err := (Resolver{}).Key(ctx, KeySpec{Vendor: "v"}, "k", ""); !errors.Is(err, ErrNoBase) {
		t.Errorf("no base: %v", err)
	}
	_, err := (Resolver{}).Key(ctx, testSpec, "sk-secret", "ftp://x")
	if !IsBadSetting(err) || strings.Contains(err.Error(), "sk-secret") {
		t.Errorf("bad base: %v", err)
	}
	failing := Resolver{Secret: func(context.Context, string) (string, error) { return "", errors.New("secrets manager down") }}
	if _, err := failing.Key(ctx, testSpec, "secretsmanager/k", ""); err == nil || errors.Is(err, ErrNoKey) {
		t.Errorf("secret store down: %v", err)
	}
}

func TestKeyAuthorize(t *testing.T) {
	h := http.Header{}
	k, _ := Resolver{}.Key(context.Background(), KeySpec{Vendor: "c", DefaultBase: "https://x", Header: "Authorization", Scheme: "Bearer "}, "sk", "")
	k.Authorize(h)
	if diff := cmp.Diff(http.Header{"Authorization": {"Bearer sk"}}, h); diff != "" {
		t.Error(diff)
	}
	q, _ := Resolver{}.Key(context.Background(), KeySpec{Vendor: "q", DefaultBase: "https://x", Query: "key"}, "sk", "")
	u, _ := url.Parse("https://x/v1/models?alt=sse")
	q.AuthorizeURL(u)
	q.Authorize(h)
	if u.RawQuery != "alt=sse&key=sk" || len(h) != 1 {
		t.Errorf("query key: %q, %v", u.RawQuery, h)
	}
}

func TestCheckBase(t *testing.T) {
	for in, want := range map[string]string{
		"https://bedrock-runtime.us-east-1.amazonaws.com/": "https://bedrock-runtime.us-east-1.amazonaws.com",
		"http://127.0.0.1:9000":                            "http://127.0.0.1:9000",
		" https://proxy.internal/prefix/ ":                 "https://proxy.internal/prefix",
	} {
		if got, err := CheckBase(in); err != nil || got != want {
			t.Errorf("CheckBase(%q) = %q, %v", in, got, err)
		}
	}
	for _, bad := range []string{"", "ftp://x", "https://", "https://u:p@host", "https://host/?a=1", "https://host/#f", "::"} {
		if _, err := CheckBase(bad); err == nil {
			t.Errorf("CheckBase(%q) accepted", bad)
		}
	}
}
