package batches_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"

	"github.com/sluice-gateway/sluice/pkg/batches"
	"github.com/sluice-gateway/sluice/pkg/gateway/gatewaytest"
	"github.com/sluice-gateway/sluice/pkg/providers/bedrock/bedrocktest"
)

// The stand-in providers, in one httptest server: an OpenAI-compatible API
// (embeddings and chat completions, Bearer key), Bedrock's InvokeModel for
// Titan Text Embeddings v2 (SigV4, checked by recomputing the signature)
// and Anthropic's Messages API (x-api-key and anthropic-version), which
// sluice translates chat completions to.
const (
	upstreamKey = "sk-upstream-secret"
	awsKeyID    = "AKIDBATCHTEST"
	awsSecret   = "batch-aws-secret"
)

// upstream answers embeddings deterministically (a vector per input text)
// and chat with the text of the last message echoed ("echo: " + text),
// counts the calls it got per input text, and does what a text asks:
// "fail-400" (a 400 with the provider's error), "block" (wait until the
// test opens the gate), "hold" (wait until the test ends), "slow" (100 ms).
type upstream struct {
	*httptest.Server
	t    testing.TB
	mu   sync.Mutex
	seen map[string]int // input text → calls
	gate chan struct{}  // closed: blocked calls go on
	held chan struct{}  // closed when the test ends
	// blocked receives the text of each call that starts waiting at the gate.
	blocked chan string
}

func newUpstream(t testing.TB) *upstream {
	u := &upstream{t: t, seen: map[string]int{}, gate: make(chan struct{}), held: make(chan struct{}), blocked: make(chan string, 1000)}
	u.Server = httptest.NewServer(http.HandlerFunc(u.serve))
	t.Cleanup(func() { u.open(); close(u.held); u.Close() })
	return u
}

// open lets blocked calls go on (and every later one through).
func (u *upstream) open() {
	u.mu.Lock()
	defer u.mu.Unlock()
	select {
	case <-u.gate:
	default:
		close(u.gate)
	}
}

func (u *upstream) calls(text string) int {
	u.mu.Lock()
	defer u.mu.Unlock()
	return u.seen[text]
}

func (u *upstream) total() int {
	u.mu.Lock()
	defer u.mu.Unlock()
	n := 0
	for _, c := range u.seen {
		n += c
	}
	return n
}

