package config

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

func env(m map[string]string) func(string) string {
	return func(k string) string { return m[k] }
}

func TestSettingsFromEnvDefaults(t *testing.T) {
	s, err := SettingsFromEnv(env(nil))
	if err != nil {
		t.Fatal(err)
	}
	if s.Addr != DefaultAddr || s.DataDir != DefaultDataDir || s.Backend != BackendLocal ||
		s.KeyCacheTTL != DefaultKeyCacheTTL || s.JSONBodyLimit != DefaultJSONBodyLimit ||
		s.MaxFileSize != DefaultMaxFileSize || len(s.BatchCompletionWindows) != 1 || s.LogFormat != "auto" ||
		s.CallbackCacheTTL != DefaultCallbackCacheTTL || s.ServiceAccountDir != "" ||
		s.BodyIdleTimeout != DefaultBodyIdleTimeout || s.BodyMinRate != DefaultBodyMinRate || s.MaxConnections != DefaultMaxConnections ||
		s.MaxBufferedBodies != DefaultMaxBufferedBodies || s.BatchConcurrency != DefaultBatchConcurrency {
		t.Errorf("defaults = %+v", s)
	}
}

func TestSettingsFromEnv(t *testing.T) {
	s, err := SettingsFromEnv(env(map[string]string{
		"SLUICE_ADDR": "127.0.0.1:9", "SLUICE_BACKEND": "AWS", "SLUICE_KEY_CACHE_TTL": "2s",
		"SLUICE_MAX_JSON_BODY_BYTES": "1MiB", "SLUICE_BATCH_COMPLETION_WINDOWS": "24h, 48h",
		"SLUICE_PPROF": "true", "SLUICE_LOG_FORMAT": "json",
		"SLUICE_CALLBACK_CACHE_TTL": "5s", "SLUICE_GCS_SERVICE_ACCOUNT_DIR": "/etc/sluice/gcs",
		"SLUICE_BODY_IDLE_TIMEOUT": "90s", "SLUICE_BODY_MIN_RATE": "0", "SLUICE_MAX_CONNECTIONS": "64",
		"SLUICE_MAX_BUFFERED_BODY_BYTES": "64MiB",
	}))
	if err != nil {
		t.Fatal(err)
	}
	if s.Addr != "127.0.0.1:9" || s.Backend != BackendAWS || s.KeyCacheTTL != 2*time.Second ||
		s.JSONBodyLimit != 1<<20 || strings.Join(s.BatchCompletionWindows, "|") != "24h|48h" || s.Pprof != DefaultPprofAddr || s.LogFormat != "json" ||
		s.BodyIdleTimeout != 90*time.Second || s.BodyMinRate != 0 || s.MaxConnections != 64 ||
		s.CallbackCacheTTL != 5*time.Second || s.ServiceAccountDir != "/etc/sluice/gcs" ||
		s.MaxBufferedBodies != 64<<20 {
		t.Errorf("settings = %+v", s)
	}
}

// A completion window is a whole number of hours from 1h to 168h; anything
// else fails the start, naming the variable.
func TestBatchCompletionWindows(t *testing.T) {
	s, err := SettingsFromEnv(env(map[string]string{"SLUICE_BATCH_COMPLETION_WINDOWS": "1h,24h,168h"}))
	if err != nil || strings.Join(s.BatchCompletionWindows, "|") != "1h|24h|168h" {
		t.Fatalf("windows = %v, %v", s.BatchCompletionWindows, err)
	}
	for _, bad := range []string{"30m", "0h", "169h", "1.5h", "h", "-1h", "+2h", "24", "24h,2d", "1H"} {
		_, err := SettingsFromEnv(env(map[string]string{"SLUICE_BATCH_COMPLETION_WINDOWS": bad}))
		if err == nil || !strings.Contains(err.Error(), "SLUICE_BATCH_COMPLETION_WINDOWS") {
			t.Errorf("%q: err = %v, want one naming the variable", bad, err)
		}
	}
	if d, err := ParseBatchWindow("168h"); err != nil || d != 168*time.Hour {
		t.Errorf("ParseBatchWindow(168h) = %v, %v", d, err)
	}
}

