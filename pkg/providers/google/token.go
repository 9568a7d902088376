// Package google holds what sluice needs to call Google Cloud APIs: OAuth2
// access tokens minted from a service-account key (or a gcloud user
// credential), cached until shortly before they expire. The Vertex AI
// passthrough and the Vertex AI providers share it.
package google

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"os"
	"strings"
	"sync"
	"time"

	"golang.org/x/oauth2"
	xgoogle "golang.org/x/oauth2/google"
)

// CloudPlatformScope is the OAuth2 scope Vertex AI calls need.
const CloudPlatformScope = "https://www.googleapis.com/auth/cloud-platform"

// Defaults of a TokenSource.
const (
	// DefaultRefreshMargin is how long before its expiry a token is replaced:
	// a request must never leave with a token that dies on the way.
	DefaultRefreshMargin = 5 * time.Minute
	// DefaultFetchTimeout bounds one call to the token endpoint.
	DefaultFetchTimeout = 30 * time.Second
)

// Credential types accepted in a credentials JSON. Other types
// (external_account and friends) can make the library read files, run
// commands or call arbitrary URLs, so they are refused.
const (
	typeServiceAccount = "service_account"
	typeAuthorizedUser = "authorized_user"
)

// ErrNoToken wraps every failure to obtain a token from the token endpoint.
var ErrNoToken = errors.New("google: no access token")

// Options tune a TokenSource.
type Options struct {
	// Scopes requested; default CloudPlatformScope.
	Scopes []string
	// HTTPClient calls the token endpoint; default http.DefaultClient.
	HTTPClient *http.Client
	// RefreshMargin: a token is replaced this long before it expires.
	RefreshMargin time.Duration
	// FetchTimeout bounds one call to the token endpoint.
	FetchTimeout time.Duration
	// Now is the clock (tests).
	Now func() time.Time
}

// TokenSource mints and caches access tokens for one credential. It is safe
// for concurrent use: concurrent callers share one fetch, and a caller whose
// context ends stops waiting without cancelling the fetch for the others.
type TokenSource struct {
	// newSource returns a fresh, non-caching token source bound to ctx.
	newSource func(ctx context.Context) oauth2.TokenSource
	projectID string
	email     string
	opts      Options

	mu        sync.Mutex
	token     *oauth2.Token
	refreshAt time.Time // when token is replaced; zero: never
	inflight  *fetch
}

type fetch struct {
	done  chan struct{}
	token *oauth2.Token
	err   error
}

// NewTokenSource builds a token source from credentials: either the JSON of a
// service-account key (or of a gcloud authorized_user credential), or the
// path of a file holding it. The service account's token_uri is honoured.
func NewTokenSource(credentials string, opts Options) (*TokenSource, error) {
	data, err := credentialsJSON(credentials)
	if err != nil {
		return nil, err
	}
	return newTokenSource(data, opts)
}

// credentialsJSON returns the JSON itself, or the contents of the file it names.
func credentialsJSON(credentials string) ([]byte, error) {
	c := strings.TrimSpace(credentials)
	if c == "" {
		return nil, errors.New("google credentials: empty")
	}
	if strings.HasPrefix(c, "{") {
		return []byte(c), nil
	}
	data, err := os.ReadFile(c)
	if err != nil {
		return nil, fmt.Errorf("google credentials: read %s: %w", c, err)
	}
	return data, nil
}

