// Package docs holds the tests that keep the documentation's examples
// working: the README's first session runs against a started gateway, and
// every YAML example is loaded by the config parser.
package docs

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/sluice-gateway/sluice/pkg/gateway"
	"github.com/sluice-gateway/sluice/pkg/handoff"
	"github.com/sluice-gateway/sluice/pkg/server"
)

// firstSessionTag marks a README shell block the first-session test runs.
const firstSessionTag = "<!-- first-session -->"

// fence is a Markdown code fence line: its indentation and its language.
var fence = regexp.MustCompile("^(\\s*)```(\\S*)\\s*$")

// block is one fenced code block of a Markdown file.
type block struct {
	lang   string
	line   int // of the opening fence, 1-based
	tagged bool
	text   string
}

// codeBlocks returns the fenced blocks of a Markdown document, each with its
// fence's indentation removed, and whether a first-session tag is the last
// non-blank line before it.
func codeBlocks(doc string) ([]block, error) {
	var (
		blocks  []block
		cur     *block
		indent  string
		body    strings.Builder
		lastTxt string
	)
	for i, line := range strings.Split(doc, "\n") {
		m := fence.FindStringSubmatch(line)
		switch {
		case cur == nil && m != nil:
			cur = &block{lang: m[2], line: i + 1, tagged: strings.TrimSpace(lastTxt) == firstSessionTag}
			indent = m[1]
			body.Reset()
		case cur != nil && m != nil && m[2] == "":
			cur.text = body.String()
			blocks = append(blocks, *cur)
			cur = nil
			lastTxt = line
		case cur != nil:
			body.WriteString(strings.TrimPrefix(line, indent))
			body.WriteByte('\n')
		case strings.TrimSpace(line) != "":
			lastTxt = line
		}
	}
	if cur != nil {
		return nil, fmt.Errorf("the code block opened on line %d is never closed", cur.line)
	}
	return blocks, nil
}

// sessionCall is one curl call the first session made, as the curl shim
// recorded it.
type sessionCall struct {
	method, path, auth string
	status             int
	body               []byte
}

func (c sessionCall) String() string {
	return fmt.Sprintf("%s %s → %d %.300s", c.method, c.path, c.status, c.body)
}

// step is what the first session must do next: a call of this method on a
// path matching pattern ({name} matches one segment), answered with status
// and holding check's shape. repeat steps match one or more calls in a row.
type step struct {
	method, pattern string
	status          int
	repeat          bool
	batch           bool // part of the batch step: expected once the route table has batches
	check           func(t *testing.T, s *session, c sessionCall)
}

// session is what the test knows while checking the calls: what earlier
// answers gave, as a user would remember it.
type session struct {
	master, team, key, file string
	lastBatch               map[string]any
}

// shim is the curl the first session runs: it records each call's
// arguments, answer headers and body, then prints the body as curl would.
const shim = `#!/usr/bin/env bash
set -u
n=$(( $(cat "$SESSION_LOG/count" 2>/dev/null || echo 0) + 1 ))
echo "$n" > "$SESSION_LOG/count"
printf '%s\0' "$@" > "$SESSION_LOG/$n.args"
"$REAL_CURL" -D "$SESSION_LOG/$n.head" -o "$SESSION_LOG/$n.body" "$@" || exit
cat "$SESSION_LOG/$n.body"
`

