package metrics_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	"github.com/sluice-gateway/sluice/pkg/batches"
	"github.com/sluice-gateway/sluice/pkg/gateway/gatewaytest"
	"github.com/sluice-gateway/sluice/pkg/metrics"
)

// chatUpstream is an OpenAI-compatible provider: a chat answer uses 7
// prompt tokens and 5 completion tokens, streamed or not; model "broken"
// answers 500.
func chatUpstream(t testing.TB) *httptest.Server {
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var req struct {
			Model  string `json:"model"`
			Stream bool   `json:"stream"`
		}
		if err := json.NewDecoder(r.Body).Decode(&req); err != nil {
			t.Errorf("upstream: %v", err)
		}
		if req.Model == "broken-model" {
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusInternalServerError)
			io.WriteString(w, `{"error":{"message":"boom","type":"server_error"}}`)
			return
		}
		usage := `"usage":{"prompt_tokens":7,"completion_tokens":5,"total_tokens":12}`
		if !req.Stream {
			w.Header().Set("Content-Type", "application/json")
			io.WriteString(w, `{"id":"c1","object":"chat.completion","created":1,"model":"gpt-4o-mini","choices":[{"index":0,"message":{"role":"assistant","content":"hi"},"finish_reason":"stop"}],`+usage+`}`)
			return
		}
		w.Header().Set("Content-Type", "text/event-stream")
		chunk := `{"id":"c1","object":"chat.completion.chunk","created":1,"model":"gpt-4o-mini","choices":[%s]%s}`
		fmt.Fprintf(w, "data: "+chunk+"\n\n", `{"index":0,"delta":{"role":"assistant","content":"hi"}}`, "")
		w.(http.Flusher).Flush()
		fmt.Fprintf(w, "data: "+chunk+"\n\n", `{"index":0,"delta":{},"finish_reason":"stop"}`, "")
		fmt.Fprintf(w, "data: "+chunk+"\n\n", "", ","+usage)
		io.WriteString(w, "data: [DONE]\n\n")
	}))
	t.Cleanup(up.Close)
	return up
}

func chatConfig(up *httptest.Server) string {
	return "model_list:\n" +
		"  - model_name: gpt\n    litellm_params: {model: openai/gpt-4o-mini, api_base: " + up.URL + "/v1, api_key: k, max_retries: 0}\n" +
		"  - model_name: broken\n    litellm_params: {model: openai/broken-model, api_base: " + up.URL + "/v1, api_key: k, max_retries: 0}\n"
}

// scrape reads GET /metrics with the master key, as Prometheus would.
func scrape(t testing.TB, g *gatewaytest.Gateway) map[string]*dto.MetricFamily {
	t.Helper()
	resp := g.Do("GET", "/metrics", g.MasterKey, nil)
	if resp.Status != 200 || !strings.HasPrefix(resp.Header.Get("Content-Type"), "text/plain") {
		t.Fatalf("GET /metrics = %d %s", resp.Status, resp.Header.Get("Content-Type"))
	}
	p := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := p.TextToMetricFamilies(bytes.NewReader(resp.Body))
	if err != nil {
		t.Fatalf("parse /metrics: %v\n%s", err, resp.Body)
	}
	return fams
}

// value is the sum over the series of name whose labels include want: a
// counter's value, a histogram's sample count (or its sum, for name
// ending in "_sum").
func value(fams map[string]*dto.MetricFamily, name string, want map[string]string) float64 {
	sum := strings.HasSuffix(name, "_sum")
	f := fams[strings.TrimSuffix(name, "_sum")]
	if f == nil {
		return 0
	}
	total := 0.0
	for _, m := range f.GetMetric() {
		if !hasLabels(m, want) {
			continue
		}
		switch {
		case m.GetCounter() != nil:
			total += m.GetCounter().GetValue()
		case m.GetGauge() != nil:
			total += m.GetGauge().GetValue()
		case m.GetHistogram() != nil && sum:
			total += m.GetHistogram().GetSampleSum()
		case m.GetHistogram() != nil:
			total += float64(m.GetHistogram().GetSampleCount())
		}
	}
	return total
}

