package gateway

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/binary"
	"flag"
	"io"
	"math"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/sluice-gateway/sluice/pkg/handoff"
)

// BenchmarkOverhead sets the local process (Serve, as make run starts it)
// beside a bare httputil.ReverseProxy (connection pool and copy buffers
// pooled, as the bench's baseline) on the paths issues 13 and 14 measure: an
// OpenAI embedding relayed (1536 floats), an Anthropic Messages call passed
// through, a Bedrock Titan embedding translated to OpenAI base64, and an
// OpenAI chat completion forwarded. The client, the
// upstream and the target share the process, so cpu-µs/op counts all three:
// the difference between a path's proxy and sluice rows is what sluice
// spends on top, and allocs/op are sluice's plus the same client's and
// upstream's. make bench measures the same paths across processes.
//
//	go test -run '^$' -bench Overhead -benchmem -count 10 ./pkg/gateway | benchstat -
func BenchmarkOverhead(b *testing.B) {
	up := httptest.NewServer(benchUpstream())
	b.Cleanup(up.Close)
	sluiceURL, key := benchSluice(b, up.URL)
	proxyURL := benchProxy(b, up.URL)

	embeddings := `{"model":"text-embedding-3-small","input":"` + benchInput + `"}`
	titan := `{"model":"titan","input":"` + benchInput + `","encoding_format":"base64"}`
	messages := `{"model":"claude-sonnet-4-5","max_tokens":256,"messages":[{"role":"user","content":"` + benchInput + `"}]}`
	chat := `{"model":"gpt-4o-mini","messages":[{"role":"system","content":"You are terse."},{"role":"user","content":"` + benchInput + `"}]}`
	for _, p := range []struct {
		name              string
		sluicePath, body  string
		proxyPath, toUp   string
		auth              func(h http.Header, key string)
		wantSluice, wantP int
	}{
		{"embeddings", "/v1/embeddings", embeddings, "/v1/embeddings", embeddings, bearer, len(embeddingAnswer), len(embeddingAnswer)},
		{"messages", "/anthropic/v1/messages", messages, "/v1/messages", messages, anthropicKey, len(messageAnswer), len(messageAnswer)},
		{"chat", "/v1/chat/completions", chat, "/v1/chat/completions", chat, bearer, len(chatAnswer), len(chatAnswer)},
		{"titan", "/v1/embeddings", titan, "/model/amazon.titan-embed-text-v2:0/invoke", `{"inputText":"` + benchInput + `"}`, bearer, -1, len(titanAnswer)},
	} {
		b.Run(p.name+"/proxy", func(b *testing.B) {
			benchCalls(b, proxyURL+p.proxyPath, p.toUp, func(h http.Header) { p.auth(h, "sk-client") }, p.wantP)
		})
		b.Run(p.name+"/sluice", func(b *testing.B) {
			benchCalls(b, sluiceURL+p.sluicePath, p.body, func(h http.Header) { p.auth(h, key) }, p.wantSluice)
		})
	}
}

func bearer(h http.Header, key string) { h.Set("Authorization", "Bearer "+key) }
func anthropicKey(h http.Header, key string) {
	h.Set("X-Api-Key", key)
	h.Set("Anthropic-Version", "2023-06-01")
}

// benchCalls sends b.N requests, 64 at a time (as the bench's closed loop),
// each read to its end, and reports the process's CPU time per request. An
// answer of another length than want (-1: any) fails the benchmark. settle,
// if any, runs inside the measurement after the calls, given how many were
// made (b.N and the first): work the calls leave behind (a callback's
// delivery) is counted too.
func benchCalls(b *testing.B, url, body string, auth func(http.Header), want int, settle ...func(calls int)) {
	tr := &http.Transport{MaxIdleConns: 256, MaxIdleConnsPerHost: 256, DisableCompression: true}
	b.Cleanup(tr.CloseIdleConnections)
	client := &http.Client{Transport: tr}
	do := func() error {
		req, err := http.NewRequest(http.MethodPost, url, strings.NewReader(body))
		if err != nil {
			return err
		}
		req.Header.Set("Content-Type", "application/json")
		auth(req.Header)
		resp, err := client.Do(req)
		if err != nil {
			return err
		}
		defer resp.Body.Close()
		n, err := io.Copy(io.Discard, resp.Body)
		if err != nil {
			return err
		}
		if resp.StatusCode != http.StatusOK || (want >= 0 && n != int64(want)) {
			return &answerError{status: resp.StatusCode, n: n, want: int64(want)}
		}
		return nil
	}
	if err := do(); err != nil { // a first call checks the path and opens a connection
		b.Fatal(err)
	}
	b.ReportAllocs()
	b.SetParallelism(*benchParallelism)
	cpu0 := cpuTime()
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			if err := do(); err != nil {
				b.Error(err)
				return
			}
		}
	})
	for _, f := range settle {
		f(b.N + 1)
	}
	b.StopTimer()
	if cpu := cpuTime() - cpu0; cpu > 0 {
		b.ReportMetric(float64(cpu.Microseconds())/float64(b.N), "cpu-µs/op")
	}
}

