// Package config loads sluice's configuration: process settings from SLUICE_*
// environment variables, and the model list and gateway settings from a YAML
// file in LiteLLM's config.yaml form.
package config

import (
	"fmt"
	"net"
	"os"
	"strconv"
	"strings"
	"time"
)

// Defaults for the settings (docs/configuration.md's settings table lists them).
const (
	DefaultAddr                = "127.0.0.1:4000"
	DefaultDataDir             = ".sluice"
	DefaultConfigPath          = "sluice.yaml"
	DefaultKeyCacheTTL         = 30 * time.Second
	DefaultKeyNegativeCacheTTL = 5 * time.Second
	DefaultJSONBodyLimit       = 10 << 20
	DefaultMaxFileSize         = 512 << 20
	// DefaultCloudMaxFileSize is the largest file on the AWS backend: a
	// Lambda function streams at most 200 MiB, prelude included, so a whole
	// file's content fits in one streamed answer.
	DefaultCloudMaxFileSize    = 200_000_000
	DefaultClaimCheckThreshold = 200 << 10
	DefaultCallbackCacheTTL    = 30 * time.Second
	DefaultShutdownTimeout     = 30 * time.Second
	DefaultBodyIdleTimeout     = 60 * time.Second
	DefaultBodyMinRate         = 1 << 10
	DefaultMaxConnections      = 1024
	// DefaultMaxBufferedBodies bounds the request bodies the local process
	// holds whole in memory at once: eight of the largest (a 32 MiB Bedrock
	// body), thousands of the usual few KB.
	DefaultMaxBufferedBodies = 256 << 20
	DefaultPprofAddr         = "127.0.0.1:6060"
	// DefaultBatchConcurrency is how many batch lines one process (one
	// batch-worker invocation in the cloud) runs at once.
	DefaultBatchConcurrency = 100
	// MinBatchWindow and MaxBatchWindow bound the completion windows an
	// operator may allow.
	MinBatchWindow = time.Hour
	MaxBatchWindow = 168 * time.Hour
)

// Backends sluice can run on.
const (
	BackendLocal = "local"
	BackendAWS   = "aws"
)

// Settings are the process settings, read from SLUICE_* environment variables.
type Settings struct {
	Addr                   string        // SLUICE_ADDR
	DataDir                string        // SLUICE_DATA_DIR
	ConfigLocation         string        // SLUICE_CONFIG: a path, s3://bucket/key or ssm:/name
	MasterKey              string        // SLUICE_MASTER_KEY
	LogFormat              string        // SLUICE_LOG_FORMAT: auto, text or json
	LogLevel               string        // SLUICE_LOG_LEVEL: debug, info, warn, error
	Backend                string        // SLUICE_BACKEND: local or aws
	KeyCacheTTL            time.Duration // SLUICE_KEY_CACHE_TTL
	KeyNegativeCacheTTL    time.Duration // SLUICE_KEY_NEGATIVE_CACHE_TTL
	JSONBodyLimit          int64         // SLUICE_MAX_JSON_BODY_BYTES
	MaxFileSize            int64         // SLUICE_MAX_FILE_BYTES (DefaultCloudMaxFileSize on the AWS backend)
	BatchCompletionWindows []string      // SLUICE_BATCH_COMPLETION_WINDOWS: each a whole number of hours, 1h..168h
	BatchConcurrency       int           // SLUICE_BATCH_CONCURRENCY: batch lines in flight at once per process
	ClaimCheckThreshold    int64         // SLUICE_CLAIM_CHECK_BYTES
	ServiceAccountDir      string        // SLUICE_GCS_SERVICE_ACCOUNT_DIR
	CallbackCacheTTL       time.Duration // SLUICE_CALLBACK_CACHE_TTL
	Pprof                  string        // SLUICE_PPROF: a loopback address for pprof; "" for none
	ShutdownTimeout        time.Duration // SLUICE_SHUTDOWN_TIMEOUT
	BodyIdleTimeout        time.Duration // SLUICE_BODY_IDLE_TIMEOUT
	BodyMinRate            int64         // SLUICE_BODY_MIN_RATE: bytes per second; 0 turns the check off
	MaxConnections         int           // SLUICE_MAX_CONNECTIONS
	MaxBufferedBodies      int64         // SLUICE_MAX_BUFFERED_BODY_BYTES
	Metrics                bool          // SLUICE_METRICS: record metrics (on unless false)
	MetricsAddr            string        // SLUICE_METRICS_ADDR: an address serving /metrics without auth; "" for none
	MetricsNamespace       string        // SLUICE_METRICS_NAMESPACE: the CloudWatch namespace of the EMF lines in Lambda
}