// hasLabels reports whether m's labels have want's values (an absent
// label is "": the exposition leaves empty labels out).
func hasLabels(m *dto.Metric, want map[string]string) bool {
	for k, v := range want {
		got := ""
		for _, l := range m.GetLabel() {
			if l.GetName() == k {
				got = l.GetValue()
			}
		}
		if got != v {
			return false
		}
	}
	return true
}

// movement is a metric's expected change.
type movement struct {
	name   string
	labels map[string]string
	delta  float64
}

// expectMoves scrapes until every movement is seen since before (the log
// event of a call is emitted once its answer has gone out, so the client
// may read the answer first), failing with what differs after a while.
func expectMoves(t *testing.T, g *gatewaytest.Gateway, before map[string]*dto.MetricFamily, moves []movement) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		after := scrape(t, g)
		var wrong []string
		for _, mv := range moves {
			got := value(after, mv.name, mv.labels) - value(before, mv.name, mv.labels)
			if got != mv.delta {
				wrong = append(wrong, fmt.Sprintf("%s%v moved %v, want %v", mv.name, mv.labels, got, mv.delta))
			}
		}
		if len(wrong) == 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("metrics did not move as expected:\n%s", strings.Join(wrong, "\n"))
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func TestMetricsMoveByWhatCallsDid(t *testing.T) {
	up := chatUpstream(t)
	gatewaytest.Run(t, gatewaytest.Options{Config: chatConfig(up)}, func(t *testing.T, g *gatewaytest.Gateway) {
		team, key := g.TeamKey()
		before := scrape(t, g)
		const route = "/v1/chat/completions"
		if r := g.Do("POST", route, key, `{"model":"gpt","messages":[{"role":"user","content":"hi"}]}`); r.Status != 200 {
			t.Fatalf("chat = %d %s", r.Status, r.Body)
		}
		if r := g.Do("POST", route, key, `{"model":"gpt","stream":true,"stream_options":{"include_usage":true},"messages":[{"role":"user","content":"hi"}]}`); r.Status != 200 || !strings.Contains(string(r.Body), "[DONE]") {
			t.Fatalf("stream = %d %s", r.Status, r.Body)
		}
		if r := g.Do("POST", route, key, `{"model":"no-such-model","messages":[{"role":"user","content":"hi"}]}`); r.Status != 404 {
			t.Fatalf("unknown model = %d %s", r.Status, r.Body)
		}
		if r := g.Do("POST", route, key, `{"model":"broken","messages":[{"role":"user","content":"hi"}]}`); r.Status < 500 {
			t.Fatalf("broken = %d %s", r.Status, r.Body)
		}
		gpt := map[string]string{"model": "gpt", "deployment": "gpt#0", "provider": "openai", "team": team}
		with := func(base map[string]string, kv ...string) map[string]string {
			m := map[string]string{}
			for k, v := range base {
				m[k] = v
			}
			for i := 0; i+1 < len(kv); i += 2 {
				m[kv[i]] = kv[i+1]
			}
			return m
		}
		expectMoves(t, g, before, []movement{
			{"sluice_requests_total", map[string]string{"route": route, "status": "2xx"}, 2},
			{"sluice_requests_total", map[string]string{"route": route, "status": "4xx"}, 1},
			{"sluice_requests_total", map[string]string{"route": route, "status": "5xx"}, 1},
			{"sluice_errors_total", map[string]string{"route": route, "status": "4xx", "code": "model_not_found"}, 1},
			{"sluice_errors_total", map[string]string{"route": route, "status": "5xx"}, 1},
			{"sluice_request_duration_seconds", map[string]string{"route": route}, 4},
			{"sluice_overhead_seconds", map[string]string{"route": route}, 4},
			{"sluice_model_calls_total", with(gpt, "status", "2xx"), 2},
			{"sluice_model_calls_total", map[string]string{"model": "other", "team": team, "status": "4xx", "code": "model_not_found"}, 1},
			{"sluice_model_calls_total", map[string]string{"model": "broken", "deployment": "broken#1", "team": team, "status": "5xx"}, 1},
			{"gen_ai_server_request_duration_seconds", gpt, 2},
			{"gen_ai_server_time_to_first_token_seconds", gpt, 1},
			{"gen_ai_client_token_usage", with(gpt, "gen_ai_token_type", "input"), 2},
			{"gen_ai_client_token_usage_sum", with(gpt, "gen_ai_token_type", "output"), 10},
			{"sluice_tokens_total", with(gpt, "gen_ai_token_type", "input"), 14},
			{"sluice_tokens_total", with(gpt, "gen_ai_token_type", "output"), 10},
		})
		// A team key is read from the records on its calls (a cache may
		// keep some of the four from reading), and no store call failed.
		after := scrape(t, g)
		gets := map[string]string{"store": "records", "operation": "get"}
		if got := value(after, "sluice_store_operation_duration_seconds", gets) - value(before, "sluice_store_operation_duration_seconds", gets); got < 1 {
			t.Errorf("records gets moved %v over four calls with a team key, want at least 1", got)
		}
		for _, c := range []string{"unavailable", "error"} {
			if got := value(after, "sluice_store_errors_total", map[string]string{"code": c}); got != 0 {
				t.Errorf("%v store errors with code %s", got, c)
			}
		}
	})
}

