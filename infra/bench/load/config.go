package main

import (
	"errors"
	"flag"
	"fmt"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"
)

// allScenarios lists every scenario in run order.
func allScenarios() []string {
	return []string{"noop", "embeddings", "embeddings-titan", "titan-fanout", "chat", "chat-c1", "chat-c64", "chat-stream", "chat-anthropic", "chat-anthropic-stream", "messages-openai", "messages-anthropic", "passthrough", "passthrough-stream", "upload", "batch", "callback", "budget", "telemetry"}
}

// config is the load generator's command line.
type config struct {
	root, outDir, binDir, logDir, jsonPath, textPath string

	scenarios    []string
	rounds       int
	warmup       time.Duration
	duration     time.Duration
	openDuration time.Duration
	concurrency  int
	rate         float64
	maxRequests  int64
	maxInFlight  int
	deadline     time.Duration
	maxLag       time.Duration
	retries      int
	cpuSlices    int
	cpuSlice     time.Duration

	sluice      bool
	pgo         string // go build's -pgo for sluice
	telemetry   string // off, metrics or traces: what sluice records (SLUICE_METRICS, OTEL_EXPORTER_OTLP_ENDPOINT)
	profile     bool
	sizes       bool
	startupRuns int

	uploadMB         int
	uploadPurpose    string
	batchLines       int
	batchTimeout     time.Duration
	batchConcurrency int

	streamChunks    int
	streamInterval  time.Duration
	upstreamLatency time.Duration
}

// quickFlags are what -quick sets: short points and two rounds, about a
// seventh of a full run's time, for trying a change; their figures move by
// 10–25 % between runs on a shared machine.
var quickFlags = [][2]string{{"rounds", "2"}, {"warmup", "500ms"}, {"duration", "3s"}, {"open-duration", "3s"}}

// quickSettings renders quickFlags for the help text.
func quickSettings() string {
	var parts []string
	for _, f := range quickFlags {
		parts = append(parts, "-"+f[0]+" "+f[1])
	}
	return strings.Join(parts, " ")
}

// applyQuick sets quickFlags on the flags of fs not given on its command line.
func applyQuick(fs *flag.FlagSet) error {
	given := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { given[f.Name] = true })
	for _, f := range quickFlags {
		if !given[f[0]] {
			if err := fs.Set(f[0], f[1]); err != nil {
				return fmt.Errorf("-quick: %w", err)
			}
		}
	}
	return nil
}

// parseScenarios turns "all" or a comma-separated list into scenario names.
func parseScenarios(s string) ([]string, error) {
	if s == "" || s == "all" {
		return allScenarios(), nil
	}
	var out []string
	for _, name := range strings.Split(s, ",") {
		name = strings.TrimSpace(name)
		if !slices.Contains(allScenarios(), name) {
			return nil, fmt.Errorf("unknown scenario %q (have %s)", name, strings.Join(allScenarios(), ", "))
		}
		if !slices.Contains(out, name) {
			out = append(out, name)
		}
	}
	// Run in the canonical order whatever order they were named in.
	slices.SortFunc(out, func(a, b string) int {
		return slices.Index(allScenarios(), a) - slices.Index(allScenarios(), b)
	})
	return out, nil
}

func (c *config) validate() error {
	var errs []error
	if c.rounds < 1 {
		errs = append(errs, fmt.Errorf("-rounds %d: want ≥ 1", c.rounds))
	}
	if c.duration <= 0 || c.openDuration <= 0 || c.warmup < 0 {
		errs = append(errs, errors.New("-duration and -open-duration must be positive, -warmup not negative"))
	}
	if c.maxInFlight < 1 || c.maxRequests < 1 {
		errs = append(errs, errors.New("-max-in-flight and -max-requests must be positive"))
	}
	if c.concurrency < 0 || c.rate < 0 {
		errs = append(errs, errors.New("-concurrency and -rate must not be negative (0 = scenario default)"))
	}
	if c.uploadMB < 1 || c.batchLines < 1 || c.batchConcurrency < 1 {
		errs = append(errs, errors.New("-upload-mb, -batch-lines and -batch-concurrency must be positive"))
	}
	if c.maxLag <= 0 || c.retries < 0 {
		errs = append(errs, errors.New("-max-lag must be positive and -retries not negative"))
	}
	if c.startupRuns < 0 {
		errs = append(errs, errors.New("-startup-runs must not be negative"))
	}
	if c.deadline <= 0 {
		errs = append(errs, errors.New("-deadline must be positive"))
	}
	if c.binDir == "" {
		c.binDir = filepath.Join(c.outDir, "bin")
	}
	c.logDir = filepath.Join(c.outDir, "logs")
	return errors.Join(errs...)
}

// settings renders the configuration for the report.
func (c *config) settings() map[string]string {
	return map[string]string{
		"scenarios":       strings.Join(c.scenarios, ","),
		"rounds":          strconv.Itoa(c.rounds),
		"warmup":          c.warmup.String(),
		"duration":        c.duration.String(),
		"open_duration":   c.openDuration.String(),
		"concurrency":     strconv.Itoa(c.concurrency),
		"rate":            strconv.FormatFloat(c.rate, 'f', -1, 64),
		"stream_chunks":   strconv.Itoa(c.streamChunks),
		"stream_interval": c.streamInterval.String(),
		"upstream_delay":  c.upstreamLatency.String(),
		"max_lag":         c.maxLag.String(),
		"retries":         strconv.Itoa(c.retries),
		"upload_mb":       strconv.Itoa(c.uploadMB),
		"batch_lines":     strconv.Itoa(c.batchLines),
		"pgo":             c.pgo,
	}
}