// TestMaxFileSizeOnAWS: on the AWS backend a file is at most what one
// streamed Lambda answer carries (200 MiB with its prelude), unless set.
func TestMaxFileSizeOnAWS(t *testing.T) {
	for _, tc := range []struct {
		env  map[string]string
		want int64
	}{
		{map[string]string{"SLUICE_BACKEND": "aws"}, DefaultCloudMaxFileSize},
		{map[string]string{"SLUICE_BACKEND": "aws", "SLUICE_MAX_FILE_BYTES": "50MB"}, 50e6},
		{map[string]string{"SLUICE_BACKEND": "local"}, DefaultMaxFileSize},
	} {
		s, err := SettingsFromEnv(env(tc.env))
		if err != nil || s.MaxFileSize != tc.want {
			t.Errorf("%v: MaxFileSize %d (%v), want %d", tc.env, s.MaxFileSize, err, tc.want)
		}
	}
	if DefaultCloudMaxFileSize+64<<10 > 200<<20 {
		t.Error("a file of DefaultCloudMaxFileSize and a prelude do not fit in Lambda's 200 MiB streamed answer")
	}
}

func TestPprofIsOnALoopbackAddress(t *testing.T) {
	for value, want := range map[string]string{
		"": "", "false": "", "0": "", "true": DefaultPprofAddr, "1": DefaultPprofAddr,
		"127.0.0.1:7070": "127.0.0.1:7070", "[::1]:7070": "[::1]:7070", "localhost:7070": "localhost:7070",
	} {
		s, err := SettingsFromEnv(env(map[string]string{"SLUICE_PPROF": value}))
		if err != nil || s.Pprof != want {
			t.Errorf("SLUICE_PPROF=%q: %q, %v; want %q", value, s.Pprof, err, want)
		}
	}
	for _, value := range []string{"0.0.0.0:6060", ":6060", "10.0.0.5:6060", "example.com:6060", "127.0.0.1"} {
		if _, err := SettingsFromEnv(env(map[string]string{"SLUICE_PPROF": value})); err == nil {
			t.Errorf("SLUICE_PPROF=%q accepted: pprof must stay on loopback", value)
		}
	}
}

func TestSettingsFromEnvErrors(t *testing.T) {
	for name, value := range map[string]string{
		"SLUICE_BACKEND":             "gcp",
		"SLUICE_KEY_CACHE_TTL":       "soon",
		"SLUICE_CALLBACK_CACHE_TTL":  "-1s",
		"SLUICE_MAX_FILE_BYTES":      "-5",
		"SLUICE_PPROF":               "maybe",
		"SLUICE_LOG_FORMAT":          "xml",
		"SLUICE_MAX_JSON_BODY_BYTES": "10XB",
		"SLUICE_BODY_IDLE_TIMEOUT":   "0s",
		"SLUICE_BODY_MIN_RATE":       "fast",
		"SLUICE_MAX_CONNECTIONS":     "0",
		"SLUICE_BATCH_CONCURRENCY":   "none",
	} {
		_, err := SettingsFromEnv(env(map[string]string{name: value}))
		if err == nil || !strings.Contains(err.Error(), name) {
			t.Errorf("%s=%s: err = %v, want one naming the variable", name, value, err)
		}
	}
}

func TestParseBytes(t *testing.T) {
	for in, want := range map[string]int64{"10": 10, "10MB": 10e6, "512MiB": 512 << 20, "1 GiB": 1 << 30, "7B": 7, "2KB": 2000} {
		got, err := ParseBytes(in)
		if err != nil || got != want {
			t.Errorf("ParseBytes(%q) = %d, %v; want %d", in, got, err, want)
		}
	}
	for _, in := range []string{"", "MB", "1.5MB", "99999999999GiB"} {
		if _, err := ParseBytes(in); err == nil {
			t.Errorf("ParseBytes(%q) succeeded", in)
		}
	}
}

const liteLLMConfig = `
model_list:
  - model_name: text-embedding-3-small
    litellm_params:
      model: openai/text-embedding-3-small
      api_key: os.environ/OPENAI_API_KEY
      api_base: https://api.openai.com/v1
      rpm: 100
      custom_header: kept
    model_info:
      mode: embedding
  - model_name: titan
    litellm_params:
      model: bedrock/amazon.titan-embed-text-v2:0
      aws_region_name: us-east-1
      aws_secret_access_key: os.environ/UNSET_VAR
general_settings:
  master_key: secretsmanager/sluice#master
router_settings:
  fallbacks: [{titan: [text-embedding-3-small]}]
environment_variables:
  FOO: bar
guardrails:
  - guardrail_name: pii
litellm_settings:
  drop_params: true
`