func TestMetricsNeedTheMasterKey(t *testing.T) {
	g := gatewaytest.Start(t, gatewaytest.Backends()[0], gatewaytest.Options{Config: chatConfig(chatUpstream(t))})
	_, key := g.TeamKey()
	if r := g.Do("GET", "/metrics", key, nil); r.Status != 403 {
		t.Errorf("GET /metrics with a team key = %d, want 403", r.Status)
	}
	if r := g.Do("GET", "/metrics", "", nil); r.Status != 401 {
		t.Errorf("GET /metrics without a key = %d, want 401", r.Status)
	}
}

// TestUnknownModelsStayOneLabelValue sends 1,000 calls naming models the
// gateway does not serve: the model label gains one value, "other".
func TestUnknownModelsStayOneLabelValue(t *testing.T) {
	g := gatewaytest.Start(t, gatewaytest.Backends()[0], gatewaytest.Options{Config: chatConfig(chatUpstream(t))})
	_, key := g.TeamKey()
	for i := range 1000 {
		body := fmt.Sprintf(`{"model":"made-up-%d","messages":[{"role":"user","content":"hi"}]}`, i)
		if r := g.Do("POST", "/v1/chat/completions", key, body); r.Status != 404 {
			t.Fatalf("call %d = %d %s", i, r.Status, r.Body)
		}
	}
	fams := scrape(t, g)
	models := map[string]bool{}
	for _, m := range fams["sluice_model_calls_total"].GetMetric() {
		for _, l := range m.GetLabel() {
			if l.GetName() == "model" {
				models[l.GetValue()] = true
			}
		}
	}
	if len(models) != 1 || !models["other"] {
		t.Errorf("model label values %v, want only other", models)
	}
	if got := value(fams, "sluice_model_calls_total", map[string]string{"model": "other"}); got != 1000 {
		t.Errorf("calls under other = %v, want 1000", got)
	}
	if n := len(fams["sluice_model_calls_total"].GetMetric()); n != 1 {
		t.Errorf("%d series of sluice_model_calls_total, want 1", n)
	}
}