type answerError struct {
	status  int
	n, want int64
}

func (e *answerError) Error() string {
	return "answer " + strconv.Itoa(e.status) + ", " + strconv.FormatInt(e.n, 10) + " bytes (want 200, " + strconv.FormatInt(e.want, 10) + ")"
}

// benchInput is about 120 tokens, as the bench's.
var benchInput = strings.Repeat("Sluice stands in front of hosted model providers. ", 12)

// The upstream's answers: precomputed, as the bench upstream's.
var (
	benchVector     = benchFloats(1536)
	embeddingAnswer = []byte(`{"object":"list","data":[{"object":"embedding","index":0,"embedding":` + benchVector +
		`}],"model":"text-embedding-3-small","usage":{"prompt_tokens":120,"total_tokens":120}}`)
	titanAnswer = []byte(`{"embedding":` + benchVector + `,"inputTextTokenCount":120}`)
	chatAnswer  = []byte(`{"id":"chatcmpl-e13wu1oh","object":"chat.completion","created":1795930698,"model":"gpt-4o-mini","choices":[{"index":0,"message":{"role":"assistant","content":"` +
		strings.Repeat("Sluice answers. ", 70) + `","refusal":null,"annotations":[]},"logprobs":null,"finish_reason":"stop"}],"usage":{"prompt_tokens":1,"completion_tokens":200,"total_tokens":201,"prompt_tokens_details":{"cached_tokens":0,"audio_tokens":0},"completion_tokens_details":{"reasoning_tokens":0,"audio_tokens":0,"accepted_prediction_tokens":0,"rejected_prediction_tokens":0}},"service_tier":"default","system_fingerprint":"fp_bench"}`)
	messageAnswer = []byte(`{"id":"msg_1","type":"message","role":"assistant","model":"claude-sonnet-4-5","content":[{"type":"text","text":"Hello."}],"stop_reason":"end_turn","stop_sequence":null,"usage":{"input_tokens":120,"output_tokens":3}}`)
)

// benchFloats is a JSON array of n float32s as providers write them.
func benchFloats(n int) string {
	var b []byte
	b = append(b, '[')
	var raw [4]byte
	for i := range n {
		if i > 0 {
			b = append(b, ',')
		}
		binary.LittleEndian.PutUint32(raw[:], uint32(i)*2654435761)
		x := float32(math.Sin(float64(binary.LittleEndian.Uint32(raw[:])))) / 40
		b = strconv.AppendFloat(b, float64(x), 'g', -1, 32)
	}
	return string(append(b, ']'))
}

func benchUpstream() http.Handler {
	answer := func(body []byte) http.HandlerFunc {
		return func(w http.ResponseWriter, r *http.Request) {
			io.Copy(io.Discard, r.Body)
			w.Header().Set("Content-Type", "application/json")
			w.Header().Set("Content-Length", strconv.Itoa(len(body)))
			w.Write(body)
		}
	}
	mux := http.NewServeMux()
	mux.Handle("POST /v1/embeddings", answer(embeddingAnswer))
	mux.Handle("POST /v1/messages", answer(messageAnswer))
	mux.Handle("POST /v1/chat/completions", answer(chatAnswer))
	mux.Handle("POST /model/{model}/invoke", answer(titanAnswer))
	return mux
}

// benchSluice starts the local process on upstream and returns its URL and
// a team key.
func benchSluice(b testing.TB, upstream string) (url, key string) {
	conf := "model_list:\n" +
		"  - model_name: text-embedding-3-small\n    litellm_params: {model: openai/text-embedding-3-small, api_base: " + upstream + "/v1, api_key: sk-up}\n" +
		"  - model_name: gpt-4o-mini\n    litellm_params: {model: openai/gpt-4o-mini, api_base: " + upstream + "/v1, api_key: sk-up}\n" +
		"  - model_name: titan\n    litellm_params: {model: bedrock/amazon.titan-embed-text-v2:0, api_base: " + upstream +
		", aws_region_name: us-east-1, aws_access_key_id: AKIDBENCH, aws_secret_access_key: bench-secret}\n" +
		"passthrough:\n  anthropic: {api_base: " + upstream + ", api_key: sk-ant-up}\n"
	return benchSluiceWith(b, conf)
}