// TestFirstSession runs the README's first session: the shell blocks
// marked <!-- first-session -->, in order, with bash, curl and jq, against
// a gateway started as make run starts it (the example config, a fresh data
// dir, no provider key), with the master key it printed put where the README
// says to put it. Every answer's status and shape is checked.
func TestFirstSession(t *testing.T) {
	realCurl := lookPath(t, "curl")
	lookPath(t, "jq")
	bash := lookPath(t, "bash")

	readme, err := os.ReadFile("../README.md")
	if err != nil {
		t.Fatal(err)
	}
	blocks, err := codeBlocks(string(readme))
	if err != nil {
		t.Fatal(err)
	}
	var script strings.Builder
	for _, b := range blocks {
		if !b.tagged {
			continue
		}
		if b.lang != "sh" {
			t.Fatalf("README line %d: a first-session block must be a sh block, not %q", b.line, b.lang)
		}
		fmt.Fprintf(&script, "# README.md line %d\n%s", b.line, b.text)
	}

	addr, master := startGateway(t)
	text := script.String()
	for _, sub := range []struct{ from, to string }{
		{"export MASTER=sk-...", "export MASTER=" + master},
		{"localhost:4000", addr},
	} {
		if !strings.Contains(text, sub.from) {
			t.Fatalf("the first session no longer has %q, which the test replaces", sub.from)
		}
		text = strings.ReplaceAll(text, sub.from, sub.to)
	}

	dir := t.TempDir()
	logDir, binDir, workDir := filepath.Join(dir, "log"), filepath.Join(dir, "bin"), filepath.Join(dir, "work")
	for _, d := range []string{logDir, binDir, workDir} {
		if err := os.Mkdir(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(filepath.Join(binDir, "curl"), []byte(shim), 0o755); err != nil {
		t.Fatal(err)
	}
	// The sluice command, as make cli builds it; its calls are its own,
	// not the curl shim's.
	if out, err := exec.Command("go", "build", "-o", filepath.Join(binDir, "sluice"), "../infra/sluice").CombinedOutput(); err != nil {
		t.Fatalf("build the sluice command: %v\n%s", err, out)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, bash, "-c", "set -euo pipefail\n"+text)
	cmd.Dir = workDir
	cmd.Env = append(os.Environ(), "PATH="+binDir+string(os.PathListSeparator)+os.Getenv("PATH"),
		"REAL_CURL="+realCurl, "SESSION_LOG="+logDir)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("the first session failed: %v\nscript:\n%s\noutput:\n%s", err, text, out)
	}
	calls := readCalls(t, logDir)
	s := &session{master: master}
	checkSteps(t, s, firstSessionSteps(), calls, hasRoute("POST", "/v1/batches"))
}

func lookPath(t *testing.T, name string) string {
	t.Helper()
	p, err := exec.LookPath(name)
	if err != nil {
		t.Fatalf("the README's first session needs %s (make test needs it too): %v", name, err)
	}
	return p
}

// hasRoute reports whether the route table serves method and pattern.
func hasRoute(method, pattern string) bool {
	return slices.ContainsFunc(server.Routes(), func(r server.Route) bool {
		return r.Method == method && r.Pattern == pattern
	})
}

// startGateway starts the local process as make run does on a fresh clone
// and returns its address and the master key its banner printed.
func startGateway(t *testing.T) (addr, master string) {
	t.Helper()
	example, err := filepath.Abs("../sluice.example.yaml")
	if err != nil {
		t.Fatal(err)
	}
	env := map[string]string{
		"SLUICE_CONFIG":   example,
		"SLUICE_DATA_DIR": filepath.Join(t.TempDir(), ".sluice"),
		"SLUICE_ADDR":     "127.0.0.1:0",
	}
	ctx, cancel := context.WithCancel(context.Background())
	g, err := gateway.Open(ctx, func(k string) string { return env[k] }, gateway.WithHandoff(handoff.Wrap))
	if err != nil {
		cancel()
		t.Fatal(err)
	}
	pr, pw := io.Pipe()
	done := make(chan error, 1)
	go func() {
		err := g.Serve(ctx, pw)
		pw.Close()
		done <- err
	}()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("serve: %v", err)
		}
		g.Close()
	})

	lines := make(chan string)
	go func() {
		defer close(lines)
		sc := bufio.NewScanner(pr)
		for sc.Scan() {
			lines <- sc.Text()
		}
	}()
	listening := regexp.MustCompile(`^sluice listening on http://(\S+) `)
	keyNext := false
	for addr == "" || master == "" {
		select {
		case line, ok := <-lines:
			if !ok {
				t.Fatalf("the gateway stopped before printing its address and master key: %v", <-done)
			}
			switch m := listening.FindStringSubmatch(line); {
			case m != nil:
				addr = m[1]
			case strings.HasPrefix(line, "Generated master key"):
				keyNext = true
			case keyNext && strings.TrimSpace(line) != "":
				master, keyNext = strings.TrimSpace(line), false
			}
		case <-time.After(30 * time.Second):
			t.Fatal("no banner from the gateway after 30 s")
		}
	}
	go func() {
		for range lines { // the rest of the banner
		}
	}()
	return addr, master
}

