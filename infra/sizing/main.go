// Command sizing measures what memory size each Lambda function needs: it
// runs the function's bootstrap under aws-lambda-rie with the bootstrap in a
// cgroup whose memory limit is the candidate size and whose CPU quota is
// Lambda's share at that size (1,769 MB = one vCPU, proportional) per
// 20 ms period (the throttling interval observed on Lambda: a function that
// uses its share early in a 20 ms slice is paused to the slice's end,
// pwrdrvr/lambda-dispatch#246), drives its bench workload (its sample
// event, repeated, against the bench upstream answering after a provider's
// latency, so each call waits on its model as a relaying function does),
// and records the cgroup's peak memory, the bootstrap's peak RSS and the
// latency sluice adds to each invocation: what the invoke waited minus what
// the upstream spent serving the call it made (the upstream's
// GET /_bench/served, read after every invocation), so a streamed answer's
// second of provider time, and its timer's jitter, is not counted. The size
// it picks is the smallest of 128/256/512/1024 MB where the peak stays under
// 60 % of the size and both the p50 and the p99 of the added latency stay
// within 2 ms of the 1,769 MB figures.
//
//	make sizing                                   # every relaying function
//	go run ./infra/sizing -fns embeddings -n 500  # one function, more calls
//
// It needs root (to make cgroups), cgroup v2 with the memory and cpu
// controllers (memory.max, memory.peak, cpu.max) or cgroup v1's memory and
// cpu hierarchies (memory.limit_in_bytes, memory.max_usage_in_bytes,
// cpu.cfs_quota_us), aws-lambda-rie (make rie) and the bench upstream
// (make bench-tools). Latency figures are only as quiet as the machine:
// `make sizing` runs it at nice -20 so that other work on a shared machine
// does not preempt the bootstrap (the cgroup's quota still caps it).
package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/sluice-gateway/sluice/pkg/lambdaedge/rie"
)

// oneVCPU is the memory size at which Lambda gives a function one vCPU.
const oneVCPU = 1769

// candidates are the sizes sizing chooses from; oneVCPU is the reference.
var candidates = []int{128, 256, 512, 1024}

// workload is a function sizing measures, the sample event it is driven
// with, and the bench upstream route its invocation calls once ("" for a
// function that calls none: all its time is its own).
type workload struct{ fn, event, route string }

// workloads are the functions sizing measures by default: the relaying
// functions, whose bench workload is one model call through the bench
// upstream.
var workloads = []workload{
	{"chat-completions", "events/chat-completions/create-stream.json", "openai.chat"},
	{"embeddings", "events/embeddings/create.json", "openai.embeddings"},
	{"moderations", "events/moderations/create.json", "openai.moderations"},
	{"completions", "events/completions/create.json", "openai.completions"},
	{"passthrough-anthropic", "events/passthrough-anthropic/messages-stream.json", "anthropic.messages"},
	{"models", "events/models/list.json", ""},
	{"health", "events/health/liveliness.json", ""},
}

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "sizing:", err)
		os.Exit(1)
	}
}