func (u *upstream) serve(w http.ResponseWriter, r *http.Request) {
	raw, _ := io.ReadAll(r.Body)
	var body map[string]any
	if err := json.Unmarshal(raw, &body); err != nil {
		u.t.Errorf("upstream: %s %s: %s", r.Method, r.URL.Path, raw)
	}
	w.Header().Set("Content-Type", "application/json")
	titan := strings.HasPrefix(r.URL.EscapedPath(), "/model/")
	var text string
	var chat string // the provider, for a chat call
	switch {
	case r.URL.Path == "/v1/chat/completions":
		if r.Header.Get("Authorization") != "Bearer "+upstreamKey {
			w.WriteHeader(401)
			io.WriteString(w, `{"error":{"message":"Incorrect API key provided.","type":"invalid_request_error","param":null,"code":"invalid_api_key"}}`)
			return
		}
		chat, text = "openai", lastMessage(u.t, body)
	case r.URL.Path == "/v1/messages":
		if r.Header.Get("X-Api-Key") != upstreamKey || r.Header.Get("Anthropic-Version") == "" {
			w.WriteHeader(401)
			io.WriteString(w, `{"type":"error","error":{"type":"authentication_error","message":"invalid x-api-key"}}`)
			return
		}
		if _, ok := body["max_tokens"].(float64); !ok || body["model"] != "claude-sonnet-4-5" {
			u.t.Errorf("upstream: an Anthropic request without max_tokens or with another model: %s", raw)
		}
		chat, text = "anthropic", lastMessage(u.t, body)
	case titan:
		if _, err := bedrocktest.Verify(r, raw, func(id string) (string, string, bool) { return awsSecret, "", id == awsKeyID }); err != nil {
			w.WriteHeader(403)
			io.WriteString(w, `{"message":"The security token included in the request is invalid."}`)
			return
		}
		if r.URL.EscapedPath() != "/model/amazon.titan-embed-text-v2%3A0/invoke" {
			u.t.Errorf("upstream: titan path %s", r.URL.EscapedPath())
		}
		text, _ = body["inputText"].(string)
	case r.URL.Path == "/v1/embeddings":
		if r.Header.Get("Authorization") != "Bearer "+upstreamKey {
			w.WriteHeader(401)
			io.WriteString(w, `{"error":{"message":"Incorrect API key provided.","type":"invalid_request_error","param":null,"code":"invalid_api_key"}}`)
			return
		}
		text, _ = body["input"].(string)
	default:
		w.WriteHeader(404)
		io.WriteString(w, `{"error":{"message":"no such path","type":"invalid_request_error","param":null,"code":null}}`)
		return
	}
	u.mu.Lock()
	u.seen[text]++
	u.mu.Unlock()
	switch {
	case strings.HasPrefix(text, "fail-400"):
		w.WriteHeader(400)
		if chat == "anthropic" {
			io.WriteString(w, `{"type":"error","error":{"type":"invalid_request_error","message":"messages: this input is not valid for this model."}}`)
		} else if titan {
			io.WriteString(w, `{"message":"Malformed input request: the input text is not valid for this model."}`)
		} else {
			io.WriteString(w, `{"error":{"message":"This input is not valid for this model.","type":"invalid_request_error","param":"input","code":null}}`)
		}
		return
	case strings.HasPrefix(text, "block"):
		u.blocked <- text
		select {
		case <-u.gate:
		case <-r.Context().Done():
			return
		}
	case strings.HasPrefix(text, "hold"):
		u.blocked <- text
		select {
		case <-u.held:
		case <-r.Context().Done():
			return
		}
	case strings.HasPrefix(text, "slow"):
		time.Sleep(100 * time.Millisecond)
	}
	switch chat {
	case "openai":
		fmt.Fprintf(w, `{"id":"chatcmpl-up%d","object":"chat.completion","created":1700000000,"model":"gpt-4o-mini-2024-07-18",`+
			`"choices":[{"index":0,"message":{"role":"assistant","content":%s,"refusal":null},"logprobs":null,"finish_reason":"stop"}],`+
			`"usage":{"prompt_tokens":5,"completion_tokens":7,"total_tokens":12}}`, len(text), quote("echo: "+text))
		return
	case "anthropic":
		fmt.Fprintf(w, `{"id":"msg_01up%d","type":"message","role":"assistant","model":"claude-sonnet-4-5-20250929",`+
			`"content":[{"type":"text","text":%s}],"stop_reason":"end_turn","stop_sequence":null,`+
			`"usage":{"input_tokens":6,"output_tokens":8}}`, len(text), quote("echo: "+text))
		return
	}
	vec := vector(text, 4)
	if titan {
		fmt.Fprintf(w, `{"embedding":%s,"inputTextTokenCount":3}`, floats(vec))
		return
	}
	fmt.Fprintf(w, `{"object":"list","data":[{"object":"embedding","index":0,"embedding":%s}],"model":"text-embedding-3-small","usage":{"prompt_tokens":3,"total_tokens":3}}`, floats(vec))
}

// lastMessage is the text of a chat request's last message (a string, or
// OpenAI's or Anthropic's text parts).
func lastMessage(t testing.TB, body map[string]any) string {
	msgs, _ := body["messages"].([]any)
	if len(msgs) == 0 {
		t.Errorf("upstream: a chat request without messages: %v", body)
		return ""
	}
	m, _ := msgs[len(msgs)-1].(map[string]any)
	switch c := m["content"].(type) {
	case string:
		return c
	case []any:
		var b strings.Builder
		for _, p := range c {
			if p, ok := p.(map[string]any); ok && p["type"] == "text" {
				s, _ := p["text"].(string)
				b.WriteString(s)
			}
		}
		return b.String()
	}
	t.Errorf("upstream: a last message without content: %v", m)
	return ""
}

func quote(s string) string {
	b, _ := json.Marshal(s)
	return string(b)
}

// vector is the deterministic embedding of text.
func vector(text string, dims int) []float64 {
	v := make([]float64, dims)
	for i := range v {
		v[i] = math.Round(math.Sin(float64(len(text)*31+i+int(text[len(text)-1])))*1e4) / 1e4
	}
	return v
}

func floats(v []float64) string {
	b, _ := json.Marshal(v)
	return string(b)
}