// readCalls reads what the curl shim recorded, in order.
func readCalls(t *testing.T, dir string) []sessionCall {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(dir, "count"))
	if err != nil {
		t.Fatalf("the first session made no curl call: %v", err)
	}
	n, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil {
		t.Fatal(err)
	}
	calls := make([]sessionCall, 0, n)
	for i := 1; i <= n; i++ {
		read := func(ext string) []byte {
			b, err := os.ReadFile(filepath.Join(dir, fmt.Sprintf("%d.%s", i, ext)))
			if err != nil {
				t.Fatal(err)
			}
			return b
		}
		args := strings.Split(strings.TrimSuffix(string(read("args")), "\x00"), "\x00")
		c := sessionCall{method: "GET", body: read("body")}
		for j, a := range args {
			next := ""
			if j+1 < len(args) {
				next = args[j+1]
			}
			switch {
			case a == "-o" || a == "--output":
				t.Fatalf("call %d: a first-session call may not use %s (the test records the body itself)", i, a)
			case a == "-X":
				c.method = next
			case (a == "-d" || a == "-F" || strings.HasPrefix(a, "--data")) && c.method == "GET":
				c.method = "POST"
			case a == "-H" && strings.HasPrefix(next, "Authorization: Bearer "):
				c.auth = strings.TrimPrefix(next, "Authorization: Bearer ")
			case strings.HasPrefix(a, "127.0.0.1:") || strings.HasPrefix(a, "http://"):
				u := strings.TrimPrefix(a, "http://")
				u = u[strings.IndexByte(u, '/'):]
				c.path, _, _ = strings.Cut(u, "?")
			}
		}
		for _, line := range strings.Split(string(read("head")), "\n") {
			if f := strings.Fields(line); len(f) >= 2 && strings.HasPrefix(f[0], "HTTP/") {
				c.status, _ = strconv.Atoi(f[1])
			}
		}
		calls = append(calls, c)
	}
	return calls
}

// checkSteps matches the calls to the steps in order, one step each (one or
// more for a repeat step), and runs each step's check.
func checkSteps(t *testing.T, s *session, steps []step, calls []sessionCall, withBatches bool) {
	t.Helper()
	i := 0
	for _, st := range steps {
		if st.batch && !withBatches {
			continue
		}
		matched := 0
		for i < len(calls) && calls[i].method == st.method && matchPath(st.pattern, calls[i].path) && (matched == 0 || st.repeat) {
			c := calls[i]
			if c.status != st.status {
				t.Fatalf("%s: want status %d", c, st.status)
			}
			st.check(t, s, c)
			i++
			matched++
		}
		if matched == 0 {
			got := "nothing more"
			if i < len(calls) {
				got = calls[i].String()
			}
			hint := ""
			if st.batch {
				hint = "\n(the route table has POST /v1/batches: mark the README's batch block " + firstSessionTag + ")"
			}
			t.Fatalf("the first session should next call %s %s (%d); it made %s%s", st.method, st.pattern, st.status, got, hint)
		}
	}
	if i < len(calls) {
		t.Fatalf("the first session made calls the test does not expect, from %s", calls[i])
	}
}

// matchPath matches a path to a pattern whose {name} segments match any one
// segment.
func matchPath(pattern, path string) bool {
	ps, xs := strings.Split(pattern, "/"), strings.Split(path, "/")
	if len(ps) != len(xs) {
		return false
	}
	for i := range ps {
		if !strings.HasPrefix(ps[i], "{") && ps[i] != xs[i] {
			return false
		}
	}
	return true
}

// decode decodes c's body as a JSON object.
func decode(t *testing.T, c sessionCall) map[string]any {
	t.Helper()
	var v map[string]any
	if err := json.Unmarshal(c.body, &v); err != nil {
		t.Fatalf("%s: not a JSON object: %v", c, err)
	}
	return v
}