func run() error {
	fns := flag.String("fns", "", "comma-separated functions to measure (default: every relaying function)")
	n := flag.Int("n", 200, "invocations per size, after one warm-up")
	upstreamBin := flag.String("upstream", ".bench/bin/upstream", "the bench upstream binary (make bench-tools)")
	out := flag.String("json", ".bench/sizing.json", "where to write the figures")
	period := flag.Duration("period", 20*time.Millisecond, "the CPU quota's period (Lambda throttles per 20 ms slice)")
	latency := flag.Duration("upstream-latency", 200*time.Millisecond, "the bench upstream's delay before answering: the provider's time a relaying call waits")
	interval := flag.Duration("stream-interval", 5*time.Millisecond, "the bench upstream's pause between streamed chunks (a 200-chunk answer in about a second, as a model writes it)")
	workdir := flag.String("workdir", defaultWorkdir(), "where the functions' builds, config and data (bbolt) go: a tmpfs, so that the bbolt writes on an invocation's path wait on memory, not on a shared disk")
	flag.Parse()
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()

	if *period < time.Millisecond || *period > time.Second {
		return fmt.Errorf("-period %v: the kernel takes 1 ms to 1 s", *period)
	}
	cg, err := detectCgroups(int(period.Microseconds()))
	if err != nil {
		return err
	}
	rieBin, err := rie.Find()
	if err != nil {
		return err
	}
	started := time.Now()
	up, stopUpstream, err := startUpstream(ctx, *upstreamBin, *latency, *interval)
	if err != nil {
		return err
	}
	defer stopUpstream()
	work, err := os.MkdirTemp(*workdir, "sluice-sizing-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(work)
	conf := filepath.Join(work, "sluice.yaml")
	if err := os.WriteFile(conf, []byte(config(up.url)), 0o644); err != nil {
		return err
	}
	selected := workloads
	if *fns != "" {
		want := strings.Split(*fns, ",")
		selected = slices.DeleteFunc(slices.Clone(workloads), func(w workload) bool { return !slices.Contains(want, w.fn) })
		if len(selected) != len(want) {
			return fmt.Errorf("-fns %s: sizing knows workloads for %v", *fns, workloadNames())
		}
	}
	pkgs := make([]string, len(selected))
	for i, w := range selected {
		pkgs[i] = "./functions/" + w.fn
	}
	fmt.Fprintf(os.Stderr, "building %d functions for this machine…\n", len(pkgs))
	bins, err := rie.Build(ctx, ".", work, "", "", pkgs...)
	if err != nil {
		return err
	}
	sampleEnv, err := readEnvFile("events/sample.env")
	if err != nil {
		return err
	}
	rep := report{Cgroups: cg.version, Invocations: *n, Taken: started.UTC().Format(time.RFC3339),
		PeriodMS: ms(*period), UpstreamLatencyMS: ms(*latency), StreamIntervalMS: ms(*interval)}
	for _, w := range selected {
		event, err := os.ReadFile(w.event)
		if err != nil {
			return err
		}
		fr := functionReport{Function: w.fn, Event: w.event}
		for _, size := range append(slices.Clone(candidates), oneVCPU) {
			env := append(rie.LambdaEnv(w.fn), sampleEnv...)
			env = append(env, "SLUICE_CONFIG="+conf, "SLUICE_BACKEND=local", "SLUICE_DATA_DIR="+filepath.Join(work, fmt.Sprintf("data-%s-%d", w.fn, size)),
				"AWS_LAMBDA_FUNCTION_MEMORY_SIZE="+strconv.Itoa(size))
			m, err := measure(ctx, cg, rieBin, bins[w.fn], env, event, up, w.route, size, *n)
			if err != nil {
				m = measurement{SizeMB: size, Error: err.Error()}
			}
			fmt.Fprintf(os.Stderr, "%s @ %d MB: peak %.1f MB (RSS %.1f MB), added p50 %.2f / p99 %.2f ms, to upstream p50 %.2f / p99 %.2f ms, invocation p50 %.2f / p99 %.2f ms (%s) %s\n",
				w.fn, size, m.PeakMB, m.RSSMB, m.AddedP50MS, m.AddedP99MS, m.ToUpstreamP50MS, m.ToUpstreamP99MS, m.P50MS, m.P99MS, time.Since(started).Round(time.Second), m.Error)
			fr.Sizes = append(fr.Sizes, m)
		}
		fr.choose()
		rep.Functions = append(rep.Functions, fr)
	}
	rep.ElapsedS = time.Since(started).Seconds()
	if err := os.MkdirAll(filepath.Dir(*out), 0o755); err != nil {
		return err
	}
	b, _ := json.MarshalIndent(rep, "", "  ")
	if err := os.WriteFile(*out, append(b, '\n'), 0o644); err != nil {
		return err
	}
	rep.print(os.Stdout)
	return nil
}

// defaultWorkdir is /dev/shm where it is a directory (a tmpfs on Linux),
// else the system's temporary directory.
func defaultWorkdir() string {
	if fi, err := os.Stat("/dev/shm"); err == nil && fi.IsDir() {
		return "/dev/shm"
	}
	return os.TempDir()
}

func workloadNames() []string {
	var names []string
	for _, w := range workloads {
		names = append(names, w.fn)
	}
	return names
}

// report is sizing's output.
type report struct {
	Taken       string `json:"taken"`
	Cgroups     string `json:"cgroups"`
	Invocations int    `json:"invocations_per_size"`
	// ElapsedS is how long the run took, building included.
	ElapsedS float64 `json:"elapsed_s"`
	// PeriodMS is the CPU quota's period; UpstreamLatencyMS the provider's
	// delay every model call waits (in each invocation's p50/p99, not in
	// the added latency), StreamIntervalMS the pause between a streamed
	// answer's chunks.
	PeriodMS          float64          `json:"cpu_period_ms"`
	UpstreamLatencyMS float64          `json:"upstream_latency_ms"`
	StreamIntervalMS  float64          `json:"stream_interval_ms"`
	Functions         []functionReport `json:"functions"`
}

type functionReport struct {
	Function string        `json:"function"`
	Event    string        `json:"event"`
	Sizes    []measurement `json:"sizes"`
	// ChosenMB is the smallest candidate that passes (0: none does).
	ChosenMB int    `json:"chosen_mb"`
	Why      string `json:"why,omitempty"`
}

// measurement is one function at one size.
type measurement struct {
	SizeMB int `json:"size_mb"`
	// PeakMB is the cgroup's peak memory (memory.peak, or v1's
	// memory.max_usage_in_bytes): RSS and the page cache it charged.
	PeakMB float64 `json:"peak_mb"`
	// RSSMB is the bootstrap's peak resident set (VmHWM).
	RSSMB float64 `json:"rss_mb"`
	// AddedP50MS and AddedP99MS are the latency sluice adds to an
	// invocation: what the invoke waited minus the upstream's serve time.
	// The rule reads these.
	AddedP50MS float64 `json:"added_p50_ms"`
	AddedP99MS float64 `json:"added_p99_ms"`
	// ToUpstreamP50MS and ToUpstreamP99MS are from the invoke to the
	// upstream taking the request: sluice's part of the time to first byte
	// before the provider starts (the emulator buffers the answer, so the
	// relay of the first chunk is not seen). 0 for a function that calls no
	// upstream.
	ToUpstreamP50MS float64 `json:"to_upstream_p50_ms"`
	ToUpstreamP99MS float64 `json:"to_upstream_p99_ms"`
	// P50MS and P99MS are the whole invocation, the provider's time included.
	P50MS float64 `json:"p50_ms"`
	P99MS float64 `json:"p99_ms"`
	Error string  `json:"error,omitempty"`
}

// usedMB is what the 60 % rule holds to the size: the larger of the
// cgroup's peak and the peak RSS. (Under cgroup v1 the bootstrap's text
// pages, cached by an earlier run, are charged to the group that first read
// them, so the RSS can be the larger.)
func (m measurement) usedMB() float64 { return max(m.PeakMB, m.RSSMB) }

// addedSlackMS is how far a candidate's added p50 and p99 may be above the
// one-vCPU figures.
const addedSlackMS = 2

// noisyReferenceMS is how far the one-vCPU added p99 may be above its p50
// before the run is too noisy to decide: with a whole vCPU nothing throttles
// the function, so a wider spread is the machine's other work, and a
// reference that high would let every size pass.
const noisyReferenceMS = 10

// choose picks the smallest candidate whose peak is under 60 % of its size
// and whose added latency, at the median and at the p99, is within 2 ms of
// the one-vCPU figure (the p99 is the rule; the median keeps a p99
// of few samples from passing a size that is slower on most calls). A
// reference whose own p99 is far above its p50 decides nothing.
func (f *functionReport) choose() {
	ref := f.Sizes[len(f.Sizes)-1]
	if ref.Error != "" {
		f.Why = "no 1,769 MB reference: " + ref.Error
		return
	}
	if ref.AddedP99MS > ref.AddedP50MS+noisyReferenceMS {
		f.Why = fmt.Sprintf("the 1,769 MB reference is noisy (added p50 %.2f ms, p99 %.2f ms): rerun on a quiet machine, or with more invocations", ref.AddedP50MS, ref.AddedP99MS)
		return
	}
	for _, m := range f.Sizes[:len(f.Sizes)-1] {
		if m.Error == "" && m.usedMB() < 0.6*float64(m.SizeMB) &&
			m.AddedP50MS <= ref.AddedP50MS+addedSlackMS && m.AddedP99MS <= ref.AddedP99MS+addedSlackMS {
			f.ChosenMB = m.SizeMB
			return
		}
	}
	f.Why = "no candidate within 60 % memory and added p50 and p99 + 2 ms"
}

func (r report) print(w io.Writer) {
	fmt.Fprintf(w, "sizing %s (cgroup %s, %d invocations per size after a warm-up, CPU period %.0f ms, provider latency %.0f ms, %.0f ms between streamed chunks; %.0f s)\n",
		r.Taken, r.Cgroups, r.Invocations, r.PeriodMS, r.UpstreamLatencyMS, r.StreamIntervalMS, r.ElapsedS)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "function\tsize\tpeak (cgroup)\tpeak RSS\tadded p50 / p99\tto upstream p50 / p99\tinvocation p50 / p99\t")
	for _, f := range r.Functions {
		for _, m := range f.Sizes {
			pick := ""
			if m.SizeMB == f.ChosenMB {
				pick = "← picked"
			}
			if m.Error != "" {
				fmt.Fprintf(tw, "%s\t%d MB\t%s\t\t\t\t\t\n", f.Function, m.SizeMB, m.Error)
				continue
			}
			fmt.Fprintf(tw, "%s\t%d MB\t%.1f MB\t%.1f MB\t%.2f / %.2f ms\t%.2f / %.2f ms\t%.2f / %.2f ms\t%s\n", f.Function, m.SizeMB, m.PeakMB, m.RSSMB,
				m.AddedP50MS, m.AddedP99MS, m.ToUpstreamP50MS, m.ToUpstreamP99MS, m.P50MS, m.P99MS, pick)
		}
		if f.ChosenMB == 0 {
			fmt.Fprintf(tw, "%s\t—\t\t\t\t\t\t%s\n", f.Function, f.Why)
		}
	}
	tw.Flush()
}

