package traces_test

import (
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
	"go.opentelemetry.io/otel/attribute"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	"github.com/sluice-gateway/sluice/pkg/batches"
	"github.com/sluice-gateway/sluice/pkg/gateway/gatewaytest"
	"github.com/sluice-gateway/sluice/pkg/traces"
	"github.com/sluice-gateway/sluice/pkg/traces/otlp"
)

// upstream is an OpenAI-compatible chat provider that records the
// traceparent of each request.
type upstream struct {
	*httptest.Server
	mu      sync.Mutex
	parents []string
}

func newUpstream(t *testing.T) *upstream {
	u := &upstream{}
	u.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		u.mu.Lock()
		u.parents = append(u.parents, r.Header.Get("Traceparent"))
		u.mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		io.WriteString(w, `{"id":"c1","object":"chat.completion","created":1,"model":"gpt-4o-mini","choices":[{"index":0,"message":{"role":"assistant","content":"hi"},"finish_reason":"stop"}],"usage":{"prompt_tokens":7,"completion_tokens":5,"total_tokens":12}}`)
	}))
	t.Cleanup(u.Close)
	return u
}

func (u *upstream) traceparents() []string {
	u.mu.Lock()
	defer u.mu.Unlock()
	return append([]string(nil), u.parents...)
}

func config(u *upstream) string {
	return "model_list:\n  - model_name: gpt\n    litellm_params: {model: openai/gpt-4o-mini, api_base: " + u.URL + "/v1, api_key: k}\n"
}

// spans waits until the exporter holds spans that ok accepts.
func spans(t *testing.T, exp *tracetest.InMemoryExporter, ok func(tracetest.SpanStubs) bool) tracetest.SpanStubs {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		got := exp.GetSpans()
		if ok(got) {
			return got
		}
		if time.Now().After(deadline) {
			var names []string
			for _, s := range got {
				names = append(names, s.Name)
			}
			t.Fatalf("spans not as expected; have %v", names)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func named(ss tracetest.SpanStubs, name string) []tracetest.SpanStub {
	var out []tracetest.SpanStub
	for _, s := range ss {
		if s.Name == name {
			out = append(out, s)
		}
	}
	return out
}

func attrs(s tracetest.SpanStub) map[attribute.Key]attribute.Value {
	m := map[attribute.Key]attribute.Value{}
	for _, kv := range s.Attributes {
		m[kv.Key] = kv.Value
	}
	return m
}

func tracer() (*traces.Tracer, *tracetest.InMemoryExporter) {
	exp := tracetest.NewInMemoryExporter()
	return traces.New(sdktrace.NewSimpleSpanProcessor(exp), "sluice-test"), exp
}

// TestARequestIsATreeUnderTheClientsTrace: the request's span continues
// the client's traceparent, its provider attempt is its child, the
// provider receives the attempt's traceparent, and the request's span
// carries the GenAI attributes.
func TestARequestIsATreeUnderTheClientsTrace(t *testing.T) {
	tr, exp := tracer()
	u := newUpstream(t)
	g := gatewaytest.Start(t, gatewaytest.Backends()[0], gatewaytest.Options{Config: config(u), Tracer: tr})
	_, key := g.TeamKey()
	const clientTrace, clientSpan = "4bf92f3577b34da6a3ce929d0e0e4736", "00f067aa0ba902b7"
	r := g.Do("POST", "/v1/chat/completions", key, `{"model":"gpt","messages":[{"role":"user","content":"hi"}]}`,
		"Traceparent", "00-"+clientTrace+"-"+clientSpan+"-01")
	if r.Status != 200 {
		t.Fatalf("chat = %d %s", r.Status, r.Body)
	}
	got := spans(t, exp, func(ss tracetest.SpanStubs) bool {
		return len(named(ss, "POST /v1/chat/completions")) == 1 && len(named(ss, "provider POST")) == 1
	})
	req, attempt := named(got, "POST /v1/chat/completions")[0], named(got, "provider POST")[0]
	if req.SpanContext.TraceID().String() != clientTrace || req.Parent.SpanID().String() != clientSpan || req.SpanKind != trace.SpanKindServer {
		t.Errorf("request span %s parent %s kind %v: want trace %s under %s, server", req.SpanContext.TraceID(), req.Parent.SpanID(), req.SpanKind, clientTrace, clientSpan)
	}
	if attempt.Parent.SpanID() != req.SpanContext.SpanID() || attempt.SpanContext.TraceID() != req.SpanContext.TraceID() {
		t.Errorf("attempt span's parent %s, want the request's %s", attempt.Parent.SpanID(), req.SpanContext.SpanID())
	}
	want := fmt.Sprintf("00-%s-%s-01", clientTrace, attempt.SpanContext.SpanID())
	if tp := u.traceparents(); len(tp) != 1 || tp[0] != want {
		t.Errorf("the provider got traceparent %q, want %q", tp, want)
	}
	a := attrs(req)
	for k, v := range map[attribute.Key]attribute.Value{
		"gen_ai.request.model":       attribute.StringValue("gpt"),
		"gen_ai.operation.name":      attribute.StringValue("chat"),
		"gen_ai.provider.name":       attribute.StringValue("openai"),
		"gen_ai.usage.input_tokens":  attribute.Int64Value(7),
		"gen_ai.usage.output_tokens": attribute.Int64Value(5),
		"http.route":                 attribute.StringValue("/v1/chat/completions"),
		"http.response.status_code":  attribute.Int64Value(200),
	} {
		if a[k] != v {
			t.Errorf("request span %s = %v, want %v", k, a[k].Emit(), v.Emit())
		}
	}
}

// TestBatchLinesAndDeliveriesLinkToTheirBatch: each line is a span of its
// own, linked to its batch, over its provider attempt; the callback
// delivery of the lines' events is a span linked to the same batch.
func TestBatchLinesAndDeliveriesLinkToTheirBatch(t *testing.T) {
	tr, exp := tracer()
	u := newUpstream(t)
	sink := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		io.WriteString(w, `{}`)
	}))
	t.Cleanup(sink.Close)
	cfg := config(u) + "litellm_settings:\n  success_callback: [langsmith]\nenvironment_variables: {LANGSMITH_API_KEY: ls-key}\n"
	g := gatewaytest.Start(t, gatewaytest.Backends()[0], gatewaytest.Options{
		Config: cfg, Env: map[string]string{"LANGSMITH_BASE_URL": sink.URL}, Tracer: tr,
		Jobs: []string{"batch-worker", "callback-delivery"},
		Batches: func(o *batches.Options) {
			o.ChunkLines, o.RetryDelay, o.StatusEvery = 2, 10*time.Millisecond, 20*time.Millisecond
		},
	})
	_, key := g.TeamKey()
	var in strings.Builder
	for i := range 2 {
		line, _ := json.Marshal(map[string]any{"custom_id": fmt.Sprint("l", i), "method": "POST", "url": "/v1/chat/completions",
			"body": map[string]any{"model": "gpt", "messages": []any{map[string]any{"role": "user", "content": "hi"}}}})
		in.Write(append(line, '\n'))
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
	linkedToBatch := func(s tracetest.SpanStub) bool {
		for _, l := range s.Links {
			for _, kv := range l.Attributes {
				if kv.Key == "sluice.batch.id" && kv.Value.AsString() == b.ID {
					return true
				}
			}
		}
		return false
	}
	got := spans(t, exp, func(ss tracetest.SpanStubs) bool {
		delivered := false
		for _, d := range named(ss, "callback delivery") {
			delivered = delivered || linkedToBatch(d)
		}
		return len(named(ss, "batch line")) == 2 && delivered
	})
	lines := named(got, "batch line")
	var batchLink trace.SpanContext
	for _, l := range lines {
		if !linkedToBatch(l) || l.Parent.IsValid() {
			t.Errorf("line span %v: want a root linked to batch %s", l.Links, b.ID)
		}
		if batchLink.IsValid() && !l.Links[0].SpanContext.Equal(batchLink) {
			t.Errorf("the lines link to different spans: %v, %v", batchLink, l.Links[0].SpanContext)
		}
		batchLink = l.Links[0].SpanContext
		a := attrs(l)
		if a["gen_ai.request.model"].AsString() != "gpt" || a["gen_ai.usage.output_tokens"].AsInt64() != 5 || a["sluice.batch.id"].AsString() != b.ID {
			t.Errorf("line span attributes %v", l.Attributes)
		}
		children := 0
		for _, s := range named(got, "provider POST") {
			if s.Parent.SpanID() == l.SpanContext.SpanID() {
				children++
			}
		}
		if children != 1 {
			t.Errorf("line span has %d provider attempts under it, want 1", children)
		}
	}
	for _, d := range named(got, "callback delivery") {
		if linkedToBatch(d) && attrs(d)["sluice.callback.kind"].AsString() != "langsmith" {
			t.Errorf("delivery span attributes %v", d.Attributes)
		}
	}
}

