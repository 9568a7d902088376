package vertex

import (
	"context"
	"errors"
	"testing"

	"github.com/sluice-gateway/sluice/pkg/models"
	"github.com/sluice-gateway/sluice/pkg/providers/embedbatch/embedtest"
	"github.com/sluice-gateway/sluice/pkg/providers/google"
	"github.com/sluice-gateway/sluice/pkg/providers/google/googletest"
)

func TestResolveFallsBackToItsEnvironment(t *testing.T) {
	creds := googletest.NewTokenServer(t).ServiceAccountJSON("sa-project")
	tokens := func(c string) (*google.TokenSource, error) { return google.NewTokenSource(c, google.Options{}) }
	env := map[string]string{
		"GOOGLE_APPLICATION_CREDENTIALS": creds,
		"VERTEXAI_PROJECT":               "model-project", "VERTEXAI_LOCATION": "europe-west4",
		"DEFAULT_VERTEXAI_PROJECT": "pt-project", "DEFAULT_VERTEXAI_LOCATION": "us",
	}
	getenv := func(k string) string { return env[k] }
	for _, tc := range []struct {
		name              string
		s                 Settings
		env               Env
		project, location string
	}{
		{"model calls", Settings{}, ModelEnv(), "model-project", "europe-west4"},
		{"passthrough", Settings{}, PassthroughEnv(), "pt-project", "us"},
		{"configured wins", Settings{Project: "conf", Location: "global"}, PassthroughEnv(), "conf", "global"},
		{"the credential's project last", Settings{}, Env{Credentials: []string{"GOOGLE_APPLICATION_CREDENTIALS"}}, "sa-project", google.DefaultVertexLocation},
	} {
		c, err := Resolve(context.Background(), tc.s, tc.env, models.Resolver{Getenv: getenv}, tokens)
		if err != nil {
			t.Errorf("%s: %v", tc.name, err)
			continue
		}
		if c.Project != tc.project || c.Location != tc.location || c.Tokens == nil {
			t.Errorf("%s: %+v", tc.name, c)
		}
	}
}

func TestResolveRefuses(t *testing.T) {
	creds := googletest.NewTokenServer(t).ServiceAccountJSON("sa-project")
	tokens := func(c string) (*google.TokenSource, error) { return google.NewTokenSource(c, google.Options{}) }
	if _, err := Resolve(context.Background(), Settings{}, ModelEnv(), embedtest.NoSecrets, tokens); !errors.Is(err, ErrNoCredentials) {
		t.Errorf("nothing configured: %v", err)
	}
	for _, s := range []Settings{
		{Credentials: `{"type":"external_account"}`},
		{Credentials: creds, Location: "us-central1.evil.com"},
		{Credentials: creds, Project: "a/b"},
	} {
		if _, err := Resolve(context.Background(), s, ModelEnv(), embedtest.NoSecrets, tokens); !models.IsBadSetting(err) {
			t.Errorf("%+v: %v, want a setting error", s.Location+s.Project, err)
		}
	}
}