// measure runs the bootstrap at size: one warm-up invocation (the cold
// start), then n timed ones, each matched to the upstream call it made.
func measure(ctx context.Context, cg *cgroups, rieBin, bin string, env []string, event []byte, up *upstream, route string, size, n int) (measurement, error) {
	m := measurement{SizeMB: size}
	g, err := cg.create(fmt.Sprintf("sluice-sizing-%d-%d", os.Getpid(), size), size)
	if err != nil {
		return m, err
	}
	defer g.remove()
	if _, err := up.takeServed(ctx); err != nil { // a failed size's leftovers
		return m, err
	}
	e, err := rie.Start(ctx, rieBin, bin, rie.Options{Env: env, Timeout: 30 * time.Second, Exec: g.exec()})
	if err != nil {
		return m, err
	}
	defer e.Stop()
	total := make([]time.Duration, 0, n)
	added := make([]time.Duration, 0, n)
	toUpstream := make([]time.Duration, 0, n)
	for i := 0; i <= n; i++ {
		ictx, cancel := context.WithTimeout(ctx, 30*time.Second)
		res, err := e.Invoke(ictx, event)
		cancel()
		if err != nil {
			return m, err
		}
		if res.Error != nil {
			return m, fmt.Errorf("function error: %v", res.Error)
		}
		records, err := up.takeServed(ctx)
		if err != nil {
			return m, err
		}
		t, err := attribute(res.Sent, res.Done, records, route)
		if err != nil {
			return m, fmt.Errorf("invocation %d: %w", i, err)
		}
		if i > 0 {
			total, added, toUpstream = append(total, t.total), append(added, t.added), append(toUpstream, t.toUpstream)
		}
	}
	m.P50MS, m.P99MS = percentiles(total)
	m.AddedP50MS, m.AddedP99MS = percentiles(added)
	m.ToUpstreamP50MS, m.ToUpstreamP99MS = percentiles(toUpstream)
	if m.PeakMB, err = g.peakMB(); err != nil {
		return m, err
	}
	m.RSSMB = g.rssMB()
	return m, nil
}