func TestBatchLinesAreCounted(t *testing.T) {
	up := chatUpstream(t)
	opts := gatewaytest.Options{Config: chatConfig(up), Jobs: []string{"batch-worker"}, Batches: func(o *batches.Options) {
		o.ChunkLines = 2
		o.RetryDelay = 10 * time.Millisecond
		o.StatusEvery = 20 * time.Millisecond
	}}
	g := gatewaytest.Start(t, gatewaytest.Backends()[0], opts)
	team, key := g.TeamKey()
	before := scrape(t, g)
	var in strings.Builder
	for i, model := range []string{"gpt", "gpt", "gpt", "broken"} {
		fmt.Fprintf(&in, `{"custom_id":"l%d","method":"POST","url":"/v1/chat/completions","body":{"model":%q,"messages":[{"role":"user","content":"hi"}]}}`+"\n", i, model)
	}
	c := openai.NewClient(option.WithBaseURL(g.URL+"/v1/"), option.WithAPIKey(key), option.WithHTTPClient(g.Client), option.WithMaxRetries(0))
	ctx := context.Background()
	f, err := c.Files.New(ctx, openai.FileNewParams{File: openai.File(strings.NewReader(in.String()), "in.jsonl", "application/jsonl"), Purpose: openai.FilePurposeBatch})
	if err != nil {
		t.Fatal(err)
	}
	b, err := c.Batches.New(ctx, openai.BatchNewParams{InputFileID: f.ID, Endpoint: openai.BatchNewParamsEndpointV1ChatCompletions, CompletionWindow: openai.BatchNewParamsCompletionWindow24h})
	if err != nil {
		t.Fatal(err)
	}
	expectMoves(t, g, before, []movement{
		{"sluice_batch_lines_total", map[string]string{"model": "gpt", "team": team, "outcome": "done"}, 3},
		{"sluice_batch_lines_total", map[string]string{"model": "broken", "team": team, "outcome": "failed"}, 1},
		{"sluice_model_calls_total", map[string]string{"model": "gpt", "team": team, "status": "2xx"}, 3},
		{"sluice_tokens_total", map[string]string{"model": "gpt", "gen_ai_token_type": "input"}, 21},
		{"sluice_requests_total", map[string]string{"route": "/v1/batches", "status": "2xx"}, 1},
	})
	_ = b
}

// langsmith is a LangSmith runs endpoint that takes every run.
func langsmith(t testing.TB) *httptest.Server {
	s := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		w.Header().Set("Content-Type", "application/json")
		io.WriteString(w, `{}`)
	}))
	t.Cleanup(s.Close)
	return s
}

func TestCallbackDeliveriesAreCounted(t *testing.T) {
	up, sink := chatUpstream(t), langsmith(t)
	cfg := chatConfig(up) + "litellm_settings:\n  success_callback: [langsmith]\nenvironment_variables: {LANGSMITH_API_KEY: ls-key}\n"
	g := gatewaytest.Start(t, gatewaytest.Backends()[0], gatewaytest.Options{
		Config: cfg, Env: map[string]string{"LANGSMITH_BASE_URL": sink.URL}, Jobs: []string{"callback-delivery"},
	})
	_, key := g.TeamKey()
	before := scrape(t, g)
	for range 2 {
		if r := g.Do("POST", "/v1/chat/completions", key, `{"model":"gpt","messages":[{"role":"user","content":"hi"}]}`); r.Status != 200 {
			t.Fatalf("chat = %d %s", r.Status, r.Body)
		}
	}
	expectMoves(t, g, before, []movement{
		{"sluice_callback_events_total", map[string]string{"kind": "langsmith", "outcome": "delivered"}, 2},
		{"sluice_callback_events_total", map[string]string{"kind": "langsmith", "outcome": "dead_lettered"}, 0},
	})
}

// TestScrapesDuringLoad scrapes while calls run (run it with -race): every
// call is counted once.
func TestScrapesDuringLoad(t *testing.T) {
	g := gatewaytest.Start(t, gatewaytest.Backends()[0], gatewaytest.Options{Config: chatConfig(chatUpstream(t))})
	_, key := g.TeamKey()
	before := scrape(t, g)
	const workers, calls = 8, 25
	var wg sync.WaitGroup
	for range workers {
		wg.Go(func() {
			for range calls {
				if r := g.Do("POST", "/v1/chat/completions", key, `{"model":"gpt","messages":[{"role":"user","content":"hi"}]}`); r.Status != 200 {
					t.Errorf("chat = %d %s", r.Status, r.Body)
				}
			}
		})
	}
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	scrapes := 0
	for loop := true; loop; scrapes++ {
		select {
		case <-done:
			loop = false
		default:
		}
		scrape(t, g)
	}
	expectMoves(t, g, before, []movement{
		{"sluice_requests_total", map[string]string{"route": "/v1/chat/completions", "status": "2xx"}, workers * calls},
		{"sluice_model_calls_total", map[string]string{"model": "gpt", "status": "2xx"}, workers * calls},
		{"sluice_tokens_total", map[string]string{"model": "gpt", "gen_ai_token_type": "output"}, 5 * workers * calls},
	})
	if scrapes < 2 {
		t.Errorf("only %d scrapes during the load", scrapes)
	}
}

