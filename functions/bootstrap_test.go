package functions_test

import (
	"bytes"
	"context"
	"debug/buildinfo"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"sync"
	"testing"
	"text/tabwriter"
	"time"

	"github.com/aws/aws-lambda-go/events"

	"github.com/sluice-gateway/sluice/pkg/lambdaedge/rie"
	"github.com/sluice-gateway/sluice/pkg/lambdaedge/rie/rietest"
	"github.com/sluice-gateway/sluice/pkg/lambdaedge/runtimeapi"
	"github.com/sluice-gateway/sluice/pkg/server"
	awsstore "github.com/sluice-gateway/sluice/pkg/store/aws"
	"github.com/sluice-gateway/sluice/pkg/store/aws/awstest"
)

// Every function binary links the same packages and differs only in its
// function name, so building all of them on every test run (a link each,
// ~20 of them, on 2 cores) buys little: by default the bootstrap tests build
// a representative set — a buffered JSON function (admin), a binary upload
// (files-upload) and a streamed download of it by another process
// (file-content), a streamed SSE passthrough (passthrough-anthropic) and a
// streamed chat completion (chat-completions, whose usage chunk the gateway
// meters on its way), and a batch created (batches-create), run by the
// queue worker (batch-worker), read and cancelled (batch-get, batch-cancel).
// SLUICE_TEST_ALL_BOOTSTRAPS=1 (make test sets it) builds and runs every
// function and job; the in-process test runs every function's samples on
// every run either way.
var representative = []string{"admin", "files-upload", "file-content", "passthrough-anthropic", "chat-completions", "batches-create", "batch-worker", "batch-get", "batch-cancel"}

// allBootstrapsEnv makes the bootstrap tests build and run every function.
const allBootstrapsEnv = "SLUICE_TEST_ALL_BOOTSTRAPS"

// maxBootstrapBytes is the size limit of a function's binary: 18.7 MB
// before metrics and traces (linux/amd64), which added 2.3 MB for
// prometheus/client_golang and 0.9 MB for the OpenTelemetry SDK (the OTLP
// exporter, 14 MB with gRPC, is linked only by the local process), then
// 1.05 MB for the o200k_base ranks of count_tokens (pkg/tokenizer;
// 23.58 MB measured), then 0.24 MB for the inlining of profile-guided
// optimization (23.99 MB).
const maxBootstrapBytes = 24_500_000

// maxColdStart bounds exec → first answer in the tests. The target is 100 ms
// (make lambda-startup measures it); this bound only catches an init that
// does something slow (a network call, a key generation), not a busy machine.
const maxColdStart = 3 * time.Second

var (
	buildOnce  sync.Once
	bootstraps map[string]string // function → bootstrap path
	buildDir   string
	buildErr   error
	buildTime  time.Duration
)

func TestMain(m *testing.M) {
	code := m.Run()
	if buildDir != "" {
		os.RemoveAll(buildDir)
	}
	os.Exit(code)
}

// builtBootstraps builds the functions under test once per test run, for
// this machine, with the production flags, in one go command.
func builtBootstraps(t *testing.T) map[string]string {
	t.Helper()
	buildOnce.Do(func() {
		fns := append(server.Functions(), jobFunctions()...)
		if os.Getenv(allBootstrapsEnv) != "1" {
			fns = slices.DeleteFunc(slices.Clone(representative), func(fn string) bool { return !slices.Contains(fns, fn) })
		}
		if buildDir, buildErr = os.MkdirTemp("", "sluice-functions-"); buildErr != nil {
			return
		}
		pkgs := make([]string, len(fns))
		for i, fn := range fns {
			pkgs[i] = "./functions/" + fn
		}
		ctx, cancel := context.WithTimeout(context.Background(), 8*time.Minute)
		defer cancel()
		start := time.Now()
		bootstraps, buildErr = rie.Build(ctx, "..", buildDir, "", "", pkgs...)
		buildTime = time.Since(start)
	})
	if buildErr != nil {
		t.Fatal(buildErr)
	}
	return bootstraps
}

func TestBootstrapSizes(t *testing.T) {
	for fn, path := range builtBootstraps(t) {
		fi, err := os.Stat(path)
		if err != nil {
			t.Fatal(err)
		}
		if fi.Size() > maxBootstrapBytes {
			t.Errorf("%s: bootstrap is %d bytes, over %d", fn, fi.Size(), maxBootstrapBytes)
		}
		t.Logf("%s: %.2f MB", fn, float64(fi.Size())/1e6)
	}
}

// TestBootstrapsProfileGuided checks that the bootstraps are optimized with
// the profile of make pgo, as the deployed ones are (infra/lambda.mk).
func TestBootstrapsProfileGuided(t *testing.T) {
	for fn, path := range builtBootstraps(t) {
		info, err := buildinfo.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		var pgo string
		for _, s := range info.Settings {
			if s.Key == "-pgo" {
				pgo = s.Value
			}
		}
		if want := filepath.Base(rie.Profile); pgo != want {
			t.Errorf("%s: built with -pgo=%q, want %q", fn, pgo, want)
		}
	}
}