// cgroups is where sizing makes its groups: cgroup v2's unified hierarchy
// when it has the memory and cpu controllers, else v1's memory and cpu
// hierarchies.
type cgroups struct {
	version  string // "v2" or "v1"
	v2       string
	mem, cpu string // v1 hierarchy roots
	periodUS int
}

func detectCgroups(periodUS int) (*cgroups, error) {
	for _, root := range []string{"/sys/fs/cgroup", "/sys/fs/cgroup/unified"} {
		ctrl, err := os.ReadFile(filepath.Join(root, "cgroup.controllers"))
		if err == nil && strings.Contains(" "+string(ctrl)+" ", " memory ") && strings.Contains(" "+string(ctrl), " cpu") {
			return &cgroups{version: "v2", v2: root, periodUS: periodUS}, nil
		}
	}
	mem, cpu := "/sys/fs/cgroup/memory", "/sys/fs/cgroup/cpu"
	if _, err := os.Stat(filepath.Join(mem, "memory.limit_in_bytes")); err == nil {
		if _, err := os.Stat(filepath.Join(cpu, "cpu.cfs_quota_us")); err == nil {
			return &cgroups{version: "v1", mem: mem, cpu: cpu, periodUS: periodUS}, nil
		}
	}
	return nil, errors.New("no cgroup hierarchy with the memory and cpu controllers (v2 cgroup.controllers, or v1 memory and cpu mounts) under /sys/fs/cgroup")
}