func TestParseLiteLLMConfig(t *testing.T) {
	cfg, err := Parse([]byte(liteLLMConfig), env(map[string]string{"OPENAI_API_KEY": "sk-openai"}))
	if err != nil {
		t.Fatal(err)
	}
	if len(cfg.ModelList) != 2 {
		t.Fatalf("model_list has %d entries", len(cfg.ModelList))
	}
	d := cfg.ModelList[0]
	if d.Params.APIKey != "sk-openai" || d.Params.Provider() != "openai" || d.Params.ProviderModel() != "text-embedding-3-small" ||
		d.Params.RPM != 100 || d.ModelInfo.Mode != "embedding" || d.Params.Extra["custom_header"] != "kept" {
		t.Errorf("deployment = %+v", d)
	}
	if got := cfg.ModelList[1].Params.ProviderModel(); got != "amazon.titan-embed-text-v2:0" {
		t.Errorf("ProviderModel = %q", got)
	}
	if got := cfg.RouterSettings.Fallbacks[0]["titan"]; len(got) != 1 || got[0] != "text-embedding-3-small" {
		t.Errorf("fallbacks = %v", cfg.RouterSettings.Fallbacks)
	}
	warnings := strings.Join(cfg.Warnings, "\n")
	if cfg.EnvironmentVariables["FOO"] != "bar" {
		t.Errorf("environment_variables = %v", cfg.EnvironmentVariables)
	}
	for _, want := range []string{`"guardrails" is not used`, "UNSET_VAR is not set", "model_list[1].litellm_params.aws_secret_access_key"} {
		if !strings.Contains(warnings, want) {
			t.Errorf("warnings %q lack %q", warnings, want)
		}
	}
	if strings.Contains(warnings, "sk-openai") {
		t.Error("a warning shows a secret")
	}
}

func TestParseErrors(t *testing.T) {
	for name, doc := range map[string]string{
		"not a mapping":    "- a\n- b\n",
		"bad yaml":         "model_list: [",
		"no model_name":    "model_list:\n  - litellm_params: {model: openai/x}\n",
		"no model":         "model_list:\n  - model_name: x\n",
		"no provider":      "model_list:\n  - model_name: x\n    litellm_params: {model: gpt-4o}\n",
		"negative rpm":     "model_list:\n  - model_name: x\n    litellm_params: {model: openai/x, rpm: -1}\n",
		"unknown prefix":   "passthrough:\n  openrouter: {api_key: x}\n",
		"wrong field type": "model_list:\n  - model_name: x\n    litellm_params: {model: openai/x, rpm: lots}\n",
		"allow_hosts URL":  "callback_settings:\n  allow_hosts: [\"http://127.0.0.1\"]\n",
		"allow_hosts port": "callback_settings:\n  allow_hosts: [\"127.0.0.1:8080\"]\n",
		"allow_hosts bad":  "callback_settings:\n  allow_hosts: [\"langfuse.internal/\"]\n",
	} {
		if _, err := Parse([]byte(doc), env(nil)); err == nil {
			t.Errorf("%s: Parse succeeded", name)
		}
	}
}

func TestParseAllowHosts(t *testing.T) {
	doc := "callback_settings:\n  allow_hosts: [127.0.0.1, \"::1\", 10.0.0.0/8, langfuse.internal, Langfuse-EU.example.com.]\n"
	cfg, err := Parse([]byte(doc), env(nil))
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"127.0.0.1", "::1", "10.0.0.0/8", "langfuse.internal", "Langfuse-EU.example.com."}
	if diff := cmp.Diff(want, cfg.CallbackSettings.AllowHosts); diff != "" {
		t.Errorf("allow_hosts (-want +got):\n%s", diff)
	}
}

type fakeSecrets struct {
	calls  int
	values map[string]string
}

func (f *fakeSecrets) Secret(_ context.Context, name, key string) (string, error) {
	f.calls++
	v, ok := f.values[name+"#"+key]
	if !ok {
		return "", errors.New("no such secret")
	}
	return v, nil
}

