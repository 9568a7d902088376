package cli_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/creack/pty"

	"github.com/sluice-gateway/sluice/pkg/batches"
	"github.com/sluice-gateway/sluice/pkg/callbacks"
	"github.com/sluice-gateway/sluice/pkg/gateway/gatewaytest"
)

// bin is the sluice binary the tests run, built once by TestMain.
var bin string

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "sluice-cli-test")
	if err != nil {
		panic(err)
	}
	bin = filepath.Join(dir, "sluice")
	build := exec.Command("go", "build", "-o", bin, "github.com/sluice-gateway/sluice/infra/sluice")
	build.Stdout, build.Stderr = os.Stderr, os.Stderr
	if err := build.Run(); err != nil {
		fmt.Fprintln(os.Stderr, "build sluice:", err)
		os.Exit(1)
	}
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

// upstream is an OpenAI-compatible chat provider that takes its time: a
// message "slow …" is answered after delay, "fail …" with a 400.
func upstream(t *testing.T, delay time.Duration) *httptest.Server {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var body struct {
			Messages []struct {
				Content string `json:"content"`
			} `json:"messages"`
		}
		if err := json.NewDecoder(r.Body).Decode(&body); err != nil || len(body.Messages) == 0 {
			w.WriteHeader(400)
			return
		}
		text := body.Messages[len(body.Messages)-1].Content
		w.Header().Set("Content-Type", "application/json")
		if strings.HasPrefix(text, "fail") {
			w.WriteHeader(400)
			io.WriteString(w, `{"error":{"message":"This input is not valid for this model.","type":"invalid_request_error","param":null,"code":null}}`)
			return
		}
		select {
		case <-time.After(delay):
		case <-r.Context().Done():
			return
		}
		q, _ := json.Marshal("echo: " + text)
		fmt.Fprintf(w, `{"id":"chatcmpl-1","object":"chat.completion","created":1700000000,"model":"gpt-4o-mini",`+
			`"choices":[{"index":0,"message":{"role":"assistant","content":%s},"finish_reason":"stop"}],`+
			`"usage":{"prompt_tokens":5,"completion_tokens":7,"total_tokens":12}}`, q)
	}))
	t.Cleanup(srv.Close)
	return srv
}

// env is a started gateway (embedded backend, batch worker running) over
// the slow upstream, a team key, and a config dir of the test's own.
type env struct {
	g         *gatewaytest.Gateway
	team, key string
	home      string
}

func start(t *testing.T, delay time.Duration) *env {
	t.Helper()
	up := upstream(t, delay)
	cfg := "model_list:\n" +
		"  - model_name: slow\n    litellm_params: {model: openai/gpt-4o-mini, api_base: " + up.URL + "/v1, api_key: sk-up}\n" +
		"  - model_name: mock-gpt\n    litellm_params: {model: openai/gpt-4o-mini, mock_response: \"Hello from the mock.\"}\n" +
		"callback_settings:\n  allow_hosts: [\"127.0.0.1\"]\n"
	g := gatewaytest.Start(t, gatewaytest.Backends()[0], gatewaytest.Options{
		Config: cfg, Jobs: []string{"batch-worker", "callback-delivery"}, // callback-delivery counts spend
		Batches: func(o *batches.Options) {
			o.Concurrency = 1 // lines finish one by one
			o.StatusEvery = 50 * time.Millisecond
			o.RetryDelay = 10 * time.Millisecond
		},
	})
	team, key := g.TeamKey()
	return &env{g: g, team: team, key: key, home: t.TempDir()}
}

// environ is the command's environment: the gateway and key, and a home of
// its own (the user config dir lives under it).
func (e *env) environ(key string) []string {
	out := []string{"HOME=" + e.home, "XDG_CONFIG_HOME=" + filepath.Join(e.home, ".config"), "PATH=" + os.Getenv("PATH"), "SLUICE_BASE_URL=" + e.g.URL}
	if key != "" {
		out = append(out, "SLUICE_API_KEY="+key)
	}
	return out
}

