package callbacks

import (
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"slices"
	"strings"

	"github.com/sluice-gateway/sluice/pkg/config"
)

// Gateway-wide callbacks are LiteLLM's litellm_settings success_callback,
// failure_callback and callbacks: every team's events of that outcome go to
// them, with the credentials LiteLLM reads from its environment. The
// operator configures them, so unlike a team's they are trusted: their
// hosts are not held to the Guard, and GCS_PATH_SERVICE_ACCOUNT may name
// any file the process can read.

// gatewayEnv maps LiteLLM's environment variables to the callback_vars a
// team would set: one table per destination.
var gatewayEnv = map[string][]struct{ env, v string }{
	Langfuse: {
		{"LANGFUSE_PUBLIC_KEY", VarLangfusePublicKey},
		{"LANGFUSE_SECRET_KEY", VarLangfuseSecretKey},
		{"LANGFUSE_HOST", VarLangfuseHost},
	},
	LangSmith: {
		{"LANGSMITH_API_KEY", VarLangSmithAPIKey},
		{"LANGSMITH_PROJECT", VarLangSmithProject},
		{"LANGSMITH_BASE_URL", VarLangSmithBaseURL},
	},
	GCSBucket: {
		{"GCS_BUCKET_NAME", VarGCSBucketName},
		{"GCS_PATH_SERVICE_ACCOUNT", VarGCSServiceAccount},
	},
}

// gatewayLists are the litellm_settings lists and the type each makes.
var gatewayLists = []struct{ key, typ string }{
	{"success_callback", TypeSuccess}, {"failure_callback", TypeFailure}, {"callbacks", TypeSuccessAndFailure},
}

// GatewayCallbacks reads the gateway-wide callbacks of cfg. Each variable is
// read from cfg's environment_variables, else through getenv; a value may
// be a secretsmanager/ reference, resolved when the destination is first
// opened (Catalog's Resolve). A callback sluice knows but whose required
// variables are missing is an error naming them; names sluice does not
// deliver to (LiteLLM has many more) are logged and left out.
func GatewayCallbacks(cfg *config.Config, getenv func(string) string) ([]Callback, error) {
	if cfg == nil {
		return nil, nil
	}
	var out []Callback
	var errs []error
	for _, l := range gatewayLists {
		for _, name := range names(cfg.LiteLLMSettings[l.key]) {
			if _, ok := families[name]; !ok {
				slog.Warn("litellm_settings names a callback sluice does not deliver to; ignored", "setting", l.key, "callback", name)
				continue
			}
			if slices.ContainsFunc(out, func(c Callback) bool { return c.Name == name && c.Type == l.typ }) {
				continue
			}
			vars := map[string]string{}
			for _, e := range gatewayEnv[name] {
				v := cfg.EnvironmentVariables[e.env]
				if v == "" {
					v = getenv(e.env)
				}
				if v != "" {
					vars[e.v] = v
				}
			}
			if missing := missingVars(name, vars); len(missing) > 0 {
				errs = append(errs, fmt.Errorf("litellm_settings.%s names %s, but %s is not set (in environment_variables or the environment)",
					l.key, name, strings.Join(missing, " and ")))
				continue
			}
			out = append(out, Callback{Name: name, Type: l.typ, Vars: vars, Gateway: true})
		}
	}
	if err := errors.Join(errs...); err != nil {
		return nil, fmt.Errorf("gateway-wide logging callbacks: %w", err)
	}
	return out, nil
}

// missingVars lists the environment variables a gateway callback of name
// requires and vars lacks.
func missingVars(name string, vars map[string]string) []string {
	var missing []string
	for _, group := range families[name].required {
		if !slices.ContainsFunc(group, func(v string) bool { return vars[v] != "" }) {
			for _, e := range gatewayEnv[name] {
				if e.v == group[0] {
					missing = append(missing, e.env)
				}
			}
		}
	}
	return missing
}

// names reads a YAML list of strings (or one string).
func names(v any) []string {
	switch v := v.(type) {
	case string:
		return []string{v}
	case []any:
		var out []string
		for _, x := range v {
			if s, ok := x.(string); ok {
				out = append(out, s)
			}
		}
		return out
	}
	return nil
}

// GatewayServiceAccount returns the service-account key JSON of a gateway
// callback's GCS_PATH_SERVICE_ACCOUNT: the JSON itself, or the path of a
// file (the operator's: any path the process can read, as in LiteLLM).
func GatewayServiceAccount(value string) ([]byte, error) {
	v := strings.TrimSpace(value)
	data := []byte(v)
	if !strings.HasPrefix(v, "{") {
		f, err := os.Open(v)
		if err != nil {
			return nil, fmt.Errorf("GCS_PATH_SERVICE_ACCOUNT: %w", err)
		}
		defer f.Close()
		if data, err = io.ReadAll(io.LimitReader(f, maxServiceAccountBytes+1)); err != nil {
			return nil, fmt.Errorf("GCS_PATH_SERVICE_ACCOUNT: read %s: %w", v, err)
		}
	}
	if len(data) > maxServiceAccountBytes {
		return nil, fmt.Errorf("GCS_PATH_SERVICE_ACCOUNT: larger than %d bytes", maxServiceAccountBytes)
	}
	if _, err := parseKey(data); err != nil {
		return nil, fmt.Errorf("GCS_PATH_SERVICE_ACCOUNT: %w", err)
	}
	return data, nil
}

// GatewayClient returns the HTTP client of the gateway-wide callbacks: the
// operator's destinations, so no Guard, and the environment's proxy; like
// the Guard's, it follows no redirect (credentials stay with the host the
// operator named).
func GatewayClient() *http.Client {
	t := http.DefaultTransport.(*http.Transport).Clone()
	t.MaxIdleConnsPerHost = 64
	t.WriteBufferSize = DestinationWriteBuffer
	return &http.Client{
		Transport:     t,
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
	}
}