func TestResolve(t *testing.T) {
	cfg, err := Parse([]byte(liteLLMConfig), env(nil))
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	secrets := &fakeSecrets{values: map[string]string{"sluice#master": "sk-master"}}
	for range 3 {
		v, err := cfg.Resolve(ctx, secrets, cfg.GeneralSettings.MasterKey)
		if err != nil || v != "sk-master" {
			t.Fatalf("Resolve = %q, %v", v, err)
		}
	}
	if secrets.calls != 1 {
		t.Errorf("secret fetched %d times, want once", secrets.calls)
	}
	if v, _ := cfg.Resolve(ctx, nil, "plain"); v != "plain" {
		t.Errorf("plain value resolved to %q", v)
	}
	if _, err := cfg.Resolve(ctx, nil, "secretsmanager/x"); err == nil {
		t.Error("secret resolved with no secret store")
	}
	if _, err := cfg.Resolve(ctx, secrets, "secretsmanager/missing"); err == nil {
		t.Error("missing secret resolved")
	}
}

func TestLoad(t *testing.T) {
	ctx := context.Background()
	if _, err := Load(ctx, "s3://bucket/key", nil, env(nil)); err == nil || !strings.Contains(err.Error(), "SLUICE_BACKEND=aws") {
		t.Errorf("s3 location without a fetcher: %v", err)
	}
	fetch := func(_ context.Context, loc string) ([]byte, error) { return []byte(liteLLMConfig), nil }
	cfg, err := Load(ctx, "ssm:/sluice/config", fetch, env(nil))
	if err != nil || len(cfg.ModelList) != 2 {
		t.Errorf("Load(ssm) = %v, %v", cfg, err)
	}
	if _, err := Load(ctx, "/does/not/exist.yaml", nil, env(nil)); err == nil {
		t.Error("missing file loaded")
	}
	cfg, err = Load(ctx, "", nil, env(nil))
	if err != nil || len(cfg.ModelList) != 0 {
		t.Errorf("empty location: %v, %v", cfg, err)
	}
}

// TestCheckDeployedSecrets: a deployment's functions may read the stack's
// master key secret (whole) and its provider secret (fields); any other
// secretsmanager/ reference is refused when the config loads, naming where
// it is, instead of failing with AccessDenied on first use.
func TestCheckDeployedSecrets(t *testing.T) {
	for _, tc := range []struct {
		name, doc string
		want      []string // nil: accepted
	}{
		{"the stack's two secrets", `
general_settings: {master_key: secretsmanager/sluice/dev/master-key}
model_list:
  - {model_name: a, litellm_params: {model: openai/a, api_key: secretsmanager/sluice/dev/providers#openai}}
passthrough: {anthropic: {api_key: secretsmanager/sluice/dev/providers#anthropic}}
environment_variables: {LANGSMITH_API_KEY: secretsmanager/sluice/dev/providers#langsmith}
`, nil},
		{"no secrets", "model_list:\n  - {model_name: a, litellm_params: {model: openai/a, api_key: os.environ/K}}\n", nil},
		{"a second provider secret", `
general_settings: {master_key: secretsmanager/sluice/dev/master-key}
model_list:
  - {model_name: a, litellm_params: {model: openai/a, api_key: secretsmanager/sluice/dev/providers#openai}}
  - {model_name: b, litellm_params: {model: anthropic/b, api_key: secretsmanager/team-b/anthropic#key}}
`, []string{"name 2 provider secrets", "team-b/anthropic (model_list[1].litellm_params.api_key)"}},
		{"a whole secret as a provider key", `
model_list:
  - {model_name: a, litellm_params: {model: openai/a, api_key: secretsmanager/openai-key}}
`, []string{"model_list[0].litellm_params.api_key: secretsmanager/openai-key names a whole secret"}},
		{"a field of the master key secret", `
general_settings: {master_key: secretsmanager/sluice/dev/master-key#key}
`, []string{"general_settings.master_key: secretsmanager/sluice/dev/master-key#key: the stack's master key secret is a plain string"}},
		{"provider keys in the master key secret", `
general_settings: {master_key: secretsmanager/m}
model_list:
  - {model_name: a, litellm_params: {model: openai/a, api_key: secretsmanager/m#openai}}
`, []string{"fields of the master key secret"}},
	} {
		cfg, err := Parse([]byte(tc.doc), env(nil))
		if err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		err = cfg.CheckDeployedSecrets()
		switch {
		case tc.want == nil && err != nil:
			t.Errorf("%s: refused: %v", tc.name, err)
		case tc.want != nil && err == nil:
			t.Errorf("%s: accepted", tc.name)
		}
		for _, w := range tc.want {
			if err != nil && !strings.Contains(err.Error(), w) {
				t.Errorf("%s: %v does not say %q", tc.name, err, w)
			}
		}
	}
}