// benchSluiceWith starts the local process with the config conf and
// returns its URL and a team key. Its log events go to the delivery job in
// memory (pkg/handoff), as in functions/local.
func benchSluiceWith(b testing.TB, conf string) (url, key string) {
	dir := b.TempDir()
	confPath := filepath.Join(dir, "config.yaml")
	if err := os.WriteFile(confPath, []byte(conf), 0o600); err != nil {
		b.Fatal(err)
	}
	master := "sk-bench-master"
	env := map[string]string{"SLUICE_DATA_DIR": filepath.Join(dir, "data"), "SLUICE_ADDR": "127.0.0.1:0", "SLUICE_MASTER_KEY": master, "SLUICE_CONFIG": confPath}
	g, err := Open(context.Background(), func(k string) string { return env[k] }, WithHandoff(handoff.Wrap))
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { g.Close() })
	url, _, stop := serve(b, g)
	b.Cleanup(stop)
	team := post(b, url+"/team/new", master, `{"team_alias":"bench"}`)["team_id"].(string)
	key = post(b, url+"/key/generate", master, `{"team_id":"`+team+`"}`)["key"].(string)
	return url, key
}

// benchProxy starts the bare baseline: the bench proxy's settings.
func benchProxy(b *testing.B, upstream string) string {
	target, err := url.Parse(upstream)
	if err != nil {
		b.Fatal(err)
	}
	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.MaxIdleConns, tr.MaxIdleConnsPerHost = 1024, 1024
	b.Cleanup(tr.CloseIdleConnections)
	proxy := &httputil.ReverseProxy{
		Rewrite:    func(r *httputil.ProxyRequest) { r.SetURL(target) },
		Transport:  tr,
		BufferPool: &copyBuffers{},
	}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_ = http.NewResponseController(w).EnableFullDuplex()
		proxy.ServeHTTP(w, r)
	}))
	b.Cleanup(srv.Close)
	return srv.URL
}

type copyBuffers struct{ pool sync.Pool }

func (p *copyBuffers) Get() []byte {
	if b, ok := p.pool.Get().(*[]byte); ok {
		return *b
	}
	return make([]byte, 32<<10)
}

func (p *copyBuffers) Put(b []byte) { p.pool.Put(&b) }

// TestOverheadPathsAnswer keeps the benchmark's three sluice paths honest:
// each answers 200 with the answer it relays or translates.
func TestOverheadPathsAnswer(t *testing.T) {
	up := httptest.NewServer(benchUpstream())
	t.Cleanup(up.Close)
	url, key := benchSluice(t, up.URL)
	for _, tc := range []struct{ path, body, auth, want string }{
		{"/v1/embeddings", `{"model":"text-embedding-3-small","input":"x"}`, "Authorization", string(embeddingAnswer)},
		{"/anthropic/v1/messages", `{"model":"claude-sonnet-4-5","max_tokens":8,"messages":[]}`, "X-Api-Key", string(messageAnswer)},
	} {
		req, _ := http.NewRequest(http.MethodPost, url+tc.path, strings.NewReader(tc.body))
		if tc.auth == "Authorization" {
			bearer(req.Header, key)
		} else {
			anthropicKey(req.Header, key)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		got, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 200 || string(got) != tc.want {
			t.Errorf("%s: %d %.200s", tc.path, resp.StatusCode, got)
		}
	}
	titan := post(t, url+"/v1/embeddings", key, `{"model":"titan","input":"x","encoding_format":"base64"}`)
	vec, _ := base64.StdEncoding.DecodeString(titan["data"].([]any)[0].(map[string]any)["embedding"].(string))
	if want := bytes.Count([]byte(benchVector), []byte(",")) + 1; len(vec) != 4*want {
		t.Errorf("titan: %d bytes of float32, want %d floats", len(vec), want)
	}
}

// benchParallelism is callers per core of BenchmarkOverhead: 32 (64 callers
// on 2 cores, as the bench's closed loop); 1 for memory profiles that read
// one request at a time.
var benchParallelism = flag.Int("overhead.parallelism", 32, "BenchmarkOverhead: callers per GOMAXPROCS")