// TestBootstrapsLocal runs the scenario's steps for the built functions
// through their bootstraps under aws-lambda-rie, one process at a time over
// one local data dir, the way Lambda runs them, then the other jobs' samples.
// The emulator returns a streamed answer whole, after the handler returned:
// TestBootstrapsStreamLive proves the streamed steps' first event leaves
// while the handler runs.
func TestBootstrapsLocal(t *testing.T) {
	rieBin := rietest.Binary(t)
	bins := builtBootstraps(t)
	w := newWorld(t)
	env := functionEnv(t, w, map[string]string{"SLUICE_BACKEND": "local", "SLUICE_DATA_DIR": t.TempDir()})
	runBootstraps(t, rieBin, bins, env)
	runJobSamples(t, rieBin, bins, env)
}

// TestBootstrapsAWS is the same on the AWS adapters, against moto_server
// (skipped without SLUICE_TEST_AWS_ENDPOINT).
func TestBootstrapsAWS(t *testing.T) {
	_, res := awstest.Resources(t)
	rieBin := rietest.Binary(t)
	bins := builtBootstraps(t)
	w := newWorld(t)
	runBootstraps(t, rieBin, bins, functionEnv(t, w, awsEnv(res)))
}

// awsEnv is a function's environment on the AWS adapters against moto_server.
func awsEnv(res awsstore.Resources) map[string]string {
	extra := map[string]string{
		"SLUICE_BACKEND":        "aws",
		"AWS_ENDPOINT_URL":      os.Getenv(awstest.EndpointEnv),
		"AWS_ACCESS_KEY_ID":     "test",
		"AWS_SECRET_ACCESS_KEY": "test",
	}
	for _, kv := range res.Env() {
		k, v, _ := strings.Cut(kv, "=")
		extra[k] = v
	}
	return extra
}

// logSink collects the functions' output, shown when the test fails.
func logSink(t *testing.T) io.Writer {
	var logs bytes.Buffer
	var mu sync.Mutex
	t.Cleanup(func() {
		if t.Failed() {
			mu.Lock()
			t.Logf("function output:\n%s", logs.String())
			mu.Unlock()
		}
	})
	return writerFunc(func(p []byte) (int, error) {
		mu.Lock()
		defer mu.Unlock()
		return logs.Write(p)
	})
}

// emulators runs one function at a time under aws-lambda-rie (the local
// store's file is locked by the process that has it open).
type emulators struct {
	t      *testing.T
	rieBin string
	env    map[string]string
	out    io.Writer
	fn     string
	cur    *rie.Emulator
}

// get returns fn's emulator, starting it (and stopping the previous
// function's) when needed; cold is true when it was started now.
func (es *emulators) get(fn, bin string) (e *rie.Emulator, cold bool) {
	if es.cur != nil && es.fn == fn {
		return es.cur, false
	}
	es.stop()
	e, err := rie.Start(context.Background(), es.rieBin, bin, rie.Options{
		Env: processEnv(fn, es.env), Out: es.out, Timeout: 20 * time.Second,
	})
	if err != nil {
		es.t.Fatal(err)
	}
	es.fn, es.cur = fn, e
	return e, true
}

func (es *emulators) stop() {
	if es.cur != nil {
		es.cur.Stop()
		es.cur = nil
	}
}

// runBootstraps runs the scenario's steps whose function is built.
func runBootstraps(t *testing.T, rieBin string, bins map[string]string, env map[string]string) {
	es := &emulators{t: t, rieBin: rieBin, env: env, out: logSink(t)}
	defer es.stop()
	coldStarts := map[string]time.Duration{}
	r := &run{ids: map[string]string{}}
	ran := 0
	for _, s := range scenario {
		fn := s.function()
		bin, ok := bins[fn]
		if !ok {
			continue
		}
		e, cold := es.get(fn, bin)
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		res, err := e.Invoke(ctx, r.event(t, s))
		cancel()
		if err != nil {
			t.Fatalf("%s: %v", s.sample, err)
		}
		if res.Error != nil {
			t.Fatalf("%s: function error %v: %s", s.sample, res.Error, res.Payload)
		}
		if cold {
			coldStarts[fn] = res.Done.Sub(e.Started)
		}
		streams, _ := server.Streams(fn)
		// A streamed answer decodes only as a stream (prelude, delimiter,
		// body) and a buffered one only as a proxy response.
		r.check(t, s, streams, res.Payload)
		if s.firstEvent != "" {
			first, last := bytes.Index(res.Payload, []byte(s.firstEvent)), bytes.Index(res.Payload, []byte(s.contains))
			if first < 0 || last < first {
				t.Errorf("%s: the first event %s is not before %s: out of order", s.sample, s.firstEvent, s.contains)
			}
		}
		ran++
	}
	if ran == 0 {
		t.Fatal("no scenario step ran: no built function has samples")
	}
	reportColdStarts(t, coldStarts)
}