// TestOffWithoutAnEndpoint: no OTEL_EXPORTER_OTLP_ENDPOINT, no tracer.
func TestOffWithoutAnEndpoint(t *testing.T) {
	tr, err := traces.FromEnv(context.Background(), func(string) string { return "" }, "sluice", otlp.Exporter, false)
	if err != nil || tr != nil || tr.On() {
		t.Errorf("FromEnv without an endpoint = %v, %v; want nil (off)", tr, err)
	}
}

// TestOffCostsNothing: traces off (a nil Tracer), a request builds no span,
// adds no context layer and allocates nothing; the provider transport is
// the base one.
func TestOffCostsNothing(t *testing.T) {
	var tr *traces.Tracer
	base := http.DefaultTransport
	if got := tr.Transport(base); got != base {
		t.Errorf("Transport off = %T, want the base transport", got)
	}
	r := httptest.NewRequest(http.MethodPost, "/v1/embeddings", nil)
	ctx := r.Context()
	got, span := tr.StartRequest(ctx, r, "/v1/embeddings")
	if got != ctx || span.IsRecording() {
		t.Errorf("StartRequest off: context changed %v, span recording %v", got != ctx, span.IsRecording())
	}
	if n := testing.AllocsPerRun(100, func() {
		_, s := tr.StartRequest(ctx, r, "/v1/embeddings")
		traces.EndRequest(s, http.StatusOK, "")
	}); n != 0 {
		t.Errorf("a request's span off allocates %v times, want 0", n)
	}
}