// TestBatchLinesWaitingFollowsTheBatch holds a running batch's lines at the
// provider: the gauge reads all four waiting (scraped, and as an EMF line
// from the sweep's EmitGauges), then none once they are let through.
func TestBatchLinesWaitingFollowsTheBatch(t *testing.T) {
	for _, b := range gatewaytest.Backends() {
		t.Run(b.Name, func(t *testing.T) { testLinesWaiting(t, b) })
	}
}

func testLinesWaiting(t *testing.T, b gatewaytest.Backend) {
	release := make(chan struct{})
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		select {
		case <-release:
		case <-r.Context().Done():
			return
		}
		w.Header().Set("Content-Type", "application/json")
		io.WriteString(w, `{"id":"c1","object":"chat.completion","created":1,"model":"gpt-4o-mini","choices":[{"index":0,"message":{"role":"assistant","content":"hi"},"finish_reason":"stop"}],"usage":{"prompt_tokens":7,"completion_tokens":5,"total_tokens":12}}`)
	}))
	t.Cleanup(up.Close)
	var once sync.Once
	let := func() { once.Do(func() { close(release) }) }
	t.Cleanup(let)
	g := gatewaytest.Start(t, b, gatewaytest.Options{Config: chatConfig(up), Jobs: []string{"batch-worker"}, Batches: func(o *batches.Options) {
		o.ChunkLines = 2
		o.RetryDelay = 10 * time.Millisecond
		o.StatusEvery = 20 * time.Millisecond
	}})
	_, key := g.TeamKey()
	var in strings.Builder
	for i := range 4 {
		fmt.Fprintf(&in, `{"custom_id":"l%d","method":"POST","url":"/v1/chat/completions","body":{"model":"gpt","messages":[{"role":"user","content":"hi"}]}}`+"\n", i)
	}
	c := openai.NewClient(option.WithBaseURL(g.URL+"/v1/"), option.WithAPIKey(key), option.WithHTTPClient(g.Client), option.WithMaxRetries(0))
	ctx := context.Background()
	f, err := c.Files.New(ctx, openai.FileNewParams{File: openai.File(strings.NewReader(in.String()), "in.jsonl", "application/jsonl"), Purpose: openai.FilePurposeBatch})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.Batches.New(ctx, openai.BatchNewParams{InputFileID: f.ID, Endpoint: openai.BatchNewParamsEndpointV1ChatCompletions, CompletionWindow: openai.BatchNewParamsCompletionWindow24h}); err != nil {
		t.Fatal(err)
	}
	waitForGauge(t, g, 4)

	var emf bytes.Buffer
	m := metrics.New(nil, metrics.Options{EMF: &emf, Namespace: "sluice/test"})
	m.WatchBatchLinesWaiting(g.Services.Batches.LinesWaiting)
	m.EmitGauges(ctx)
	if !strings.Contains(emf.String(), `"BatchLinesWaiting":4`) {
		t.Errorf("EMF gauges: %s", emf.String())
	}

	let()
	waitForGauge(t, g, 0)
}

// waitForGauge scrapes until sluice_batch_lines_waiting reads want.
func waitForGauge(t *testing.T, g *gatewaytest.Gateway, want float64) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for {
		fams := scrape(t, g)
		got, ok := -1.0, fams["sluice_batch_lines_waiting"] != nil
		if ok {
			got = value(fams, "sluice_batch_lines_waiting", nil)
		}
		if got == want {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("sluice_batch_lines_waiting = %v (present %v), want %v", got, ok, want)
		}
		time.Sleep(50 * time.Millisecond)
	}
}
