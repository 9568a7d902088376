package main

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"runtime"
	"strconv"
	"strings"
)

// machine describes where the figures were measured.
type machine struct {
	CPUs      int    `json:"cpus"`
	CPUModel  string `json:"cpu_model"`
	Memory    string `json:"memory"`
	Kernel    string `json:"kernel"`
	GoVersion string `json:"go_version"`
	ClockTick int64  `json:"clock_ticks_per_second"`
}

func describeMachine(ctx context.Context, ticks int64) machine {
	m := machine{CPUs: runtime.NumCPU(), CPUModel: "unknown", Memory: "unknown", Kernel: "unknown", GoVersion: runtime.Version(), ClockTick: ticks}
	if b, err := os.ReadFile("/proc/cpuinfo"); err == nil {
		for line := range strings.Lines(string(b)) {
			if k, v, ok := strings.Cut(line, ":"); ok && strings.TrimSpace(k) == "model name" {
				m.CPUModel = strings.TrimSpace(v)
				break
			}
		}
	}
	if b, err := os.ReadFile("/proc/meminfo"); err == nil {
		for line := range strings.Lines(string(b)) {
			if v, ok := strings.CutPrefix(line, "MemTotal:"); ok {
				if f := strings.Fields(v); len(f) == 2 {
					if kb, err := strconv.ParseInt(f[0], 10, 64); err == nil {
						m.Memory = fmt.Sprintf("%.1f GiB RAM", float64(kb)/(1<<20))
					}
				}
			}
		}
	}
	if b, err := os.ReadFile("/proc/sys/kernel/osrelease"); err == nil {
		m.Kernel = strings.TrimSpace(string(b))
	}
	if out, err := exec.CommandContext(ctx, "go", "env", "GOVERSION").Output(); err == nil {
		m.GoVersion = strings.TrimSpace(string(out))
	}
	return m
}

// upstreamStats is the upstream's GET /_bench/stats answer.
type upstreamStats struct {
	Total         int64            `json:"total"`
	LoggingEvents int64            `json:"logging_events"`
	Routes        map[string]int64 `json:"routes"`
}

func (b *bench) upstreamStats(ctx context.Context) (upstreamStats, error) {
	return b.statsOf(ctx, b.upstreamURL)
}

// statsOf reads the counters of the upstream at base.
func (b *bench) statsOf(ctx context.Context, base string) (upstreamStats, error) {
	var st upstreamStats
	status, body, err := doJSON(ctx, b.client, http.MethodGet, base+"/_bench/stats", "", nil)
	if err != nil {
		return st, fmt.Errorf("upstream stats: %w", err)
	}
	if status != http.StatusOK {
		return st, fmt.Errorf("upstream stats: %d %s", status, clip(body))
	}
	if err := json.Unmarshal(body, &st); err != nil {
		return st, fmt.Errorf("upstream stats: %w", err)
	}
	return st, nil
}
