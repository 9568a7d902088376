package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"time"
)

// pprofAddr picks a loopback address for a child's pprof listener.
func pprofAddr() (string, error) {
	addr, err := freeAddr()
	if err != nil {
		return "", fmt.Errorf("pprof address: %w", err)
	}
	return addr, nil
}

// profileScenario runs one more closed loop per target that serves pprof
// (the bare proxy and sluice, with -profile), after the measured rounds and
// not counted in them, and saves a CPU profile of each and the allocations
// of the same seconds (<scenario>-<target>.allocs.pprof): where the proxy's
// and sluice's CPU per request go, under the same load. It returns the
// profile paths by target, and why a profile is missing.
func (b *bench) profileScenario(ctx context.Context, sc httpScenario, targets []target, conc int) (paths, failed map[string]string) {
	paths, failed = map[string]string{}, map[string]string{}
	dir := filepath.Join(b.cfg.outDir, "profiles")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		failed["all"] = err.Error()
		return paths, failed
	}
	secs := max(1, int(b.cfg.duration/time.Second))
	for _, t := range targets {
		if t.pprof == "" || ctx.Err() != nil {
			continue
		}
		do := httpCall(b.client, sc.spec(t))
		runClosed(ctx, conc, b.cfg.warmup, b.cfg.maxRequests, do)
		path := filepath.Join(dir, sc.name+"-"+t.name+".pprof")
		allocs := filepath.Join(dir, sc.name+"-"+t.name+".allocs.pprof")
		got := make(chan error, 2)
		go func() {
			got <- fetchProfile(ctx, "http://"+t.pprof+"/debug/pprof/profile?seconds="+strconv.Itoa(secs), path)
		}()
		go func() {
			got <- fetchProfile(ctx, "http://"+t.pprof+"/debug/pprof/allocs?seconds="+strconv.Itoa(secs), allocs)
		}()
		// The loop outlasts the profiles, which start a moment after it.
		runClosed(ctx, conc, time.Duration(secs)*time.Second+500*time.Millisecond, b.cfg.maxRequests, do)
		if err := errors.Join(<-got, <-got); err != nil {
			failed[t.name] = err.Error()
			continue
		}
		paths[t.name] = path
		b.logf("  %-18s CPU profile of %s in %s", sc.name, t.name, path)
	}
	return paths, failed
}

// fetchProfile saves the answer of a pprof profile URL to path.
func fetchProfile(ctx context.Context, url, path string) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return err
	}
	// Its own client: the load client's timeout is shorter than a profile may be.
	client := &http.Client{Transport: &http.Transport{Proxy: nil, DialContext: (&net.Dialer{Timeout: 5 * time.Second}).DialContext}}
	resp, err := client.Do(req)
	if err != nil {
		return fmt.Errorf("fetch profile: %w", err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(io.LimitReader(resp.Body, 512))
		return fmt.Errorf("fetch profile: %d %s", resp.StatusCode, clip(b))
	}
	f, err := os.Create(path)
	if err != nil {
		return fmt.Errorf("save profile: %w", err)
	}
	if _, err := io.Copy(f, resp.Body); err != nil {
		f.Close()
		return fmt.Errorf("save profile: %w", err)
	}
	return f.Close()
}