// SettingsFromEnv reads the settings through getenv (os.Getenv in main). Every
// malformed value is an error naming its variable.
func SettingsFromEnv(getenv func(string) string) (Settings, error) {
	p := envParser{getenv: getenv}
	s := Settings{
		Addr:                   p.str("SLUICE_ADDR", DefaultAddr),
		DataDir:                p.str("SLUICE_DATA_DIR", DefaultDataDir),
		ConfigLocation:         p.str("SLUICE_CONFIG", ""),
		MasterKey:              getenv("SLUICE_MASTER_KEY"),
		LogFormat:              p.oneOf("SLUICE_LOG_FORMAT", "auto", "auto", "text", "json"),
		LogLevel:               p.oneOf("SLUICE_LOG_LEVEL", "info", "debug", "info", "warn", "error"),
		Backend:                p.oneOf("SLUICE_BACKEND", BackendLocal, BackendLocal, BackendAWS),
		KeyCacheTTL:            p.duration("SLUICE_KEY_CACHE_TTL", DefaultKeyCacheTTL),
		KeyNegativeCacheTTL:    p.duration("SLUICE_KEY_NEGATIVE_CACHE_TTL", DefaultKeyNegativeCacheTTL),
		JSONBodyLimit:          p.bytes("SLUICE_MAX_JSON_BODY_BYTES", DefaultJSONBodyLimit),
		MaxFileSize:            p.bytes("SLUICE_MAX_FILE_BYTES", DefaultMaxFileSize),
		BatchCompletionWindows: p.windows("SLUICE_BATCH_COMPLETION_WINDOWS", []string{"24h"}),
		BatchConcurrency:       p.count("SLUICE_BATCH_CONCURRENCY", DefaultBatchConcurrency),
		ClaimCheckThreshold:    p.bytes("SLUICE_CLAIM_CHECK_BYTES", DefaultClaimCheckThreshold),
		ServiceAccountDir:      p.str("SLUICE_GCS_SERVICE_ACCOUNT_DIR", ""),
		CallbackCacheTTL:       p.duration("SLUICE_CALLBACK_CACHE_TTL", DefaultCallbackCacheTTL),
		Pprof:                  p.loopback("SLUICE_PPROF", DefaultPprofAddr),
		ShutdownTimeout:        p.duration("SLUICE_SHUTDOWN_TIMEOUT", DefaultShutdownTimeout),
		BodyIdleTimeout:        p.positiveDuration("SLUICE_BODY_IDLE_TIMEOUT", DefaultBodyIdleTimeout),
		BodyMinRate:            p.rate("SLUICE_BODY_MIN_RATE", DefaultBodyMinRate),
		MaxConnections:         p.count("SLUICE_MAX_CONNECTIONS", DefaultMaxConnections),
		MaxBufferedBodies:      p.bytes("SLUICE_MAX_BUFFERED_BODY_BYTES", DefaultMaxBufferedBodies),
		Metrics:                p.boolean("SLUICE_METRICS", true),
		MetricsAddr:            p.address("SLUICE_METRICS_ADDR"),
		MetricsNamespace:       p.str("SLUICE_METRICS_NAMESPACE", ""),
	}
	if s.Backend == BackendAWS {
		s.MaxFileSize = p.bytes("SLUICE_MAX_FILE_BYTES", DefaultCloudMaxFileSize)
	}
	if s.ConfigLocation == "" {
		if _, err := os.Stat(DefaultConfigPath); err == nil {
			s.ConfigLocation = DefaultConfigPath
		}
	}
	if p.err != nil {
		return Settings{}, p.err
	}
	return s, nil
}

// envParser reads variables, keeping the first error.
type envParser struct {
	getenv func(string) string
	err    error
}

func (p *envParser) fail(name, value, want string) {
	if p.err == nil {
		p.err = fmt.Errorf("%s=%q: want %s", name, value, want)
	}
}

func (p *envParser) str(name, def string) string {
	if v := strings.TrimSpace(p.getenv(name)); v != "" {
		return v
	}
	return def
}

func (p *envParser) oneOf(name, def string, allowed ...string) string {
	v := strings.ToLower(p.str(name, def))
	for _, a := range allowed {
		if v == a {
			return v
		}
	}
	p.fail(name, v, "one of "+strings.Join(allowed, ", "))
	return def
}

func (p *envParser) duration(name string, def time.Duration) time.Duration {
	v := p.str(name, "")
	if v == "" {
		return def
	}
	d, err := time.ParseDuration(v)
	if err != nil || d < 0 {
		p.fail(name, v, "a duration such as 30s or 5m")
		return def
	}
	return d
}

func (p *envParser) positiveDuration(name string, def time.Duration) time.Duration {
	d := p.duration(name, def)
	if d == 0 {
		p.fail(name, p.str(name, ""), "a positive duration such as 30s or 5m")
		return def
	}
	return d
}

