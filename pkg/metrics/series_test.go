package metrics

import (
	"bytes"
	"context"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"

	"github.com/sluice-gateway/sluice/pkg/config"
	"github.com/sluice-gateway/sluice/pkg/logevent"
)

// TestSeriesExposeWhatClientGolangsWouldHave: the per-request and per-call
// series, accumulated under one lock a call, expose exactly what
// client_golang's own counters and histograms would after the same
// observations — every series, bucket, count and sum (sums to rounding: a
// sum over status classes adds in another order), and no series where
// nothing was observed (no time to first token without a stream, no tokens
// without usage, no spend without a cost).
func TestSeriesExposeWhatClientGolangsWouldHave(t *testing.T) {
	cfg := &config.Config{ModelList: []config.Deployment{
		{ModelName: "gpt", Params: config.Params{Model: "openai/gpt-4o-mini"}},
		{ModelName: "emb", Params: config.Params{Model: "openai/text-embedding-3-small"}},
	}}
	m := New(cfg, Options{})
	ref := prometheus.NewRegistry()
	f := factory{ref}
	calls := f.counter("sluice_model_calls_total", "Model calls ended (one per log event), by model, deployment, provider, team, status class and error code.", append(callLabels, lStatus, lCode)...)
	duration := f.histogram("gen_ai_server_request_duration_seconds", "Model call duration, from the call's start to its answer's last byte (OTel gen_ai.server.request.duration).", durationBuckets, callLabels...)
	ttft := f.histogram("gen_ai_server_time_to_first_token_seconds", "Time to the first byte of a streamed answer (OTel gen_ai.server.time_to_first_token).", ttftBuckets, callLabels...)
	tokens := f.histogram("gen_ai_client_token_usage", "Tokens a model call used, by gen_ai_token_type input or output (OTel gen_ai.client.token.usage).", tokenBuckets, append(callLabels, lTokenType)...)
	tokensTotal := f.counter("sluice_tokens_total", "Tokens used by model calls, by gen_ai_token_type input or output.", append(callLabels, lTokenType)...)
	spend := f.counter("sluice_spend_usd_total", "Spend of model calls in US dollars, from each log event's response_cost.", callLabels...)
	requests := f.counter("sluice_requests_total", "HTTP requests answered, by route and status class.", lRoute, lStatus)
	reqDuration := f.histogram("sluice_request_duration_seconds", "Time from a request's arrival to the end of its answer.", durationBuckets, lRoute, lStatus)
	overhead := f.histogram("sluice_overhead_seconds", "sluice's own time on a request: from its arrival to its answer's headers, less the time spent waiting on providers and between retries (X-Sluice-Overhead-Ms).", overheadBuckets, lRoute)

	teams := []string{"team-a", "team-b", ""}
	for i := range 60 {
		model, dep := "gpt", "gpt#0"
		if i%4 == 0 {
			model, dep = "emb", "emb#1"
		}
		ev := &logevent.Event{Status: logevent.StatusSuccess, ModelGroup: model, ModelID: dep, CustomLLMProvider: "openai",
			StartTime: 1, EndTime: 1 + float64(i)*0.037, Metadata: logevent.Metadata{UserAPIKeyTeamID: teams[i%3]}}
		status, code := "2xx", ""
		if i%7 == 3 {
			ev.Status, ev.ErrorInformation = logevent.StatusFailure, &logevent.ErrorInfo{ErrorCode: "429", ErrorClass: "rate_limit_exceeded"}
			status, code = "4xx", "rate_limit_exceeded"
		}
		if model == "gpt" && i%5 != 0 {
			ev.PromptTokens, ev.CompletionTokens = int64(i*13), int64(i%3*7)
		}
		if model == "gpt" && i%3 == 1 {
			ev.ResponseCost = float64(i) * 1e-5
		}
		stream := model == "gpt" && i%6 == 1
		if stream {
			ev.Stream, ev.CompletionStartTime, ev.ResponseTime = true, 1.01, float64(i)*0.011
		}
		m.ObserveEvent(context.Background(), ev)

		lvs := []string{model, dep, "openai", teams[i%3]}
		calls.WithLabelValues(append(lvs, status, code)...).Inc()
		duration.WithLabelValues(lvs...).Observe(ev.EndTime - ev.StartTime)
		if stream && ev.Status == logevent.StatusSuccess {
			ttft.WithLabelValues(lvs...).Observe(ev.ResponseTime)
		}
		if ev.PromptTokens > 0 || ev.CompletionTokens > 0 {
			tokens.WithLabelValues(append(lvs, "input")...).Observe(float64(ev.PromptTokens))
			tokens.WithLabelValues(append(lvs, "output")...).Observe(float64(ev.CompletionTokens))
			tokensTotal.WithLabelValues(append(lvs, "input")...).Add(float64(ev.PromptTokens))
			tokensTotal.WithLabelValues(append(lvs, "output")...).Add(float64(ev.CompletionTokens))
		}
		if ev.ResponseCost > 0 {
			spend.WithLabelValues(lvs...).Add(ev.ResponseCost)
		}

		route := []string{"/v1/embeddings", "/v1/chat/completions"}[i%2]
		st := []int{200, 200, 429, 500, 404}[i%5]
		took, oh := time.Duration(i)*3*time.Millisecond, time.Duration(i*37-100)*time.Microsecond
		m.Request(route, st, "", took, oh, "")
		requests.WithLabelValues(route, statusClass(st)).Inc()
		reqDuration.WithLabelValues(route, statusClass(st)).Observe(took.Seconds())
		if oh >= 0 {
			overhead.WithLabelValues(route).Observe(oh.Seconds())
		}
	}

	want := exposition(t, ref, nil)
	names := map[string]bool{}
	for _, f := range gather(t, ref) {
		names[f.GetName()] = true
	}
	got := exposition(t, m.Registry(), names)
	if len(want) < 100 {
		t.Fatalf("the reference exposes %d samples", len(want))
	}
	if diff := cmp.Diff(want, got, cmpopts.EquateApprox(1e-12, 0)); diff != "" {
		t.Errorf("exposition (-client_golang +sluice):\n%s", diff)
	}
}

