package models

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strings"

	"github.com/sluice-gateway/sluice/pkg/api"
)

// Resolver is the one place a vendor's credential settings are resolved: a
// configured value through Secret (a secretsmanager/ reference), an empty
// one through the environment names the vendor declares (LiteLLM's). No
// provider package reads the environment itself. The zero Resolver takes
// values as they are and has no environment.
type Resolver struct {
	// Secret resolves a config value that may be a secretsmanager/
	// reference; nil: values are literal.
	Secret func(ctx context.Context, value string) (string, error)
	// Getenv reads the environment fallbacks (os.Getenv in main); nil: none.
	Getenv func(string) string
}

// Value resolves a configured value, trimmed.
func (r Resolver) Value(ctx context.Context, value string) (string, error) {
	if r.Secret != nil {
		v, err := r.Secret(ctx, value)
		if err != nil {
			return "", err
		}
		value = v
	}
	return strings.TrimSpace(value), nil
}

// Setting resolves a setting and, when it is empty, falls back to the first
// of envs set in the environment. The result is trimmed; "" means none
// anywhere.
func (r Resolver) Setting(ctx context.Context, value string, envs ...string) (string, error) {
	v, err := r.Value(ctx, value)
	if err != nil || v != "" {
		return v, err
	}
	return r.env(envs), nil
}

func (r Resolver) env(names []string) string {
	if r.Getenv == nil {
		return ""
	}
	for _, n := range names {
		if v := strings.TrimSpace(r.Getenv(n)); v != "" {
			return v
		}
	}
	return ""
}

// KeySpec declares a vendor's API-key credential as data: where the key and
// the base URL come from and how the key travels. Credentials that are not
// a key (Bedrock's SigV4, Vertex AI's service account) resolve their
// settings through the same Resolver in their own packages.
type KeySpec struct {
	Vendor string // for errors: "anthropic"
	// KeyEnv and BaseEnv are the environment fallbacks, in order.
	KeyEnv  []string
	BaseEnv []string
	// DefaultBase is the vendor's API; "" means api_base must be set.
	DefaultBase string
	// Header carries the key, after Scheme ("Bearer "); or, when Header is
	// empty, the query parameter Query does.
	Header, Scheme, Query string
	// BaseHint follows "set litellm_params.api_base" when none is set
	// (" to the resource endpoint, https://<resource>.openai.azure.com").
	BaseHint string
	// OwnBaseOwnKey: a deployment with its own api_base (an
	// OpenAI-compatible server) needs no key and never gets the
	// environment's, which is for the vendor's own API.
	OwnBaseOwnKey bool
	// Model is how a deployment names the vendor's model (OpenKey);
	// zero: a deployment may name none.
	Model ModelForm
}

// Errors of Resolver.Key.
var (
	ErrNoKey  = errors.New("no API key configured")
	ErrNoBase = errors.New("no api_base configured")
)

// Key is a resolved API-key credential.
type Key struct {
	APIKey string
	// APIBase is the base URL calls go to, without a trailing slash.
	APIBase string

	header, scheme, query string
}

// Authorize puts the key on an outgoing request's header (the only
// credential the vendor receives); a key travelling in the query is put
// there by AuthorizeURL.
func (k Key) Authorize(h http.Header) {
	if k.APIKey != "" && k.header != "" {
		h.Set(k.header, k.scheme+k.APIKey)
	}
}

// AuthorizeURL puts a key that travels in the query on u.
func (k Key) AuthorizeURL(u *url.URL) {
	if k.APIKey != "" && k.query != "" {
		q := u.Query()
		q.Set(k.query, k.APIKey)
		u.RawQuery = q.Encode()
	}
}

