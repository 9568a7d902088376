// Command invoke runs a Lambda function's bootstrap on events under AWS's
// Lambda Runtime Interface Emulator (aws-lambda-rie, pkg/lambdaedge/rie;
// `make rie` installs it): the Docker-free `sam local invoke`. It builds the function for this machine with the
// production flags (or takes -bin), starts it as Lambda would, sends each
// -event in turn to the same warm process, and prints the answers; with -n it
// repeats the cold start and reports start-up times.
//
//	go run ./infra/invoke -fn models -event events/models/list.json
//	go run ./infra/invoke -fn health -event events/health/liveliness.json -n 10 -json
//
// The function gets Lambda's standard variables, the SLUICE_* and AWS_*
// variables of this environment, then -env values. Unless those say
// otherwise it runs on the local backend in a fresh data dir, with the
// settings of events/sample.env (the master key the sample events carry).
package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/sluice-gateway/sluice/pkg/lambdaedge/rie"
	"github.com/sluice-gateway/sluice/pkg/server"
)

type listFlag []string

func (l *listFlag) String() string     { return strings.Join(*l, ",") }
func (l *listFlag) Set(v string) error { *l = append(*l, v); return nil }

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "invoke:", err)
		os.Exit(1)
	}
}

func run() error {
	var events, envs listFlag
	fn := flag.String("fn", "", "function name (a directory under functions/)")
	bin := flag.String("bin", "", "a built bootstrap to run instead of building functions/<fn>")
	runs := flag.Int("n", 1, "cold starts: run the whole sequence this many times")
	asJSON := flag.Bool("json", false, "print a JSON summary (timings, answers) instead of the answers")
	quiet := flag.Bool("q", false, "do not show the function's own log output")
	timeout := flag.Duration("timeout", 30*time.Second, "the function's timeout")
	rieBin := flag.String("rie", "", "the aws-lambda-rie binary (default: $SLUICE_RIE, else bin/tools/aws-lambda-rie)")
	flag.Var(&events, "event", "event file (repeatable: sent in order to the same process)")
	flag.Var(&envs, "env", "NAME=value for the function (repeatable)")
	flag.Parse()
	if *fn == "" && *bin == "" || len(events) == 0 || *runs < 1 {
		flag.Usage()
		return errors.New("need -fn (or -bin), at least one -event, and -n ≥ 1")
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()

	payloads, err := readEvents(events)
	if err != nil {
		return err
	}
	root, err := rie.ModuleRoot(".")
	if err != nil {
		return err
	}
	if *rieBin == "" {
		if *rieBin, err = rie.Find(); err != nil {
			return err
		}
	}
	name := *fn
	if name == "" {
		name = filepath.Base(filepath.Dir(*bin))
	}
	path := *bin
	if path == "" {
		dir, err := os.MkdirTemp("", "sluice-invoke-")
		if err != nil {
			return err
		}
		defer os.RemoveAll(dir)
		start := time.Now()
		built, err := rie.Build(ctx, root, dir, "", "", "./functions/"+name)
		if err != nil {
			return err
		}
		path = built[name]
		if !*asJSON {
			fmt.Fprintf(os.Stderr, "built functions/%s in %s\n", name, time.Since(start).Round(time.Millisecond))
		}
	}
	fi, err := os.Stat(path)
	if err != nil {
		return err
	}

	sum := summary{Function: name, BootstrapBytes: fi.Size()}
	var logs io.Writer = os.Stderr
	if *quiet || *asJSON {
		logs = io.Discard
	}
	for range *runs {
		env, cleanup, err := functionEnv(root, name, envs)
		if err != nil {
			return err
		}
		r, answers, err := coldStart(ctx, *rieBin, path, env, *timeout, logs, events, payloads)
		cleanup()
		if err != nil {
			return err
		}
		sum.Runs = append(sum.Runs, r)
		if !*asJSON && len(sum.Runs) == 1 {
			for i, a := range answers {
				if len(answers) > 1 {
					fmt.Printf("== %s\n", events[i])
				}
				printAnswer(os.Stdout, a)
			}
		}
	}
	sum.finish()
	return sum.print(*asJSON)
}

// readEvents reads the event files, each of which must be JSON.
func readEvents(events []string) ([][]byte, error) {
	payloads := make([][]byte, len(events))
	for i, e := range events {
		b, err := os.ReadFile(e)
		if err != nil {
			return nil, err
		}
		if !json.Valid(b) {
			return nil, fmt.Errorf("%s is not JSON", e)
		}
		payloads[i] = b
	}
	return payloads, nil
}

// print writes the summary, as JSON or as timings on stderr, and fails if
// an invocation ended in a function error.
func (s *summary) print(asJSON bool) error {
	if asJSON {
		enc := json.NewEncoder(os.Stdout)
		enc.SetIndent("", "  ")
		return enc.Encode(s)
	}
	fmt.Fprintf(os.Stderr, "%s: bootstrap %.1f MB; first answer %.1f ms after the emulator's exec (median of %d cold start(s))\n",
		s.Function, float64(s.BootstrapBytes)/1e6, s.FirstAnswerMedianMS, len(s.Runs))
	for _, r := range s.Runs[0].Invokes {
		fmt.Fprintf(os.Stderr, "  %s: %s in %.1f ms\n", r.Event, r.Outcome, r.DurationMS)
	}
	for _, r := range s.Runs {
		for _, inv := range r.Invokes {
			if inv.Error != "" {
				return fmt.Errorf("%s: function error: %s", inv.Event, inv.Error)
			}
		}
	}
	return nil
}

// summary is the -json output.
type summary struct {
	Function            string         `json:"function"`
	BootstrapBytes      int64          `json:"bootstrap_bytes"`
	InitMedianMS        float64        `json:"init_ms_median"`
	FirstAnswerMedianMS float64        `json:"first_answer_ms_median"`
	FirstAnswerMaxMS    float64        `json:"first_answer_ms_max"`
	Runs                []coldStartRun `json:"runs"`
}

// coldStartRun is one cold start.
type coldStartRun struct {
	// InitMS is the function's init as the emulator reports it (its
	// "INIT REPORT(durationMs: …)" line): the bootstrap's exec → its
	// first /next.
	InitMS float64 `json:"init_ms"`
	// FirstAnswerMS is the emulator's exec → the first event fully
	// answered (the emulator starts the bootstrap on the first event).
	FirstAnswerMS float64  `json:"first_answer_ms"`
	Invokes       []invoke `json:"invokes"`
}

type invoke struct {
	Event      string  `json:"event"`
	Outcome    string  `json:"outcome"` // "HTTP 200", "answered", "error"
	Error      string  `json:"error,omitempty"`
	DurationMS float64 `json:"duration_ms"` // sent → answer complete
}

func (s *summary) finish() {
	var inits, firsts []float64
	for _, r := range s.Runs {
		inits = append(inits, r.InitMS)
		firsts = append(firsts, r.FirstAnswerMS)
	}
	s.InitMedianMS, s.FirstAnswerMedianMS = median(inits), median(firsts)
	s.FirstAnswerMaxMS = slices.Max(firsts)
}

func median(v []float64) float64 {
	v = slices.Clone(v)
	sort.Float64s(v)
	if len(v)%2 == 1 {
		return v[len(v)/2]
	}
	return (v[len(v)/2-1] + v[len(v)/2]) / 2
}

func ms(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }

// answer is one event's result and how its payload decodes.
type answer struct {
	*rie.Result
	streamed bool
}

// coldStart starts the emulator on the bootstrap and sends every event to it.
func coldStart(ctx context.Context, rieBin, path string, env []string, timeout time.Duration, logs io.Writer,
	names []string, payloads [][]byte) (coldStartRun, []answer, error) {
	fn := ""
	for _, kv := range env {
		if v, ok := strings.CutPrefix(kv, "AWS_LAMBDA_FUNCTION_NAME="); ok {
			fn = v
		}
	}
	streamed, _ := server.Streams(fn) // a job, or a function without routes, answers buffered
	initLog := &initReport{w: logs}
	e, err := rie.Start(ctx, rieBin, path, rie.Options{Env: env, Out: initLog, Timeout: timeout})
	if err != nil {
		return coldStartRun{}, nil, err
	}
	defer e.Stop()
	var r coldStartRun
	var results []answer
	for i, payload := range payloads {
		res, err := e.Invoke(ctx, payload)
		if err != nil {
			return r, results, fmt.Errorf("%s: %w", names[i], err)
		}
		a := answer{Result: res, streamed: streamed}
		if i == 0 {
			r.FirstAnswerMS = ms(res.Done.Sub(e.Started))
		}
		inv := invoke{Event: names[i], Outcome: outcome(a), DurationMS: ms(res.Done.Sub(res.Sent))}
		if res.Error != nil {
			inv.Error = res.Error.Error()
		}
		r.Invokes = append(r.Invokes, inv)
		results = append(results, a)
	}
	e.Stop()
	r.InitMS = initLog.ms()
	return r, results, nil
}

// initReport passes the emulator's output on and keeps the init duration
// it reports: "INIT REPORT(durationMs: 22.648000)".
type initReport struct {
	w    io.Writer
	mu   sync.Mutex
	line []byte
	init float64
}

var initReportRE = regexp.MustCompile(`INIT REPORT\(durationMs: ([0-9.]+)\)`)

func (r *initReport) Write(p []byte) (int, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.line = append(r.line, p...)
	for {
		i := bytes.IndexByte(r.line, '\n')
		if i < 0 {
			break
		}
		if m := initReportRE.FindSubmatch(r.line[:i]); m != nil {
			r.init, _ = strconv.ParseFloat(string(m[1]), 64)
		}
		r.line = r.line[i+1:]
	}
	if len(r.line) > 64<<10 { // a long line without a newline is no report
		r.line = r.line[:0]
	}
	return r.w.Write(p)
}

func (r *initReport) ms() float64 {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.init
}

func outcome(a answer) string {
	if a.Error != nil {
		return "error"
	}
	if h, err := rie.DecodeHTTP(a.streamed, a.Payload); err == nil {
		return fmt.Sprintf("HTTP %d", h.Status)
	}
	return "answered"
}

// printAnswer prints an HTTP answer as a response, anything else as it is.
func printAnswer(w io.Writer, a answer) {
	if a.Error != nil {
		fmt.Fprintf(w, "function error: %s\n%s\n", a.Error, a.Payload)
		return
	}
	h, err := rie.DecodeHTTP(a.streamed, a.Payload)
	if err != nil {
		fmt.Fprintf(w, "%s\n", a.Payload)
		return
	}
	mode := "buffered"
	if a.streamed {
		mode = "streamed; the emulator returns it whole"
	}
	fmt.Fprintf(w, "HTTP %d (%s)\n", h.Status, mode)
	keys := make([]string, 0, len(h.Header))
	for k := range h.Header {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		for _, v := range h.Header[k] {
			fmt.Fprintf(w, "%s: %s\n", k, v)
		}
	}
	for _, c := range h.Cookies {
		fmt.Fprintf(w, "Set-Cookie: %s\n", c)
	}
	fmt.Fprintf(w, "\n%s\n", h.Body)
}

// functionEnv is the function's environment: Lambda's variables, the
// defaults of events/sample.env, this environment's SLUICE_* and AWS_*
// variables, then -env values; on the local backend without a data dir, a
// fresh one (removed by cleanup).
func functionEnv(root, name string, extra []string) (env []string, cleanup func(), err error) {
	cleanup = func() {}
	env = rie.LambdaEnv(name)
	set := map[string]string{}
	add := func(kv string) error {
		k, v, ok := strings.Cut(kv, "=")
		if !ok || k == "" {
			return fmt.Errorf("%q is not NAME=value", kv)
		}
		set[k] = v
		env = append(env, kv)
		return nil
	}
	defaults, err := readEnvFile(filepath.Join(root, "events", "sample.env"))
	if err != nil {
		return nil, cleanup, err
	}
	for _, kv := range defaults {
		k, v, _ := strings.Cut(kv, "=")
		if k == "SLUICE_CONFIG" && v != "" && !filepath.IsAbs(v) {
			kv = k + "=" + filepath.Join(root, v)
		}
		add(kv)
	}
	for _, kv := range os.Environ() {
		if strings.HasPrefix(kv, "SLUICE_") || strings.HasPrefix(kv, "AWS_") {
			add(kv)
		}
	}
	for _, kv := range extra {
		if err := add(kv); err != nil {
			return nil, cleanup, err
		}
	}
	if set["SLUICE_BACKEND"] == "" {
		add("SLUICE_BACKEND=local")
	}
	if (set["SLUICE_BACKEND"] == "local") && set["SLUICE_DATA_DIR"] == "" {
		dir, err := os.MkdirTemp("", "sluice-invoke-data-")
		if err != nil {
			return nil, cleanup, err
		}
		add("SLUICE_DATA_DIR=" + dir)
		cleanup = func() { os.RemoveAll(dir) }
	}
	return env, cleanup, nil
}

// readEnvFile reads NAME=value lines, skipping blanks and # comments.
func readEnvFile(path string) ([]string, error) {
	f, err := os.Open(path)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var out []string
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		out = append(out, line)
	}
	return out, sc.Err()
}
