package models

import (
	"context"
	"errors"
	"testing"
)

func TestResolverSetting(t *testing.T) {
	env := map[string]string{"B": " from-b ", "C": "from-c"}
	getenv := func(k string) string { return env[k] }
	var r Resolver = func(_ context.Context, v string) (string, error) {
		if v == "secretsmanager/broken" {
			return "", errors.New("unreadable")
		}
		return v, nil
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
		got, err := r.Setting(ctx, tc.value, getenv, tc.envs...)
		if err != nil || got != tc.want {
			t.Errorf("Setting(%q, %v) = %q, %v; want %q", tc.value, tc.envs, got, err, tc.want)
		}
	}
	if _, err := r.Setting(ctx, "secretsmanager/broken", getenv, "B"); err == nil {
		t.Error("an unreadable secret fell back to the environment")
	}
}