// Key resolves spec's credential from the configured api_key and api_base:
// each, else its environment fallbacks; the base, else spec.DefaultBase,
// checked by CheckBase. No key is ErrNoKey, no base ErrNoBase (both wrapped
// with the vendor's name). Errors name settings, never secret values.
func (r Resolver) Key(ctx context.Context, spec KeySpec, apiKey, apiBase string) (Key, error) {
	k := Key{header: spec.Header, scheme: spec.Scheme, query: spec.Query}
	base, err := r.Value(ctx, apiBase)
	if err != nil {
		return Key{}, fmt.Errorf("%s: resolve api_base: %w", spec.Vendor, err)
	}
	own := base != ""
	if !own {
		if base = r.env(spec.BaseEnv); base == "" {
			base = spec.DefaultBase
		}
	}
	if base == "" {
		return Key{}, fmt.Errorf("%s: %w", spec.Vendor, ErrNoBase)
	}
	if k.APIKey, err = r.Value(ctx, apiKey); err != nil {
		return Key{}, fmt.Errorf("%s: resolve api_key: %w", spec.Vendor, err)
	}
	keyless := own && spec.OwnBaseOwnKey
	if k.APIKey == "" && !keyless {
		k.APIKey = r.env(spec.KeyEnv)
	}
	if k.APIKey == "" && !keyless {
		return Key{}, fmt.Errorf("%s: %w", spec.Vendor, ErrNoKey)
	}
	if k.APIBase, err = CheckBase(base); err != nil {
		return Key{}, fmt.Errorf("%s: %w", spec.Vendor, err)
	}
	return k, nil
}

// CheckBase checks an api_base and returns it without a trailing slash. As
// in LiteLLM, it is the scheme and host that replace the provider's default
// endpoint; the provider's own paths follow it (a path in api_base, e.g. a
// proxy's prefix, is kept before them).
func CheckBase(raw string) (string, error) {
	s := strings.TrimRight(strings.TrimSpace(raw), "/")
	u, err := url.Parse(s)
	switch {
	case err != nil:
		return "", BadSetting("api_base is not a URL")
	case u.Scheme != "http" && u.Scheme != "https":
		return "", BadSetting("api_base must be an http:// or https:// URL")
	case u.Host == "":
		return "", BadSetting("api_base has no host")
	case u.User != nil:
		return "", BadSetting("api_base must not hold credentials")
	case u.RawQuery != "" || u.Fragment != "" || u.ForceQuery:
		return "", BadSetting("api_base must not have a query or fragment")
	}
	return s, nil
}

// SettingError is a configured setting that cannot be used (an api_base that
// is not a URL, a location that names none): the operator must fix it. Its
// message names the setting, never a secret value.
type SettingError struct{ msg string }

func (e *SettingError) Error() string { return e.msg }

// BadSetting makes a *SettingError.
func BadSetting(format string, args ...any) error {
	return &SettingError{msg: fmt.Sprintf(format, args...)}
}

// IsBadSetting reports whether err is (or wraps) a *SettingError.
func IsBadSetting(err error) bool {
	var se *SettingError
	return errors.As(err, &se)
}

// Unavailable turns Key's error for deployment model into the 503 a caller
// sees, saying what to configure; other errors (a secret store down) pass
// through for the router to report.
func (s KeySpec) Unavailable(model string, err error) error {
	var e *api.Error
	switch {
	case errors.Is(err, ErrNoKey):
		e = api.Unavailable("Model '%s' (provider %s) has no api_key configured: set litellm_params.api_key%s.", model, s.Vendor, orEnv(s.KeyEnv))
	case errors.Is(err, ErrNoBase):
		e = api.Unavailable("Model '%s' (provider %s) has no api_base configured: set litellm_params.api_base%s%s.", model, s.Vendor, s.BaseHint, orEnv(s.BaseEnv))
	case IsBadSetting(err):
		e = api.Unavailable("Model '%s' (provider %s) has an api_base that is not a usable http(s) URL: %v.", model, s.Vendor, errors.Unwrap(err))
	default:
		return err
	}
	e.Err = err
	return e
}

func orEnv(names []string) string {
	if len(names) == 0 {
		return ""
	}
	return ", or " + names[0]
}