// str returns v's member at path (object members) as a string, failing the
// test if it is not one.
func str(t *testing.T, c sessionCall, v map[string]any, path ...string) string {
	t.Helper()
	var cur any = v
	for _, p := range path {
		m, ok := cur.(map[string]any)
		if !ok {
			t.Fatalf("%s: %s is not an object", c, strings.Join(path, "."))
		}
		cur = m[p]
	}
	s, ok := cur.(string)
	if !ok {
		t.Fatalf("%s: %s is %v, not a string", c, strings.Join(path, "."), cur)
	}
	return s
}

func wantError(code string) func(t *testing.T, s *session, c sessionCall) {
	return func(t *testing.T, s *session, c sessionCall) {
		if got := str(t, c, decode(t, c), "error", "code"); got != code {
			t.Fatalf("%s: error code %q, want %q", c, got, code)
		}
	}
}

// mockText is what sluice.example.yaml's mock-gpt answers.
const mockText = "Hello from sluice! This answer comes from the mock deployment in sluice.example.yaml: no provider was called."

// asMaster fails the session if c was not made with the master key.
func asMaster(t *testing.T, s *session, c sessionCall) {
	if c.auth != s.master {
		t.Fatalf("%s: should use the master key", c)
	}
}

// asKey fails the session if c was not made with the key /key/generate gave.
func asKey(t *testing.T, s *session, c sessionCall) {
	if c.auth == "" || c.auth != s.key {
		t.Fatalf("%s: should use the key /key/generate gave", c)
	}
}

// firstSessionSteps is the README's first session, call by call.
func firstSessionSteps() []step {
	return []step{
		{method: "GET", pattern: "/health/readiness", status: 200, check: func(t *testing.T, s *session, c sessionCall) {
			if got := str(t, c, decode(t, c), "status"); got != "healthy" {
				t.Fatalf("%s: status %q", c, got)
			}
		}},
		{method: "POST", pattern: "/team/new", status: 200, check: func(t *testing.T, s *session, c sessionCall) {
			asMaster(t, s, c)
			v := decode(t, c)
			if s.team = str(t, c, v, "team_id"); s.team == "" || str(t, c, v, "team_alias") != "search" {
				t.Fatalf("%s: want a team_id and the alias", c)
			}
		}},
		{method: "POST", pattern: "/key/generate", status: 200, check: func(t *testing.T, s *session, c sessionCall) {
			asMaster(t, s, c)
			v := decode(t, c)
			if s.key = str(t, c, v, "key"); !strings.HasPrefix(s.key, "sk-") || str(t, c, v, "team_id") != s.team || str(t, c, v, "expires") == "" {
				t.Fatalf("%s: want an sk- key of the team with an expiry", c)
			}
		}},
		{method: "GET", pattern: "/key/info", status: 200, check: func(t *testing.T, s *session, c sessionCall) {
			asKey(t, s, c)
			v := decode(t, c)
			if str(t, c, v, "key") == "" || str(t, c, v, "info", "team_id") != s.team {
				t.Fatalf("%s: want the key's token and its team", c)
			}
		}},
		{method: "GET", pattern: "/v1/models", status: 200, check: checkMockModels},
		{method: "POST", pattern: "/v1/chat/completions", status: 200, check: checkMockChat},
		{method: "POST", pattern: "/v1/chat/completions", status: 200, check: func(t *testing.T, s *session, c sessionCall) {
			asKey(t, s, c)
			if text := streamedText(t, c); text != mockText {
				t.Fatalf("%s: the chunks add up to %q, want the mock's text", c, text)
			}
		}},
		{method: "POST", pattern: "/v1/embeddings", status: 200, check: func(t *testing.T, s *session, c sessionCall) {
			asKey(t, s, c)
			checkMockEmbeddings(t, c)
		}},
		{method: "POST", pattern: "/v1/files", status: 200, check: func(t *testing.T, s *session, c sessionCall) {
			asKey(t, s, c)
			v := decode(t, c)
			if s.file = str(t, c, v, "id"); !strings.HasPrefix(s.file, "file-") || str(t, c, v, "object") != "file" ||
				str(t, c, v, "purpose") != "batch" || str(t, c, v, "filename") != "requests.jsonl" {
				t.Fatalf("%s: want a batch File object for requests.jsonl", c)
			}
		}},
		{method: "GET", pattern: "/v1/files/{file_id}", status: 200, check: func(t *testing.T, s *session, c sessionCall) {
			v := decode(t, c)
			if str(t, c, v, "id") != s.file || str(t, c, v, "status") != "processed" {
				t.Fatalf("%s: want the uploaded file, processed", c)
			}
		}},
		{method: "POST", pattern: "/v1/batches", status: 200, batch: true, check: func(t *testing.T, s *session, c sessionCall) {
			asKey(t, s, c)
			v := decode(t, c)
			if str(t, c, v, "object") != "batch" || str(t, c, v, "input_file_id") != s.file || str(t, c, v, "id") == "" {
				t.Fatalf("%s: want a Batch over the uploaded file", c)
			}
		}},
		{method: "GET", pattern: "/v1/batches/{batch_id}", status: 200, repeat: true, batch: true, check: func(t *testing.T, s *session, c sessionCall) {
			v := decode(t, c)
			if str(t, c, v, "object") != "batch" {
				t.Fatalf("%s: want a Batch", c)
			}
			s.lastBatch = v
		}},
		{method: "GET", pattern: "/v1/files/{file_id}/content", status: 200, batch: true, check: func(t *testing.T, s *session, c sessionCall) {
			last := sessionCall{body: c.body}
			if str(t, last, s.lastBatch, "status") != "completed" || str(t, last, s.lastBatch, "output_file_id") == "" {
				t.Fatalf("the last batch status read was %v, want completed with an output file", s.lastBatch)
			}
			checkBatchOutput(t, c)
		}},
		{method: "POST", pattern: "/team/new", status: 403, check: func(t *testing.T, s *session, c sessionCall) {
			asKey(t, s, c)
			wantError("permission_denied")(t, s, c)
		}},
		{method: "POST", pattern: "/key/delete", status: 200, check: func(t *testing.T, s *session, c sessionCall) {
			asMaster(t, s, c)
			var deleted struct {
				Keys []string `json:"deleted_keys"`
			}
			if err := json.Unmarshal(c.body, &deleted); err != nil || len(deleted.Keys) != 1 {
				t.Fatalf("%s: want one deleted key (%v)", c, err)
			}
		}},
		{method: "GET", pattern: "/v1/models", status: 401, check: wantError("invalid_api_key")},
	}
}