// config routes the embeddings models "emb" to the OpenAI-compatible
// stand-in and "titan" to the Bedrock one, and the chat models "gpt" to the
// OpenAI-compatible stand-in and "claude" to the Anthropic one.
func modelConfig(u *upstream) string {
	return "model_list:\n" +
		"  - model_name: emb\n    litellm_params: {model: openai/text-embedding-3-small, api_base: " + u.URL + "/v1, api_key: os.environ/UPSTREAM_KEY}\n" +
		"  - model_name: titan\n    litellm_params: {model: bedrock/amazon.titan-embed-text-v2:0, api_base: " + u.URL +
		", aws_region_name: us-east-1, aws_access_key_id: " + awsKeyID + ", aws_secret_access_key: os.environ/AWS_SECRET}\n" +
		"  - model_name: gpt\n    litellm_params: {model: openai/gpt-4o-mini, api_base: " + u.URL + "/v1, api_key: os.environ/UPSTREAM_KEY}\n" +
		"  - model_name: claude\n    litellm_params: {model: anthropic/claude-sonnet-4-5, api_base: " + u.URL + ", api_key: os.environ/UPSTREAM_KEY}\n"
}

var env = map[string]string{"UPSTREAM_KEY": upstreamKey, "AWS_SECRET": awsSecret}

// options are a test gateway's: the stand-ins, the batch worker running,
// and small chunks so that even small batches have several.
func options(u *upstream, tune ...func(*batches.Options)) gatewaytest.Options {
	return gatewaytest.Options{
		Config: modelConfig(u), Env: env, Jobs: []string{"batch-worker"},
		Batches: func(o *batches.Options) {
			o.ChunkLines = 3
			o.RetryDelay = 10 * time.Millisecond
			o.StatusEvery = 20 * time.Millisecond
			for _, f := range tune {
				f(o)
			}
		},
	}
}

// runEach runs f once per backend (gatewaytest.Backends), each with a
// stand-in of its own (its gate and its counts are the run's) and a
// gateway built with opts over it.
func runEach(t *testing.T, opts func(u *upstream) gatewaytest.Options, f func(t *testing.T, u *upstream, g *gatewaytest.Gateway)) {
	for _, b := range gatewaytest.Backends() {
		t.Run(b.Name, func(t *testing.T) {
			u := newUpstream(t)
			f(t, u, gatewaytest.Start(t, b, opts(u)))
		})
	}
}

// line is one input line.
type line struct {
	CustomID string         `json:"custom_id"`
	Method   string         `json:"method"`
	URL      string         `json:"url"`
	Body     map[string]any `json:"body"`
}

// embeddingLines makes n lines for model: custom ids "<prefix>-<i>", inputs
// text(i).
func embeddingLines(model, prefix string, n int, text func(i int) string) []line {
	out := make([]line, n)
	for i := range out {
		out[i] = line{CustomID: prefix + "-" + strconv.Itoa(i), Method: "POST", URL: "/v1/embeddings",
			Body: map[string]any{"model": model, "input": text(i)}}
	}
	return out
}

// chatLines makes n chat lines for model: custom ids "<prefix>-<i>", one
// user message text(i).
func chatLines(model, prefix string, n int, text func(i int) string) []line {
	out := make([]line, n)
	for i := range out {
		out[i] = line{CustomID: prefix + "-" + strconv.Itoa(i), Method: "POST", URL: "/v1/chat/completions",
			Body: map[string]any{"model": model, "messages": []any{map[string]any{"role": "user", "content": text(i)}}}}
	}
	return out
}

func jsonl(lines []line) string {
	var b strings.Builder
	enc := json.NewEncoder(&b)
	for _, l := range lines {
		enc.Encode(l)
	}
	return b.String()
}

func client(g *gatewaytest.Gateway, key string) openai.Client {
	return openai.NewClient(option.WithBaseURL(g.URL+"/v1/"), option.WithAPIKey(key), option.WithHTTPClient(g.Client), option.WithMaxRetries(0))
}

// uploadInput uploads content as a batch input file.
func uploadInput(t testing.TB, g *gatewaytest.Gateway, key, content string) string {
	t.Helper()
	c := client(g, key)
	f, err := c.Files.New(context.Background(), openai.FileNewParams{
		File: openai.File(strings.NewReader(content), "input.jsonl", "application/jsonl"), Purpose: openai.FilePurposeBatch,
	})
	if err != nil {
		t.Fatalf("upload: %v", err)
	}
	return f.ID
}

// createBatch creates an embeddings batch on file and returns it.
func createBatch(t testing.TB, g *gatewaytest.Gateway, key, file string) batches.Batch {
	t.Helper()
	resp := g.Do("POST", "/v1/batches", key, map[string]any{"input_file_id": file, "endpoint": "/v1/embeddings", "completion_window": "24h"})
	if resp.Status != 200 {
		t.Fatalf("create: %d %s", resp.Status, resp.Body)
	}
	return decodeBatch(t, resp.Body)
}

