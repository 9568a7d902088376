package vertex

import (
	"context"
	"errors"
	"fmt"

	"github.com/sluice-gateway/sluice/pkg/models"
	"github.com/sluice-gateway/sluice/pkg/providers/google"
)

// ErrNoCredentials is Resolve's error when no service-account credential is
// configured anywhere.
var ErrNoCredentials = errors.New("vertex_ai: no credentials configured")

// Settings are a Vertex AI credential as configured (a deployment's, or the
// /vertex-ai passthrough's); each may be a secretsmanager/ reference.
type Settings struct {
	// Credentials is a service-account (or authorized-user) JSON, or a path
	// to one.
	Credentials string
	Project     string
	Location    string
}

// Env names the environment variables each setting falls back to, in
// order: LiteLLM reads different ones for model calls and for the
// passthrough.
type Env struct {
	Credentials, Project, Location []string
}

// ModelEnv is the fallbacks of vertex_ai/ deployments.
func ModelEnv() Env {
	return Env{
		Credentials: []string{"VERTEXAI_CREDENTIALS", "GOOGLE_APPLICATION_CREDENTIALS"},
		Project:     []string{"VERTEXAI_PROJECT"},
		Location:    []string{"VERTEXAI_LOCATION"},
	}
}

// PassthroughEnv is the fallbacks of the /vertex-ai passthrough.
func PassthroughEnv() Env {
	return Env{
		Credentials: []string{"DEFAULT_GOOGLE_APPLICATION_CREDENTIALS", "GOOGLE_APPLICATION_CREDENTIALS"},
		Project:     []string{"DEFAULT_VERTEXAI_PROJECT"},
		Location:    []string{"DEFAULT_VERTEXAI_LOCATION"},
	}
}

// TokenSources returns the token source of a credential (a cache may hand
// out one per service account).
type TokenSources func(creds string) (*google.TokenSource, error)

// Credential is a resolved Vertex AI credential.
type Credential struct {
	Tokens *google.TokenSource
	// Project is the default project: the configured one, else the
	// credential's project_id; "" when neither names one.
	Project string
	// Location is the default location (google.DefaultVertexLocation when
	// none is configured).
	Location string
}

// Resolve resolves s — the one place model calls and the passthrough get a
// Vertex AI credential — each setting falling back to env's variables: the
// credential (none is ErrNoCredentials) and its token source, the project
// (else the credential's) and the location. A credential, project or
// location that cannot be used is a *models.SettingError naming it, never
// its content.
func Resolve(ctx context.Context, s Settings, env Env, resolve models.Resolver, tokens TokenSources) (Credential, error) {
	creds, err := resolve.Setting(ctx, s.Credentials, env.Credentials...)
	if err != nil {
		return Credential{}, fmt.Errorf("vertex_ai: resolve vertex_credentials: %w", err)
	}
	if creds == "" {
		return Credential{}, ErrNoCredentials
	}
	c := Credential{}
	if c.Tokens, err = tokens(creds); err != nil {
		return Credential{}, models.BadSetting("unusable credentials: %v", err)
	}
	if c.Project, err = resolve.Setting(ctx, s.Project, env.Project...); err != nil {
		return Credential{}, fmt.Errorf("vertex_ai: resolve vertex_project: %w", err)
	}
	if c.Project == "" {
		c.Project = c.Tokens.ProjectID()
	}
	if c.Project != "" && !google.ValidProject(c.Project) {
		return Credential{}, models.BadSetting("vertex_project %q is not a Google Cloud project id", c.Project)
	}
	if c.Location, err = resolve.Setting(ctx, s.Location, env.Location...); err != nil {
		return Credential{}, fmt.Errorf("vertex_ai: resolve vertex_location: %w", err)
	}
	if c.Location == "" {
		c.Location = google.DefaultVertexLocation
	}
	if !google.ValidLocation(c.Location) {
		return Credential{}, models.BadSetting("vertex_location %q is not a Vertex AI location", c.Location)
	}
	return c, nil
}