// checkMockModels checks c, made with the session's key, lists
// sluice.example.yaml's two mock models.
func checkMockModels(t *testing.T, s *session, c sessionCall) {
	asKey(t, s, c)
	var list struct {
		Object string `json:"object"`
		Data   []struct {
			ID string `json:"id"`
		} `json:"data"`
	}
	err := json.Unmarshal(c.body, &list)
	var ids []string
	for _, m := range list.Data {
		ids = append(ids, m.ID)
	}
	slices.Sort(ids)
	if err != nil || list.Object != "list" || strings.Join(ids, ",") != "mock-embed,mock-gpt" {
		t.Fatalf("%s: want the list of mock-gpt and mock-embed (%v)", c, err)
	}
}

// checkMockChat checks c, made with the session's key, is a chat.completion
// with the mock's text and usage.
func checkMockChat(t *testing.T, s *session, c sessionCall) {
	asKey(t, s, c)
	var answer struct {
		Object  string `json:"object"`
		Choices []struct {
			Message struct {
				Role    string `json:"role"`
				Content string `json:"content"`
			} `json:"message"`
			FinishReason string `json:"finish_reason"`
		} `json:"choices"`
		Usage struct {
			TotalTokens int `json:"total_tokens"`
		} `json:"usage"`
	}
	if err := json.Unmarshal(c.body, &answer); err != nil || answer.Object != "chat.completion" || len(answer.Choices) != 1 ||
		answer.Choices[0].Message.Content != mockText || answer.Choices[0].FinishReason != "stop" || answer.Usage.TotalTokens == 0 {
		t.Fatalf("%s: want a chat.completion with the mock's text and usage (%v)", c, err)
	}
}

