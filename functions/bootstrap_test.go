package functions_test

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"slices"
	"sort"
	"strings"
	"sync"
	"testing"
	"text/tabwriter"
	"time"

	"github.com/sluice-gateway/sluice/pkg/lambdaedge/runtimeapi"
	"github.com/sluice-gateway/sluice/pkg/server"
	"github.com/sluice-gateway/sluice/pkg/store/aws/awstest"
)

// Every function binary links the same packages and differs only in its
// function name, so building all of them on every test run (a link each,
// ~20 of them, on 2 cores) buys little: by default the bootstrap tests build
// a representative set — a buffered JSON function (admin), a binary upload
// (files-upload) and a streamed download of it by another process
// (file-content), a streamed SSE passthrough (passthrough-anthropic) and a
// streamed chat completion (chat-completions, whose usage chunk the gateway
// meters on its way). SLUICE_TEST_ALL_BOOTSTRAPS=1 builds and runs every
// function; the in-process test runs every function's samples on every run
// either way.
var representative = []string{"admin", "files-upload", "file-content", "passthrough-anthropic", "chat-completions"}

// allBootstrapsEnv makes the bootstrap tests build and run every function.
const allBootstrapsEnv = "SLUICE_TEST_ALL_BOOTSTRAPS"

// maxBootstrapBytes is the size limit of a function's binary: 18.7 MB
// before metrics and traces (linux/amd64), which added 2.3 MB for
// prometheus/client_golang and 0.9 MB for the OpenTelemetry SDK (the OTLP
// exporter, 14 MB with gRPC, is linked only by the local process).
const maxBootstrapBytes = 23_000_000

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
		fns := server.Functions()
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
		bootstraps, buildErr = runtimeapi.Build(ctx, "..", buildDir, "", "", pkgs...)
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

// TestBootstrapsLocal runs the scenario's steps for the built functions
// through their bootstraps, one process at a time over one local data dir,
// the way Lambda runs them: exec, /next, answer. The streaming passthrough
// and chat completion prove their first event reaches the Runtime API while
// their handler still runs.
func TestBootstrapsLocal(t *testing.T) {
	bins := builtBootstraps(t)
	w := newWorld(t)
	env := functionEnv(t, w, map[string]string{"SLUICE_BACKEND": "local", "SLUICE_DATA_DIR": t.TempDir()})
	runBootstraps(t, w, bins, env)
}

// TestBootstrapsAWS is the same on the AWS adapters, against moto_server
// (skipped without SLUICE_TEST_AWS_ENDPOINT).
func TestBootstrapsAWS(t *testing.T) {
	_, res := awstest.Resources(t)
	bins := builtBootstraps(t)
	w := newWorld(t)
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
	runBootstraps(t, w, bins, functionEnv(t, w, extra))
}

// runBootstraps runs the scenario's steps whose function is built.
func runBootstraps(t *testing.T, w *world, bins map[string]string, env map[string]string) {
	var logs bytes.Buffer
	var logsMu sync.Mutex
	out := writerFunc(func(p []byte) (int, error) {
		logsMu.Lock()
		defer logsMu.Unlock()
		return logs.Write(p)
	})
	defer func() {
		if t.Failed() {
			logsMu.Lock()
			t.Logf("function output:\n%s", logs.String())
			logsMu.Unlock()
		}
	}()

	type proc struct {
		fn string
		s  *runtimeapi.Server
		p  *runtimeapi.Process
	}
	var cur *proc
	stop := func() {
		if cur != nil {
			cur.p.Stop()
			cur.s.Close()
			cur = nil
		}
	}
	defer stop()
	coldStarts := map[string]time.Duration{}
	r := &run{ids: map[string]string{}}
	ran := 0
	for _, s := range scenario {
		fn := s.function()
		bin, ok := bins[fn]
		if !ok {
			continue
		}
		first := false
		if cur == nil || cur.fn != fn {
			// One process at a time: the local store's file is locked by
			// the process that has it open.
			stop()
			srv, err := runtimeapi.NewServer()
			if err != nil {
				t.Fatal(err)
			}
			srv.Timeout = 20 * time.Second
			p, err := srv.Exec(bin, processEnv(fn, env), out)
			if err != nil {
				t.Fatal(err)
			}
			cur, first = &proc{fn: fn, s: srv, p: p}, true
		}
		var onChunk func(runtimeapi.Chunk)
		var firstEventAt time.Time
		var seen bytes.Buffer
		if s.firstEvent != "" {
			release := w.holdNextStream()
			defer release()
			onChunk = func(c runtimeapi.Chunk) {
				seen.Write(c.Data)
				if firstEventAt.IsZero() && bytes.Contains(seen.Bytes(), []byte(s.firstEvent)) {
					firstEventAt = c.At
					release() // only now may the provider, and so the handler, go on
				}
			}
		}
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		res, err := cur.s.Invoke(ctx, r.event(t, s), onChunk)
		cancel()
		if err != nil {
			if s.firstEvent != "" {
				t.Fatalf("%s: %v — the first event never reached the Runtime API while the handler ran (seen: %q)", s.sample, err, seen.String())
			}
			t.Fatalf("%s: %v", s.sample, err)
		}
		if res.Error != nil {
			t.Fatalf("%s: function error %v: %s", s.sample, res.Error, res.Body)
		}
		if first {
			coldStarts[fn] = res.Done.Sub(cur.p.Started)
		}
		streams, _ := server.Streams(fn)
		if res.Streamed != streams {
			t.Errorf("%s: answered streamed=%v, the route table says %v", s.sample, res.Streamed, streams)
		}
		if s.firstEvent != "" && (firstEventAt.IsZero() || !firstEventAt.Before(res.Done) || len(res.Chunks) < 2) {
			t.Errorf("%s: first event at %v, answer done at %v in %d chunks: not streamed", s.sample, firstEventAt, res.Done, len(res.Chunks))
		}
		r.check(t, s, res.Streamed, res.Body)
		ran++
	}
	if ran == 0 {
		t.Fatal("no scenario step ran: no built function has samples")
	}
	reportColdStarts(t, coldStarts)
}

// processEnv is a function process's environment: Lambda's variables, then env.
func processEnv(fn string, env map[string]string) []string {
	out := runtimeapi.LambdaEnv(fn)
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