func newTokenSource(data []byte, opts Options) (*TokenSource, error) {
	if len(opts.Scopes) == 0 {
		opts.Scopes = []string{CloudPlatformScope}
	}
	if opts.HTTPClient == nil {
		opts.HTTPClient = http.DefaultClient
	}
	if opts.RefreshMargin <= 0 {
		opts.RefreshMargin = DefaultRefreshMargin
	}
	if opts.FetchTimeout <= 0 {
		opts.FetchTimeout = DefaultFetchTimeout
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	var head struct {
		Type         string `json:"type"`
		ProjectID    string `json:"project_id"`
		ClientEmail  string `json:"client_email"`
		ClientID     string `json:"client_id"`
		ClientSecret string `json:"client_secret"`
		RefreshToken string `json:"refresh_token"`
		TokenURI     string `json:"token_uri"`
		QuotaProject string `json:"quota_project_id"`
	}
	if err := json.Unmarshal(data, &head); err != nil {
		return nil, fmt.Errorf("google credentials: not JSON: %w", err)
	}
	ts := &TokenSource{projectID: head.ProjectID, email: head.ClientEmail, opts: opts}
	switch head.Type {
	case typeServiceAccount:
		cfg, err := xgoogle.JWTConfigFromJSON(data, opts.Scopes...)
		if err != nil {
			return nil, fmt.Errorf("google credentials: %w", err)
		}
		if cfg.Email == "" || len(cfg.PrivateKey) == 0 {
			return nil, errors.New("google credentials: a service account key needs client_email and private_key")
		}
		ts.newSource = cfg.TokenSource
	case typeAuthorizedUser:
		if head.ClientID == "" || head.ClientSecret == "" || head.RefreshToken == "" {
			return nil, errors.New("google credentials: an authorized_user credential needs client_id, client_secret and refresh_token")
		}
		endpoint := xgoogle.Endpoint
		if head.TokenURI != "" {
			endpoint.TokenURL = head.TokenURI
		}
		cfg := &oauth2.Config{ClientID: head.ClientID, ClientSecret: head.ClientSecret, Endpoint: endpoint, Scopes: opts.Scopes}
		refresh := &oauth2.Token{RefreshToken: head.RefreshToken}
		ts.newSource = func(ctx context.Context) oauth2.TokenSource { return cfg.TokenSource(ctx, refresh) }
		if ts.projectID == "" {
			ts.projectID = head.QuotaProject
		}
	default:
		return nil, fmt.Errorf("google credentials: type %q is not supported (want %s or %s)", head.Type, typeServiceAccount, typeAuthorizedUser)
	}
	return ts, nil
}

// ProjectID is the project named in the credentials, if any.
func (s *TokenSource) ProjectID() string { return s.projectID }

// Email is the service account's address, if any.
func (s *TokenSource) Email() string { return s.email }

// Token returns a valid access token, fetching a new one when the cached one
// is within the refresh margin of its expiry.
func (s *TokenSource) Token(ctx context.Context) (*oauth2.Token, error) {
	s.mu.Lock()
	if s.fresh() {
		t := s.token
		s.mu.Unlock()
		return t, nil
	}
	f := s.inflight
	if f == nil {
		f = &fetch{done: make(chan struct{})}
		s.inflight = f
		go s.fetch(f)
	}
	s.mu.Unlock()
	select {
	case <-f.done:
		return f.token, f.err
	case <-ctx.Done():
		return nil, fmt.Errorf("%w: %w", ErrNoToken, context.Cause(ctx))
	}
}

// AccessToken returns the access token string of Token.
func (s *TokenSource) AccessToken(ctx context.Context) (string, error) {
	t, err := s.Token(ctx)
	if err != nil {
		return "", err
	}
	return t.AccessToken, nil
}

// fresh reports whether the cached token may still be used. Call with s.mu held.
func (s *TokenSource) fresh() bool {
	return s.token != nil && (s.refreshAt.IsZero() || s.opts.Now().Before(s.refreshAt))
}

// refreshTime is when a token fetched now is replaced: the refresh margin
// before its expiry, or half-way through its life when that is shorter (a
// short-lived token must still be reused). A token without an expiry is
// trusted as is (some endpoints omit it).
func (s *TokenSource) refreshTime(t *oauth2.Token) time.Time {
	if t.Expiry.IsZero() {
		return time.Time{}
	}
	life := t.Expiry.Sub(s.opts.Now())
	return t.Expiry.Add(-min(s.opts.RefreshMargin, life/2))
}

// fetch runs one call to the token endpoint, on its own deadline: callers
// that give up do not cancel it for the others.
func (s *TokenSource) fetch(f *fetch) {
	ctx, cancel := context.WithTimeout(context.Background(), s.opts.FetchTimeout)
	defer cancel()
	ctx = context.WithValue(ctx, oauth2.HTTPClient, s.opts.HTTPClient)
	t, err := s.newSource(ctx).Token()
	if err == nil && (t == nil || t.AccessToken == "") {
		err = errors.New("the token endpoint answered without an access_token")
	}
	if err != nil {
		err = fmt.Errorf("%w: %w", ErrNoToken, err)
		t = nil
	}
	s.mu.Lock()
	if err == nil {
		s.token, s.refreshAt = t, s.refreshTime(t)
	}
	s.inflight = nil
	s.mu.Unlock()
	f.token, f.err = t, err
	close(f.done)
}