func decodeBatch(t testing.TB, body []byte) batches.Batch {
	t.Helper()
	var b batches.Batch
	if err := json.Unmarshal(body, &b); err != nil {
		t.Fatalf("not a batch: %s", body)
	}
	return b
}

func getBatch(t testing.TB, g *gatewaytest.Gateway, key, id string) batches.Batch {
	t.Helper()
	resp := g.Do("GET", "/v1/batches/"+id, key, nil)
	if resp.Status != 200 {
		t.Fatalf("get %s: %d %s", id, resp.Status, resp.Body)
	}
	return decodeBatch(t, resp.Body)
}

// waitFor polls batch id until it has status (a client polls the same way),
// failing the test if it ends otherwise or takes more than 30 s.
func waitFor(t testing.TB, g *gatewaytest.Gateway, key, id, status string) batches.Batch {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for poll := time.Millisecond; ; poll = min(2*poll, 50*time.Millisecond) {
		b := getBatch(t, g, key, id)
		switch {
		case b.Status == status:
			return b
		case b.Status == batches.StatusCompleted || b.Status == batches.StatusFailed || b.Status == batches.StatusExpired || b.Status == batches.StatusCancelled:
			t.Fatalf("batch %s ended %s, want %s: %+v", id, b.Status, status, b)
		case time.Now().After(deadline):
			t.Fatalf("batch %s still %s after 30 s (%+v), want %s", id, b.Status, b.RequestCounts, status)
		}
		time.Sleep(poll)
	}
}

// result is one line of an output or error file.
type result struct {
	ID       string `json:"id"`
	CustomID string `json:"custom_id"`
	Response *struct {
		StatusCode int             `json:"status_code"`
		RequestID  string          `json:"request_id"`
		Body       json.RawMessage `json:"body"`
	} `json:"response"`
	Error *struct {
		Code    string `json:"code"`
		Message string `json:"message"`
	} `json:"error"`
}

// download reads file id's lines ("" reads nothing).
func download(t testing.TB, g *gatewaytest.Gateway, key, id string) []result {
	t.Helper()
	if id == "" {
		return nil
	}
	resp := g.Do("GET", "/v1/files/"+id+"/content", key, nil)
	if resp.Status != 200 {
		t.Fatalf("content of %s: %d %s", id, resp.Status, resp.Body)
	}
	var out []result
	sc := bufio.NewScanner(bytes.NewReader(resp.Body))
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		var r result
		if err := json.Unmarshal(sc.Bytes(), &r); err != nil {
			t.Fatalf("file %s: line %q is not JSON: %v", id, sc.Text(), err)
		}
		out = append(out, r)
	}
	if len(resp.Body) > 0 && resp.Body[len(resp.Body)-1] != '\n' {
		t.Errorf("file %s does not end with a newline", id)
	}
	return out
}

// outcome is a finished batch's files, by custom_id.
type outcome struct {
	out, errs map[string]result
}

// collect downloads b's output and error files, failing the test unless
// every custom id of want appears exactly once across them, and nothing
// else does.
func collect(t testing.TB, g *gatewaytest.Gateway, key string, b batches.Batch, want []line) outcome {
	t.Helper()
	o := outcome{out: map[string]result{}, errs: map[string]result{}}
	seen := map[string]int{}
	ids := map[string]bool{}
	for _, f := range []struct {
		id *string
		m  map[string]result
	}{{b.OutputFileID, o.out}, {b.ErrorFileID, o.errs}} {
		if f.id == nil {
			continue
		}
		for _, r := range download(t, g, key, *f.id) {
			seen[r.CustomID]++
			f.m[r.CustomID] = r
			if !strings.HasPrefix(r.ID, "batch_req_") || ids[r.ID] {
				t.Errorf("line id %q (custom_id %s) is not a fresh batch_req_ id", r.ID, r.CustomID)
			}
			ids[r.ID] = true
		}
	}
	for _, l := range want {
		if seen[l.CustomID] != 1 {
			t.Errorf("custom_id %s appears %d times across the output and error files, want once", l.CustomID, seen[l.CustomID])
		}
		delete(seen, l.CustomID)
	}
	for id := range seen {
		t.Errorf("custom_id %s is in the files but in no input line", id)
	}
	return o
}