// runJobSamples runs the samples of the built jobs the scenario does not
// run: a scheduled run answers no error, a queue job no failed message.
func runJobSamples(t *testing.T, rieBin string, bins map[string]string, env map[string]string) {
	inScenario := map[string]bool{}
	for _, s := range scenario {
		inScenario[s.function()] = true
	}
	es := &emulators{t: t, rieBin: rieBin, env: env, out: logSink(t)}
	defer es.stop()
	for _, j := range server.Jobs() {
		bin, ok := bins[j.Name]
		if !ok || inScenario[j.Name] {
			continue
		}
		samples, _ := filepath.Glob(filepath.Join("..", "events", j.Name, "*.json"))
		for _, sample := range samples {
			event, err := os.ReadFile(sample)
			if err != nil {
				t.Fatal(err)
			}
			e, _ := es.get(j.Name, bin)
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			res, err := e.Invoke(ctx, event)
			cancel()
			if err != nil {
				t.Fatalf("%s: %v", sample, err)
			}
			if res.Error != nil {
				t.Fatalf("%s: function error %v", sample, res.Error)
			}
			if j.Queue == "" {
				continue
			}
			var resp events.SQSEventResponse
			if err := json.Unmarshal(res.Payload, &resp); err != nil || len(resp.BatchItemFailures) != 0 {
				t.Errorf("%s: answer %s (%v): want no failed message", sample, res.Payload, err)
			}
		}
	}
}

// TestBootstrapsStreamLive runs the scenario's streamed steps under the
// Runtime API harness (pkg/lambdaedge/runtimeapi), which sees an answer's
// chunks as they arrive — the emulator does not: the first event must reach
// the Runtime API while the handler still runs (the fake provider holds the
// rest of its stream until then).
func TestBootstrapsStreamLive(t *testing.T) {
	bins := builtBootstraps(t)
	w := newWorld(t)
	env := functionEnv(t, w, map[string]string{"SLUICE_BACKEND": "local", "SLUICE_DATA_DIR": t.TempDir()})
	out := logSink(t)
	r := &run{ids: map[string]string{}}
	ran := 0
	for _, s := range scenario {
		bin, ok := bins[s.function()]
		if !ok || s.firstEvent == "" {
			continue
		}
		srv, err := runtimeapi.NewServer()
		if err != nil {
			t.Fatal(err)
		}
		srv.Timeout = 20 * time.Second
		p, err := srv.Exec(bin, processEnv(s.function(), env), out)
		if err != nil {
			t.Fatal(err)
		}
		release := w.holdNextStream()
		var firstEventAt time.Time
		var seen bytes.Buffer
		onChunk := func(c runtimeapi.Chunk) {
			seen.Write(c.Data)
			if firstEventAt.IsZero() && bytes.Contains(seen.Bytes(), []byte(s.firstEvent)) {
				firstEventAt = c.At
				release() // only now may the provider, and so the handler, go on
			}
		}
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		res, err := srv.Invoke(ctx, r.event(t, s), onChunk)
		cancel()
		release()
		p.Stop()
		srv.Close()
		if err != nil {
			t.Fatalf("%s: %v — the first event never reached the Runtime API while the handler ran (seen: %q)", s.sample, err, seen.String())
		}
		if res.Error != nil {
			t.Fatalf("%s: function error %v: %s", s.sample, res.Error, res.Body)
		}
		if !res.Streamed {
			t.Errorf("%s: answered buffered, the route table says streamed", s.sample)
		}
		if firstEventAt.IsZero() || !firstEventAt.Before(res.Done) || len(res.Chunks) < 2 {
			t.Errorf("%s: first event at %v, answer done at %v in %d chunks: not streamed", s.sample, firstEventAt, res.Done, len(res.Chunks))
		}
		r.check(t, s, true, res.Body)
		ran++
	}
	if ran == 0 {
		t.Fatal("no streamed step ran")
	}
}

// processEnv is a function process's environment: Lambda's variables, then env.
func processEnv(fn string, env map[string]string) []string {
	out := rie.LambdaEnv(fn)
	for k, v := range env {
		out = append(out, k+"="+v)
	}
	return out
}

func reportColdStarts(t *testing.T, coldStarts map[string]time.Duration) {
	fns := make([]string, 0, len(coldStarts))
	for fn := range coldStarts {
		fns = append(fns, fn)
	}
	sort.Strings(fns)
	var b strings.Builder
	tw := tabwriter.NewWriter(&b, 0, 0, 2, ' ', 0)
	fmt.Fprintf(tw, "function\texec → first answer\n")
	for _, fn := range fns {
		fmt.Fprintf(tw, "%s\t%.1f ms\n", fn, float64(coldStarts[fn].Microseconds())/1000)
		if coldStarts[fn] > maxColdStart {
			t.Errorf("%s: cold start took %v (over %v): does its init do something slow?", fn, coldStarts[fn], maxColdStart)
		}
	}
	tw.Flush()
	t.Logf("cold starts (build took %v):\n%s", buildTime.Round(time.Millisecond), b.String())
}

type writerFunc func([]byte) (int, error)

func (f writerFunc) Write(p []byte) (int, error) { return f(p) }