// mockVector is what sluice.example.yaml's mock-embed answers for every input.
var mockVector = []float64{0.6, 0.8, 0, 0}

// checkMockEmbeddings checks c is the embeddings answer for the README's two
// inputs: mock-embed's vector for each, in order, with estimated usage.
func checkMockEmbeddings(t *testing.T, c sessionCall) {
	t.Helper()
	var answer struct {
		Object string `json:"object"`
		Data   []struct {
			Object    string    `json:"object"`
			Index     int       `json:"index"`
			Embedding []float64 `json:"embedding"`
		} `json:"data"`
		Model string `json:"model"`
		Usage struct {
			PromptTokens int `json:"prompt_tokens"`
			TotalTokens  int `json:"total_tokens"`
		} `json:"usage"`
	}
	if err := json.Unmarshal(c.body, &answer); err != nil || answer.Object != "list" || len(answer.Data) != 2 ||
		answer.Model != "text-embedding-3-small" || answer.Usage.PromptTokens == 0 || answer.Usage.TotalTokens != answer.Usage.PromptTokens {
		t.Fatalf("%s: want a list of two embeddings with usage (%v)", c, err)
	}
	for i, d := range answer.Data {
		if d.Object != "embedding" || d.Index != i || !slices.Equal(d.Embedding, mockVector) {
			t.Fatalf("%s: data[%d] is %+v, want mock-embed's vector %v", c, i, d, mockVector)
		}
	}
}

// streamedText checks c is a chat.completion.chunk stream ending with
// data: [DONE] and returns the text its deltas add up to.
func streamedText(t *testing.T, c sessionCall) string {
	t.Helper()
	var (
		text   strings.Builder
		chunks int
		done   bool
	)
	for _, line := range strings.Split(string(c.body), "\n") {
		data, ok := strings.CutPrefix(line, "data: ")
		switch {
		case !ok:
			continue
		case done:
			t.Fatalf("%s: an event after data: [DONE]", c)
		case data == "[DONE]":
			done = true
			continue
		}
		var chunk struct {
			Object  string `json:"object"`
			Choices []struct {
				Delta struct {
					Content string `json:"content"`
				} `json:"delta"`
			} `json:"choices"`
		}
		if err := json.Unmarshal([]byte(data), &chunk); err != nil || chunk.Object != "chat.completion.chunk" {
			t.Fatalf("%s: event %q is not a chat.completion.chunk (%v)", c, data, err)
		}
		chunks++
		for _, ch := range chunk.Choices {
			text.WriteString(ch.Delta.Content)
		}
	}
	if !done || chunks < 3 {
		t.Fatalf("%s: want a few chunks then data: [DONE]", c)
	}
	return text.String()
}

// checkBatchOutput checks a batch output file: one line per request of
// requests.jsonl, by custom_id, each a chat completion with the mock's text.
func checkBatchOutput(t *testing.T, c sessionCall) {
	t.Helper()
	var ids []string
	for _, line := range bytes.Split(bytes.TrimSpace(c.body), []byte("\n")) {
		var out struct {
			CustomID string `json:"custom_id"`
			Response struct {
				StatusCode int `json:"status_code"`
				Body       struct {
					Object  string `json:"object"`
					Choices []struct {
						Message struct {
							Content string `json:"content"`
						} `json:"message"`
					} `json:"choices"`
				} `json:"body"`
			} `json:"response"`
		}
		if err := json.Unmarshal(line, &out); err != nil || out.Response.StatusCode != 200 || out.Response.Body.Object != "chat.completion" ||
			len(out.Response.Body.Choices) != 1 || out.Response.Body.Choices[0].Message.Content != mockText {
			t.Fatalf("%s: output line %s is not a 200 chat completion with the mock's text (%v)", c, line, err)
		}
		ids = append(ids, out.CustomID)
	}
	slices.Sort(ids)
	if !slices.Equal(ids, []string{"q1", "q2"}) {
		t.Fatalf("%s: output for %q, want q1 and q2", c, ids)
	}
}