// group is one candidate's cgroup (in v1, one in each hierarchy).
type group struct {
	cg   *cgroups
	dirs []string // the group's directories; dirs[0] holds the memory files
}

func (c *cgroups) create(name string, sizeMB int) (*group, error) {
	quota := c.periodUS * sizeMB / oneVCPU
	limit := strconv.Itoa(sizeMB << 20)
	var g group
	g.cg = c
	write := func(dir, file, v string) error {
		if err := os.WriteFile(filepath.Join(dir, file), []byte(v), 0o644); err != nil {
			return fmt.Errorf("cgroup %s: %w", filepath.Join(dir, file), err)
		}
		return nil
	}
	mk := func(dir string) error {
		if err := os.Mkdir(dir, 0o755); err != nil {
			return fmt.Errorf("make cgroup (needs root): %w", err)
		}
		g.dirs = append(g.dirs, dir)
		return nil
	}
	var err error
	switch c.version {
	case "v2":
		dir := filepath.Join(c.v2, name)
		if err = mk(dir); err == nil {
			err = errors.Join(write(dir, "memory.max", limit), write(dir, "memory.swap.max", "0"),
				write(dir, "cpu.max", fmt.Sprintf("%d %d", quota, c.periodUS)))
		}
	default:
		mem, cpu := filepath.Join(c.mem, name), filepath.Join(c.cpu, name)
		if err = mk(mem); err == nil {
			err = write(mem, "memory.limit_in_bytes", limit)
		}
		if err == nil {
			if err = mk(cpu); err == nil {
				err = errors.Join(write(cpu, "cpu.cfs_period_us", strconv.Itoa(c.periodUS)), write(cpu, "cpu.cfs_quota_us", strconv.Itoa(quota)))
			}
		}
	}
	if err != nil {
		g.remove()
		return nil, err
	}
	return &g, nil
}

// exec is the command the emulator runs: a shell that moves itself into
// the group, then execs the bootstrap (its last argument), so the group
// holds the function and not the emulator.
func (g *group) exec() []string {
	script := ""
	for _, d := range g.dirs {
		script += fmt.Sprintf("echo $$ > %q/cgroup.procs && ", d)
	}
	return []string{"/bin/sh", "-c", script + `exec "$0"`}
}