// run runs sluice with args, stdin given, and returns stdout, stderr and
// the exit status.
func (e *env) run(t *testing.T, key, stdin string, args ...string) (string, string, int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, args...)
	cmd.Env = e.environ(key)
	cmd.Dir = e.home
	cmd.Stdin = strings.NewReader(stdin)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	code := 0
	if ee, ok := err.(*exec.ExitError); ok {
		code = ee.ExitCode()
	} else if err != nil {
		t.Fatalf("run sluice %v: %v", args, err)
	}
	return out.String(), errb.String(), code
}

// screen is what a pseudo-terminal shows, read as it comes.
type screen struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (s *screen) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.buf.Write(p)
}

func (s *screen) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.buf.String()
}

// waitFor waits until the screen matches re.
func (s *screen) waitFor(t *testing.T, re *regexp.Regexp, d time.Duration) {
	t.Helper()
	deadline := time.Now().Add(d)
	for !re.MatchString(s.String()) {
		if time.Now().After(deadline) {
			t.Fatalf("the screen never showed %v:\n%q", re, s.String())
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// onTerminal starts sluice with args under a pseudo-terminal of 120×40 and
// returns the terminal (to type into), its screen and a wait for the exit
// status.
func (e *env) onTerminal(t *testing.T, args ...string) (*os.File, *screen, func() int) {
	t.Helper()
	cmd := exec.Command(bin, args...)
	cmd.Env = append(e.environ(e.key), "TERM=xterm")
	cmd.Dir = e.home
	tty, err := pty.StartWithSize(cmd, &pty.Winsize{Rows: 40, Cols: 120})
	if err != nil {
		t.Fatal(err)
	}
	s := &screen{}
	copied := make(chan struct{})
	go func() { io.Copy(s, tty); close(copied) }()
	var once sync.Once
	code := -1
	wait := func() int {
		once.Do(func() {
			done := make(chan error, 1)
			go func() { done <- cmd.Wait() }()
			select {
			case err := <-done:
				code = 0
				if ee, ok := err.(*exec.ExitError); ok {
					code = ee.ExitCode()
				}
			case <-time.After(60 * time.Second):
				cmd.Process.Kill()
				t.Fatalf("sluice did not end; the screen:\n%s", s.String())
			}
			tty.Close()
			<-copied
		})
		return code
	}
	t.Cleanup(func() { cmd.Process.Kill(); wait() })
	return tty, s, wait
}

// input writes n chat lines for model "slow" (custom ids line-0…), the
// lines in fail failing, and returns its path.
func (e *env) input(t *testing.T, n int, fail ...int) string {
	t.Helper()
	var b strings.Builder
	for i := range n {
		text := "slow " + strconv.Itoa(i)
		for _, f := range fail {
			if f == i {
				text = "fail " + strconv.Itoa(i)
			}
		}
		line, _ := json.Marshal(map[string]any{"custom_id": "line-" + strconv.Itoa(i), "method": "POST", "url": "/v1/chat/completions",
			"body": map[string]any{"model": "slow", "messages": []any{map[string]any{"role": "user", "content": text}}}})
		b.Write(line)
		b.WriteByte('\n')
	}
	path := filepath.Join(e.home, "requests.jsonl")
	if err := os.WriteFile(path, []byte(b.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

// customIDs reads the custom ids of a result file, counting each.
func customIDs(t *testing.T, path string) map[string]int {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	ids := map[string]int{}
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		var l struct {
			CustomID string `json:"custom_id"`
		}
		if err := json.Unmarshal(sc.Bytes(), &l); err != nil {
			t.Fatalf("%s: %q is not JSON", path, sc.Text())
		}
		ids[l.CustomID]++
	}
	return ids
}

// checkFiles checks that every line's custom id is in exactly one of the
// output and error files, and the failed ones in the error file.
func checkFiles(t *testing.T, input string, n int, fail ...int) {
	t.Helper()
	base := strings.TrimSuffix(input, ".jsonl")
	out, errs := customIDs(t, base+".output.jsonl"), customIDs(t, base+".errors.jsonl")
	for i := range n {
		id := "line-" + strconv.Itoa(i)
		if out[id]+errs[id] != 1 {
			t.Errorf("%s is %d times in the output and %d in the errors, want once", id, out[id], errs[id])
		}
	}
	for _, f := range fail {
		if errs["line-"+strconv.Itoa(f)] != 1 {
			t.Errorf("line-%d is not in the errors file", f)
		}
	}
	if len(out)+len(errs) != n {
		t.Errorf("%d custom ids in the files, want %d", len(out)+len(errs), n)
	}
}

// barCount is the progress bar's "(done/total" as progressbar draws it.
var barCount = regexp.MustCompile(`\((\d+)/(\d+),`)

// On a terminal, batch run shows an upload, then a bar redrawn in place
// that advances through the lines as they finish (counts, rate, time left,
// tokens), ends with a summary, writes the two files and exits 0.
func TestBatchRunShowsABarOnATerminal(t *testing.T) {
	e := start(t, 200*time.Millisecond)
	const n = 16
	input := e.input(t, n)
	_, s, wait := e.onTerminal(t, "batch", "run", input)
	if code := wait(); code != 0 {
		t.Fatalf("exit %d; the screen:\n%s", code, s.String())
	}
	screen := s.String()
	t.Logf("the screen:\n%s", screen)
	seen := map[int]bool{}
	for _, m := range barCount.FindAllStringSubmatch(screen, -1) {
		d, _ := strconv.Atoi(m[1])
		if m[2] != strconv.Itoa(n) {
			t.Errorf("bar total %s, want %d", m[2], n)
		}
		seen[d] = true
	}
	between := 0
	for d := range seen {
		if d > 0 && d < n {
			between++
		}
	}
	if between < 2 {
		t.Errorf("the bar showed counts %v: want it to move through several between 0 and %d", seen, n)
	}
	for _, want := range []string{"\r", "lines/s", "tokens $0.0", "in_progress ✓", "Uploaded requests.jsonl",
		fmt.Sprintf("completed in"), fmt.Sprintf("%d of %d lines succeeded, 0 failed", n, n), "requests.output.jsonl", "requests.errors.jsonl"} {
		if !strings.Contains(screen, want) {
			t.Errorf("the screen lacks %q", want)
		}
	}
	checkFiles(t, input, n)

	// The summary's cost is the batch's, which is what spend counted for
	// its lines (the key made no other call); batch status shows it too.
	spent := e.spent(t, n)
	if want := fmt.Sprintf("; cost $%.6f.", spent); spent <= 0 || !strings.Contains(screen, want) {
		t.Errorf("the summary lacks %q", want)
	}
	id := regexp.MustCompile(`Batch (batch_\S+) completed`).FindStringSubmatch(screen)
	if id == nil {
		t.Fatal("no batch id in the summary")
	}
	out, _, code := e.run(t, e.key, "", "batch", "status", id[1])
	if code != 0 || !strings.Contains(out, "COST") || !strings.Contains(out, fmt.Sprintf("$%.6f", spent)) {
		t.Errorf("batch status: exit %d, want the cost $%.6f:\n%s", code, spent, out)
	}
}

// spent is what the env's key has spent today once requests calls are
// counted.
func (e *env) spent(t *testing.T, requests int) float64 {
	t.Helper()
	day := time.Now().UTC().Format(time.DateOnly)
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		total := e.g.Do("GET", "/global/spend/report?start_date="+day+"&end_date="+day+"&group_by=api_key", e.key, nil).JSON(t)["total"].(map[string]any)
		if int(total["requests"].(float64)) >= requests {
			return total["spend"].(float64)
		}
		if time.Now().After(deadline) {
			t.Fatalf("%v requests counted, want %d", total["requests"], requests)
		}
	}
}

// Without a terminal, batch run prints one plain line per change (no
// carriage returns, no bar), and exits 3 when some lines failed.
func TestBatchRunPrintsLinesWithoutATerminal(t *testing.T) {
	e := start(t, 250*time.Millisecond)
	const n = 20
	input := e.input(t, n, 3, 7)
	out, errOut, code := e.run(t, e.key, "", "batch", "run", "--poll", "200ms", input)
	if code != 3 {
		t.Fatalf("exit %d, want 3\n%s\n%s", code, out, errOut)
	}
	if strings.ContainsAny(out, "\r\x1b") {
		t.Errorf("plain output has carriage returns or escapes: %q", out)
	}
	progress := regexp.MustCompile(`(?m)^batch_\S+ in_progress: (\d+)/20 done \(\d+ completed, \d+ failed\), [\d,]+ tokens, \$\d+\.\d{6}`)
	between := 0
	for _, m := range progress.FindAllStringSubmatch(out, -1) {
		if d, _ := strconv.Atoi(m[1]); d > 0 && d < n {
			between++
		}
	}
	if between < 2 {
		t.Errorf("want several progress lines between 0 and %d:\n%s", n, out)
	}
	if !strings.Contains(out, "18 of 20 lines succeeded, 2 failed") || !strings.Contains(out, "lines/s, ETA") {
		t.Errorf("output:\n%s", out)
	}
	checkFiles(t, input, n, 3, 7)
}

// Ctrl-C while a batch runs asks whether to cancel it; cancelling ends it
// cancelled, writes what finished and what never ran, and exits 4.
func TestBatchRunCtrlCCancels(t *testing.T) {
	e := start(t, 500*time.Millisecond)
	const n = 30
	input := e.input(t, n)
	tty, s, wait := e.onTerminal(t, "batch", "run", input)
	s.waitFor(t, regexp.MustCompile(`\([1-9]\d*/30,`), 30*time.Second)
	tty.Write([]byte{3}) // Ctrl-C
	s.waitFor(t, regexp.MustCompile(`or leave it running\? \[c\]ancel/\[l\]eave: `), 10*time.Second)
	tty.Write([]byte("c\r"))
	if code := wait(); code != 4 {
		t.Fatalf("exit %d, want 4; the screen:\n%s", code, s.String())
	}
	if !strings.Contains(s.String(), "cancelled in") {
		t.Errorf("no cancelled summary:\n%s", s.String())
	}
	checkFiles(t, input, n)
}

// --json prints the API's JSON, one document per command, which parses.
func TestJSONOutputParses(t *testing.T) {
	e := start(t, 0)
	for _, args := range [][]string{
		{"--json", "team", "create", "--alias", "search", "--rpm", "60"},
		{"--json", "team", "list"},
		{"--json", "team", "info", e.team},
		{"--json", "key", "list", "--team", e.team},
		{"--json", "batch", "list"},
		{"--json", "files", "list"},
	} {
		out, errOut, code := e.run(t, e.g.MasterKey, "", args...)
		var v any
		if code != 0 || json.Unmarshal([]byte(out), &v) != nil {
			t.Errorf("sluice %v: exit %d, stdout %q, stderr %q", args, code, out, errOut)
		}
	}
	out, _, code := e.run(t, e.key, "", "--json", "batch", "run", e.input(t, 3))
	var b struct {
		Status        string                  `json:"status"`
		RequestCounts struct{ Completed int } `json:"request_counts"`
	}
	if code != 0 || json.Unmarshal([]byte(out), &b) != nil || b.Status != "completed" || b.RequestCounts.Completed != 3 {
		t.Errorf("batch run --json: exit %d, %q", code, out)
	}
}

// The admin verbs, in tables: a team, a key shown once that works and is
// gone once deleted, files up and down, a callback with its secret masked.
func TestAdminVerbs(t *testing.T) {
	e := start(t, 0)
	m := e.g.MasterKey
	out, _, code := e.run(t, m, "", "team", "create", "--alias", "research", "--models", "mock-gpt", "--rpm", "60")
	teamID := regexp.MustCompile(`team-\S+`).FindString(out)
	if code != 0 || teamID == "" || !strings.Contains(out, "research") || !strings.Contains(out, "mock-gpt") {
		t.Fatalf("team create: %d %q", code, out)
	}
	if out, _, _ := e.run(t, m, "", "team", "list"); !strings.Contains(out, "research") || !strings.HasPrefix(out, "ID") {
		t.Errorf("team list: %q", out)
	}
	out, _, code = e.run(t, m, "", "key", "create", "--team", teamID, "--alias", "ci", "--duration", "1d")
	key := regexp.MustCompile(`(?m)^sk-\S+`).FindString(out)
	if code != 0 || key == "" || !strings.Contains(out, "shown once") {
		t.Fatalf("key create: %d %q", code, out)
	}
	if resp := e.g.Do("GET", "/v1/models", key, nil); resp.Status != 200 {
		t.Errorf("the new key: %d", resp.Status)
	}
	out, _, _ = e.run(t, m, "", "key", "list", "--team", teamID)
	if !strings.Contains(out, "ci") || strings.Contains(out, key) {
		t.Errorf("key list: %q", out)
	}
	if _, _, code := e.run(t, m, "", "key", "delete", key); code != 0 {
		t.Errorf("key delete: %d", code)
	}
	if resp := e.g.Do("GET", "/v1/models", key, nil); resp.Status != 401 {
		t.Errorf("a deleted key: %d", resp.Status)
	}

	path := e.input(t, 2)
	out, _, code = e.run(t, e.key, "", "files", "upload", path)
	fileID := regexp.MustCompile(`file-\S+?\b`).FindString(out)
	if code != 0 || fileID == "" {
		t.Fatalf("files upload: %d %q", code, out)
	}
	if out, _, _ := e.run(t, e.key, "", "files", "list"); !strings.Contains(out, fileID) {
		t.Errorf("files list: %q", out)
	}
	dl := filepath.Join(e.home, "copy.jsonl")
	if _, _, code := e.run(t, e.key, "", "files", "download", fileID, "-o", dl); code != 0 {
		t.Errorf("files download: %d", code)
	}
	if a, b := readFile(t, path), readFile(t, dl); a != b {
		t.Errorf("downloaded %q, uploaded %q", b, a)
	}
	if _, _, code := e.run(t, e.key, "", "files", "rm", fileID); code != 0 {
		t.Errorf("files rm: %d", code)
	}

	out, errOut, code := e.run(t, e.key, "", "callback", "add", e.team, "langfuse", "--var", "langfuse_public_key=pk-lf-1",
		"--var", "langfuse_secret_key=sk-lf-very-secret", "--var", "langfuse_host=http://127.0.0.1:9")
	if code != 0 {
		t.Fatalf("callback add: %d %q %q", code, out, errOut)
	}
	// The callback's delivery health, as the delivery worker records it.
	errAt := time.Date(2026, 11, 27, 9, 30, 0, 0, time.UTC)
	if err := callbacks.WriteHealth(context.Background(), e.g.Backend.Records, callbacks.HealthUpdate{
		TeamID: e.team, CallbackID: "langfuse#success_and_failure", Delta: callbacks.HealthDelta{
			Delivered: 1234, Retrying: 2, DeadLettered: 1, LastError: "Langfuse answered 503: busy", LastErrorAt: errAt}}); err != nil {
		t.Fatal(err)
	}
	out, _, _ = e.run(t, e.key, "", "callback", "list", e.team)
	if !strings.Contains(out, "langfuse") || strings.Contains(out, "sk-lf-very-secret") || !strings.Contains(out, "pk-lf-1") {
		t.Errorf("callback list: %q", out)
	}
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if len(lines) != 2 || strings.Join(strings.Fields(lines[0]), " ") != "NAME TYPE VARS (secrets masked) DELIVERED RETRYING DEAD-LETTERED LAST ERROR (UTC)" ||
		!strings.HasSuffix(strings.Join(strings.Fields(lines[1]), " "), "1,234 2 1 2026-11-27 09:30 Langfuse answered 503: busy") {
		t.Errorf("callback list, health columns: %q", out)
	}
	out, _, _ = e.run(t, e.key, "", "--json", "callback", "list", e.team)
	var listed struct {
		Data struct {
			Callbacks []struct {
				Delivery map[string]any `json:"delivery"`
			} `json:"callbacks"`
		} `json:"data"`
	}
	if err := json.Unmarshal([]byte(out), &listed); err != nil || len(listed.Data.Callbacks) != 1 {
		t.Fatalf("callback list --json: %v %q", err, out)
	}
	if d := listed.Data.Callbacks[0].Delivery; d["delivered"] != 1234.0 || d["retrying"] != 2.0 || d["dead_lettered"] != 1.0 ||
		d["last_error"] != "Langfuse answered 503: busy" || d["last_error_at"] != "2026-11-27T09:30:00Z" || d["last_delivered_at"] != nil {
		t.Errorf("callback list --json delivery: %v", d)
	}
	if _, _, code := e.run(t, e.key, "", "callback", "rm", e.team, "langfuse"); code != 0 {
		t.Errorf("callback rm: %d", code)
	}
}

func readFile(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// Errors are words with a hint, and exit 1: a bad key, no gateway, a
// mistake in the command line; a spend report where none is recorded says
// so.
func TestErrorsAndExitCodes(t *testing.T) {
	e := start(t, 0)
	for _, tc := range []struct {
		name, key string
		args      []string
		code      int
		stderr    string
	}{
		{"bad key", "sk-wrong", []string{"team", "list"}, 1, "hint: run sluice login"},
		{"no key", "", []string{"team", "list"}, 1, "no API key: run sluice login"},
		{"team key on an admin route", e.key, []string{"team", "list"}, 1, "hint: this needs the master key"},
		{"usage", e.key, []string{"batch", "status"}, 1, "accepts 1 arg"},
		{"unknown flag", e.key, []string{"batch", "list", "--nope"}, 1, "unknown flag"},
		{"no such batch", e.key, []string{"batch", "status", "batch_nosuch"}, 1, "(HTTP 404)"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			out, errOut, code := e.run(t, tc.key, "", tc.args...)
			if code != tc.code || !strings.Contains(errOut, tc.stderr) || strings.Contains(errOut, "goroutine") {
				t.Errorf("exit %d, stdout %q, stderr %q", code, out, errOut)
			}
		})
	}
	t.Run("no gateway", func(t *testing.T) {
		cmd := exec.Command(bin, "team", "list")
		cmd.Env = []string{"HOME=" + e.home, "XDG_CONFIG_HOME=" + e.home, "SLUICE_BASE_URL=http://127.0.0.1:1", "SLUICE_API_KEY=sk-x"}
		out, err := cmd.CombinedOutput()
		if ee, ok := err.(*exec.ExitError); !ok || ee.ExitCode() != 1 || !strings.Contains(string(out), "cannot reach") || !strings.Contains(string(out), "hint: is the gateway running") {
			t.Errorf("%v: %s", err, out)
		}
	})
	t.Run("spend report without spend", func(t *testing.T) {
		out, errOut, code := e.run(t, e.g.MasterKey, "", "spend", "report")
		if code != 0 || !strings.Contains(out, "no spend recorded") {
			t.Errorf("exit %d %q %q", code, out, errOut)
		}
	})
}

// login reads the key from stdin (never an argument), checks it, and keeps
// it mode 0600 in the user config dir, where later commands find it; a
// wrong key is refused and not kept.
func TestLoginKeepsTheKey0600(t *testing.T) {
	e := start(t, 0)
	_, errOut, code := e.run(t, "", "sk-wrong\n", "login", "--base-url", e.g.URL)
	creds := filepath.Join(e.home, ".config", "sluice", "credentials.json")
	if code != 1 || !strings.Contains(errOut, "run sluice login") {
		t.Errorf("a wrong key: exit %d %q", code, errOut)
	}
	if _, err := os.Stat(creds); err == nil {
		t.Errorf("a wrong key was kept")
	}
	out, errOut, code := e.run(t, "", e.g.MasterKey+"\n", "login", "--base-url", e.g.URL)
	if code != 0 || strings.Contains(out+errOut, e.g.MasterKey) {
		t.Fatalf("login: exit %d %q %q", code, out, errOut)
	}
	st, err := os.Stat(creds)
	if err != nil {
		t.Fatal(err)
	}
	if st.Mode().Perm() != 0o600 {
		t.Errorf("credentials mode %v, want 0600", st.Mode().Perm())
	}
	// SLUICE_BASE_URL is set by run; the key comes from the file.
	if out, errOut, code := e.run(t, "", "", "team", "list"); code != 0 || !strings.HasPrefix(out, "ID") {
		t.Errorf("a command after login: exit %d %q %q", code, out, errOut)
	}
	// SLUICE_API_KEY overrides the file.
	if _, errOut, code := e.run(t, "sk-wrong", "", "team", "list"); code != 1 || !strings.Contains(errOut, "run sluice login") {
		t.Errorf("SLUICE_API_KEY override: exit %d %q", code, errOut)
	}
}

// batch estimate prints the dry run's lines, tokens and worst case, and
// leaves nothing behind: no batch, no file.
func TestBatchEstimatePrintsTheDryRun(t *testing.T) {
	e := start(t, 0)
	var b strings.Builder
	for i := range 3 {
		fmt.Fprintf(&b, `{"custom_id":"l%d","method":"POST","url":"/v1/chat/completions","body":{"model":"mock-gpt","max_tokens":100,"messages":[{"role":"user","content":"12345678"}]}}`+"\n", i)
	}
	input := filepath.Join(e.home, "est.jsonl")
	if err := os.WriteFile(input, []byte(b.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	out, errOut, code := e.run(t, e.key, "", "batch", "estimate", input)
	if code != 0 {
		t.Fatalf("exit %d\n%s\n%s", code, out, errOut)
	}
	// gpt-4o-mini's prices: 3 × (2 × 1.5e-7 + 100 × 6e-7) = 0.0001809.
	for _, want := range []string{"3 lines, 6 input tokens (estimated), at most 300 output tokens.", "mock-gpt", "Worst case: $0.000181 run by sluice."} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
	if list := e.g.Do("GET", "/v1/batches", e.key, nil).JSON(t)["data"].([]any); len(list) != 0 {
		t.Errorf("the estimate created %d batches", len(list))
	}
	if files := e.g.Do("GET", "/v1/files", e.key, nil).JSON(t)["data"].([]any); len(files) != 0 {
		t.Errorf("the estimate left %d files", len(files))
	}
	out, _, code = e.run(t, e.key, "", "--json", "batch", "estimate", input)
	var est map[string]any
	if code != 0 || json.Unmarshal([]byte(out), &est) != nil || est["object"] != "batch.estimate" {
		t.Errorf("--json: exit %d, %s", code, out)
	}
}

// sluice team list and key list show the spend /team/list and /key/list
// answer under SPEND: a figure once the team's key has spent, not "-".
func TestListsShowSpend(t *testing.T) {
	e := start(t, 0)
	if r := e.g.Do("POST", "/v1/chat/completions", e.key, `{"model":"mock-gpt","messages":[{"role":"user","content":"hi"}]}`); r.Status != 200 {
		t.Fatalf("chat: %d %s", r.Status, r.Body)
	}
	var spent float64
	var token string
	for deadline := time.Now().Add(10 * time.Second); spent == 0; time.Sleep(50 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("the key's call was not counted within 10 s")
		}
		info := e.g.Do("GET", "/key/info", e.key, nil).JSON(t)
		token, _ = info["key"].(string)
		spent, _ = info["info"].(map[string]any)["spend"].(float64)
	}
	want := fmt.Sprintf("$%.4f", spent)
	row := func(out, first string) []string {
		for _, l := range strings.Split(out, "\n") {
			if f := strings.Fields(l); len(f) > 0 && f[0] == first {
				return f
			}
		}
		t.Fatalf("no row %s in %q", first, out)
		return nil
	}
	out, _, code := e.run(t, e.g.MasterKey, "", "team", "list")
	if f := row(out, e.team); code != 0 || f[len(f)-2] != want {
		t.Errorf("team list SPEND %v, want %s:\n%s", f, want, out)
	}
	out, _, code = e.run(t, e.g.MasterKey, "", "key", "list", "--team", e.team)
	if f := row(out, token); code != 0 || f[len(f)-1] != want {
		t.Errorf("key list SPEND %v, want %s:\n%s", f, want, out)
	}
}
