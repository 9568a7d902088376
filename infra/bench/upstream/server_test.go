package main

import (
	"bufio"
	"encoding/base64"
	"encoding/binary"
	"encoding/json"
	"io"
	"math"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

func newTestServer(t *testing.T, o options) *httptest.Server {
	t.Helper()
	if o.dims == 0 {
		o.dims = 1536
	}
	if o.streamChunks == 0 {
		o.streamChunks = 200
	}
	if err := o.validate(); err != nil {
		t.Fatal(err)
	}
	ts := httptest.NewServer(newServer(o))
	t.Cleanup(ts.Close)
	return ts
}

func TestEmbeddingsFloatAndBase64Agree(t *testing.T) {
	ts := newTestServer(t, options{})
	var asFloat, asB64 struct {
		Data []struct {
			Index     int
			Embedding json.RawMessage
		}
		Usage struct {
			PromptTokens int `json:"prompt_tokens"`
		}
	}
	mustUnmarshal(t, readAll(t, post(t, ts.URL+"/v1/embeddings", `{"model":"m","input":["a","b","c"]}`)), &asFloat)
	mustUnmarshal(t, readAll(t, post(t, ts.URL+"/v1/embeddings", `{"model":"m","input":"a","encoding_format":"base64"}`)), &asB64)
	if len(asFloat.Data) != 3 || asFloat.Data[2].Index != 2 || asFloat.Usage.PromptTokens < 1 {
		t.Fatalf("float answer: %+v", asFloat)
	}
	var floats []float64
	mustUnmarshal(t, asFloat.Data[0].Embedding, &floats)
	if len(floats) != 1536 {
		t.Fatalf("%d dims, want 1536", len(floats))
	}
	var s string
	mustUnmarshal(t, asB64.Data[0].Embedding, &s)
	raw, err := base64.StdEncoding.DecodeString(s)
	if err != nil || len(raw) != 4*1536 {
		t.Fatalf("base64: %d bytes, %v", len(raw), err)
	}
	var norm float64
	for i, f := range floats {
		got := math.Float32frombits(binary.LittleEndian.Uint32(raw[4*i:]))
		if float32(f) != got {
			t.Fatalf("dim %d: float %v, base64 %v", i, f, got)
		}
		norm += f * f
	}
	if math.Abs(norm-1) > 1e-3 {
		t.Errorf("norm² %v, want 1", norm)
	}
}

func TestModerationShape(t *testing.T) {
	ts := newTestServer(t, options{})
	var got struct {
		ID      string
		Model   string
		Results []struct {
			Flagged                   bool
			Categories                map[string]bool
			CategoryScores            map[string]float64  `json:"category_scores"`
			CategoryAppliedInputTypes map[string][]string `json:"category_applied_input_types"`
		}
	}
	mustUnmarshal(t, readAll(t, post(t, ts.URL+"/v1/moderations", `{"input":["one","two"]}`)), &got)
	if !strings.HasPrefix(got.ID, "modr-") || got.Model != "omni-moderation-latest" || len(got.Results) != 2 {
		t.Fatalf("answer %+v", got)
	}
	r := got.Results[0]
	if len(r.Categories) != 13 || len(r.CategoryScores) != 13 || len(r.CategoryAppliedInputTypes) != 13 {
		t.Fatalf("categories %d, scores %d, applied %d; want 13 each", len(r.Categories), len(r.CategoryScores), len(r.CategoryAppliedInputTypes))
	}
}

func TestChatStreamWithUsage(t *testing.T) {
	ts := newTestServer(t, options{streamChunks: 300})
	resp := post(t, ts.URL+"/v1/chat/completions",
		`{"model":"gpt-4o-mini","stream":true,"stream_options":{"include_usage":true},"messages":[{"role":"user","content":"hello"}]}`)
	var content strings.Builder
	var chunks, completion int
	done := false
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		line, ok := strings.CutPrefix(sc.Text(), "data: ")
		if !ok {
			continue
		}
		if line == "[DONE]" {
			done = true
			continue
		}
		var c struct {
			Object  string
			Choices []struct{ Delta struct{ Content string } }
			Usage   *struct {
				CompletionTokens int `json:"completion_tokens"`
			}
		}
		mustUnmarshal(t, []byte(line), &c)
		if c.Object != "chat.completion.chunk" {
			t.Fatalf("object %q", c.Object)
		}
		chunks++
		for _, ch := range c.Choices {
			content.WriteString(ch.Delta.Content)
		}
		if c.Usage != nil {
			completion = c.Usage.CompletionTokens
		}
	}
	if !done || completion != 300 || chunks != 300+3 {
		t.Fatalf("done=%v completion=%d chunks=%d", done, completion, chunks)
	}
	if n := len(strings.Fields(content.String())); n != 300 {
		t.Errorf("%d words streamed, want 300", n)
	}
}

func TestAnthropicStreamEvents(t *testing.T) {
	ts := newTestServer(t, options{streamChunks: 5})
	resp := post(t, ts.URL+"/v1/messages", `{"model":"claude-sonnet-4-5","max_tokens":2,"stream":true,"messages":[{"role":"user","content":"hi"}]}`)
	var events []string
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		if name, ok := strings.CutPrefix(sc.Text(), "event: "); ok {
			events = append(events, name)
		}
	}
	want := "message_start content_block_start ping content_block_delta content_block_delta content_block_stop message_delta message_stop"
	if got := strings.Join(events, " "); got != want {
		t.Fatalf("events\n got %s\nwant %s", got, want)
	}
}

func TestInjectedErrors(t *testing.T) {
	ts := newTestServer(t, options{errorRate: 1})
	for _, path := range []string{"/v1/embeddings", "/v1/messages", "/v1beta/models/gemini-2.0-flash:generateContent", "/model/x/converse"} {
		resp, err := http.Post(ts.URL+path, "application/json", strings.NewReader(`{}`))
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusTooManyRequests && resp.StatusCode != http.StatusInternalServerError {
			t.Errorf("%s: status %d, want 429 or 500", path, resp.StatusCode)
		}
		if resp.Header.Get("Retry-After") == "" {
			t.Errorf("%s: no Retry-After", path)
		}
	}
	if st := benchStats(t, ts.URL); st.Total != 4 || st.InjectedErrors != 4 {
		t.Errorf("stats %+v", st)
	}
}

// benchStats reads the upstream's /_bench/stats.
func benchStats(t *testing.T, base string) statsSnapshot {
	t.Helper()
	resp, err := http.Get(base + "/_bench/stats")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var st statsSnapshot
	mustUnmarshal(t, readAll(t, resp), &st)
	return st
}

func TestInputs(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want int
	}{
		{`"one"`, 1},
		{`["a","b","c"]`, 3},
		{`[1,2,3]`, 1},
		{`[[1,2],[3]]`, 2},
	} {
		if n, _ := inputs(json.RawMessage(tc.in)); n != tc.want {
			t.Errorf("inputs(%s) = %d, want %d", tc.in, n, tc.want)
		}
	}
}

func readAll(t *testing.T, resp *http.Response) []byte {
	t.Helper()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return b
}