func (g *group) peakMB() (float64, error) {
	file := "memory.peak"
	if g.cg.version == "v1" {
		file = "memory.max_usage_in_bytes"
	}
	b, err := os.ReadFile(filepath.Join(g.dirs[0], file))
	if err != nil {
		return 0, fmt.Errorf("read %s: %w", file, err)
	}
	v, err := strconv.ParseInt(strings.TrimSpace(string(b)), 10, 64)
	return float64(v) / (1 << 20), err
}

// rssMB is the peak RSS (VmHWM) of the group's processes, summed.
func (g *group) rssMB() float64 {
	b, _ := os.ReadFile(filepath.Join(g.dirs[0], "cgroup.procs"))
	var kb float64
	for _, pid := range strings.Fields(string(b)) {
		f, err := os.Open(filepath.Join("/proc", pid, "status"))
		if err != nil {
			continue
		}
		sc := bufio.NewScanner(f)
		for sc.Scan() {
			if v, ok := strings.CutPrefix(sc.Text(), "VmHWM:"); ok {
				x, _ := strconv.ParseFloat(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 64)
				kb += x
			}
		}
		f.Close()
	}
	return kb / 1024
}

// remove deletes the group's directories (empty once the emulator, and so
// the bootstrap, was stopped).
func (g *group) remove() {
	for _, d := range g.dirs {
		for range 50 {
			if err := os.Remove(d); err == nil || errors.Is(err, os.ErrNotExist) {
				break
			}
			time.Sleep(20 * time.Millisecond) // the killed process is still being reaped
		}
	}
}

// startUpstream runs the bench upstream on a free 127.0.0.1 port, answering
// model calls after latency, streaming chunks interval apart and keeping
// each request's serve time (the first line it prints names its URL).
func startUpstream(ctx context.Context, bin string, latency, interval time.Duration) (*upstream, func(), error) {
	cmd := exec.CommandContext(ctx, bin, "-addr", "127.0.0.1:0", "-latency", latency.String(), "-stream-interval", interval.String(), "-record-served")
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return nil, nil, err
	}
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		return nil, nil, fmt.Errorf("start the bench upstream %s (make bench-tools): %w", bin, err)
	}
	stop := func() { _ = cmd.Process.Kill(); _ = cmd.Wait() }
	line, err := bufio.NewReader(stdout).ReadString('\n')
	if err != nil {
		stop()
		return nil, nil, fmt.Errorf("bench upstream: %w", err)
	}
	_, url, ok := strings.Cut(strings.TrimSpace(line), "listening on ")
	if !ok {
		stop()
		return nil, nil, fmt.Errorf("bench upstream said %q", line)
	}
	go io.Copy(io.Discard, stdout)
	return &upstream{url: url, client: &http.Client{Timeout: 10 * time.Second}}, stop, nil
}

// config points every model the workloads' sample events name, and the
// Anthropic passthrough, at the bench upstream.
func config(upstream string) string {
	return fmt.Sprintf(`# Generated by infra/sizing: every deployment is the bench upstream.
model_list:
  - model_name: text-embedding-3-small
    litellm_params: {model: openai/text-embedding-3-small, api_base: %[1]s/v1, api_key: sk-upstream}
  - model_name: gpt-4o-mini
    litellm_params: {model: openai/gpt-4o-mini, api_base: %[1]s/v1, api_key: sk-upstream}
  - model_name: gpt-3.5-turbo-instruct
    litellm_params: {model: openai/gpt-3.5-turbo-instruct, api_base: %[1]s/v1, api_key: sk-upstream}
  - model_name: omni-moderation-latest
    litellm_params: {model: openai/omni-moderation-latest, api_base: %[1]s/v1, api_key: sk-upstream}
passthrough:
  anthropic: {api_base: %[1]s, api_key: sk-ant-upstream}
`, upstream)
}

// readEnvFile reads NAME=value lines, skipping blanks and # comments.
func readEnvFile(path string) ([]string, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var out []string
	for _, line := range strings.Split(string(b), "\n") {
		line = strings.TrimSpace(line)
		if line != "" && !strings.HasPrefix(line, "#") && !strings.HasPrefix(line, "SLUICE_CONFIG=") {
			out = append(out, line)
		}
	}
	return out, nil
}