func gather(t *testing.T, g prometheus.Gatherer) []*dto.MetricFamily {
	t.Helper()
	fams, err := g.Gather()
	if err != nil {
		t.Fatal(err)
	}
	return fams
}

// exposition is g's samples in the text format, by their line's name and
// labels, limited to the metric families named (all when nil).
func exposition(t *testing.T, g prometheus.Gatherer, names map[string]bool) map[string]float64 {
	t.Helper()
	var buf bytes.Buffer
	for _, f := range gather(t, g) {
		if names != nil && !names[f.GetName()] {
			continue
		}
		if _, err := expfmt.MetricFamilyToText(&buf, f); err != nil {
			t.Fatal(err)
		}
	}
	out := map[string]float64{}
	for line := range strings.Lines(buf.String()) {
		if strings.HasPrefix(line, "#") {
			out[strings.TrimSpace(line)] = 0 // HELP and TYPE must match too
			continue
		}
		i := strings.LastIndexByte(line, ' ')
		v, err := strconv.ParseFloat(strings.TrimSpace(line[i+1:]), 64)
		if err != nil {
			t.Fatalf("%q: %v", line, err)
		}
		out[line[:i]] = v
	}
	return out
}

// The call series are looked up by their packed key: every id must fit its
// field, so that two label sets never share a series.
func TestPackedCallKeysAreDistinct(t *testing.T) {
	if n := len(codes.values); n > 1<<5 {
		t.Fatalf("%d codes: the packed key holds 32", n)
	}
	base := callStatusKey{callKey: callKey{model: 2, deployment: 3, provider: 4, team: 5}, status: 2, code: 6}
	seen := map[uint64]callStatusKey{base.packed(): base}
	for _, k := range []callStatusKey{
		{callKey: callKey{model: maxLabelValues - 1, deployment: 3, provider: 4, team: 5}, status: 2, code: 6},
		{callKey: callKey{model: 2, deployment: maxLabelValues - 1, provider: 4, team: 5}, status: 2, code: 6},
		{callKey: callKey{model: 2, deployment: 3, provider: 1<<8 - 1, team: 5}, status: 2, code: 6},
		{callKey: callKey{model: 2, deployment: 3, provider: 4, team: maxLabelValues - 1}, status: 2, code: 6},
		{callKey: callKey{model: 2, deployment: 3, provider: 4, team: 5}, status: 5, code: 6},
		{callKey: callKey{model: 2, deployment: 3, provider: 4, team: 5}, status: 2, code: 1<<5 - 1},
		{callKey: callKey{model: 2, deployment: 3, provider: 4, team: 5}, status: 2, code: 0},
	} {
		if prev, ok := seen[k.packed()]; ok {
			t.Errorf("%+v packs as %+v does", k, prev)
		}
		seen[k.packed()] = k
	}
}

// A label set past its limit counts further values as Other: the ids stay
// within their packed field.
func TestLabelSetLimit(t *testing.T) {
	l := newLimitedSet(4, "a", "b", "c")
	if got := l.id("a"); got != 2 {
		t.Errorf("id(a) = %d, want 2", got)
	}
	if got := l.id("b"); got != 3 {
		t.Errorf("id(b) = %d, want 3", got)
	}
	if got := l.id("c"); got != idOther {
		t.Errorf("id(c) past the limit = %d, want Other", got)
	}
}

// Recording a request and a model call allocates nothing once their series
// exist: the relay path's per-call cost of metrics on.
func TestRecordingAllocatesNothing(t *testing.T) {
	m := benchMetrics()
	ev := &logevent.Event{Status: logevent.StatusSuccess, ModelGroup: "gpt", ModelID: "gpt#0", CustomLLMProvider: "openai",
		StartTime: 1, EndTime: 1.003, PromptTokens: 7, CompletionTokens: 5, ResponseCost: 0.0001,
		Metadata: logevent.Metadata{UserAPIKeyTeamID: "team-1"}}
	ctx := context.Background()
	if n := testing.AllocsPerRun(100, func() {
		m.Request("/v1/embeddings", 200, "", 3*time.Millisecond, 200*time.Microsecond, "")
		m.ObserveEvent(ctx, ev)
	}); n != 0 {
		t.Errorf("a request and its call allocate %v times, want 0", n)
	}
}