// rate reads bytes per second: a size, or 0 for none.
func (p *envParser) rate(name string, def int64) int64 {
	v := p.str(name, "")
	if v == "" {
		return def
	}
	n, err := ParseBytes(v)
	if err != nil || n < 0 {
		p.fail(name, v, "bytes per second such as 1KiB, or 0 for none")
		return def
	}
	return n
}

func (p *envParser) count(name string, def int) int {
	v := p.str(name, "")
	if v == "" {
		return def
	}
	n, err := strconv.Atoi(v)
	if err != nil || n <= 0 {
		p.fail(name, v, "a positive whole number")
		return def
	}
	return n
}

func (p *envParser) bytes(name string, def int64) int64 {
	v := p.str(name, "")
	if v == "" {
		return def
	}
	n, err := ParseBytes(v)
	if err != nil || n <= 0 {
		p.fail(name, v, "a positive size such as 10MB, 512MiB or 1048576")
		return def
	}
	return n
}

func (p *envParser) list(name string, def []string) []string {
	v := p.str(name, "")
	if v == "" {
		return def
	}
	var out []string
	for _, part := range strings.Split(v, ",") {
		if part = strings.TrimSpace(part); part != "" {
			out = append(out, part)
		}
	}
	if len(out) == 0 {
		p.fail(name, v, "a comma-separated list")
		return def
	}
	return out
}

// windows reads batch completion windows: a list of whole hours ("24h"),
// each from MinBatchWindow to MaxBatchWindow.
func (p *envParser) windows(name string, def []string) []string {
	list := p.list(name, def)
	for _, w := range list {
		if _, err := ParseBatchWindow(w); err != nil {
			p.fail(name, p.str(name, ""), "completion windows such as 24h or 1h,24h,168h (whole hours from 1h to 168h)")
			return def
		}
	}
	return list
}

// ParseBatchWindow parses a batch completion window: a whole number of
// hours followed by h ("24h"), from MinBatchWindow to MaxBatchWindow.
func ParseBatchWindow(s string) (time.Duration, error) {
	digits, ok := strings.CutSuffix(s, "h")
	n, err := strconv.Atoi(digits)
	if !ok || err != nil || digits == "" || digits[0] == '+' || digits[0] == '-' {
		return 0, fmt.Errorf("completion window %q: want a whole number of hours such as 24h", s)
	}
	d := time.Duration(n) * time.Hour
	if d < MinBatchWindow || d > MaxBatchWindow {
		return 0, fmt.Errorf("completion window %q: want %s to %s", s, "1h", "168h")
	}
	return d, nil
}

// boolean reads true or false.
func (p *envParser) boolean(name string, def bool) bool {
	v := p.str(name, "")
	if v == "" {
		return def
	}
	b, err := strconv.ParseBool(v)
	if err != nil {
		p.fail(name, v, "true or false")
		return def
	}
	return b
}

// address reads a host:port to listen on; "" for none.
func (p *envParser) address(name string) string {
	v := p.str(name, "")
	if v == "" {
		return ""
	}
	if _, port, err := net.SplitHostPort(v); err != nil || port == "" {
		p.fail(name, v, "a host:port to listen on, such as 127.0.0.1:9464")
		return ""
	}
	return v
}

// loopback reads an address that must be on the loopback interface: true
// means def, false or nothing means none ("").
func (p *envParser) loopback(name, def string) string {
	v := p.str(name, "")
	if b, err := strconv.ParseBool(v); v == "" || err == nil {
		if b {
			return def
		}
		return ""
	}
	host, _, err := net.SplitHostPort(v)
	ip := net.ParseIP(host)
	if err != nil || host != "localhost" && (ip == nil || !ip.IsLoopback()) {
		p.fail(name, v, "true, false, or a loopback address such as "+def)
		return ""
	}
	return v
}

// ParseBytes parses a size: a plain byte count or a number with a unit
// (KB, MB, GB as powers of 1000; KiB, MiB, GiB as powers of 1024).
func ParseBytes(s string) (int64, error) {
	s = strings.TrimSpace(s)
	units := []struct {
		suffix string
		mult   int64
	}{
		{"KiB", 1 << 10}, {"MiB", 1 << 20}, {"GiB", 1 << 30},
		{"KB", 1e3}, {"MB", 1e6}, {"GB", 1e9}, {"B", 1},
	}
	mult := int64(1)
	for _, u := range units {
		if rest, ok := strings.CutSuffix(s, u.suffix); ok {
			s, mult = strings.TrimSpace(rest), u.mult
			break
		}
	}
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil {
		return 0, fmt.Errorf("parse size %q: %w", s, err)
	}
	if n > (1<<63-1)/mult {
		return 0, fmt.Errorf("parse size %q: too large", s)
	}
	return n * mult, nil
}
