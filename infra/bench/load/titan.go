package main

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"
)

// The titan-fanout target (issue 9): an embeddings request of
// titanFanoutInputs texts to Titan, which takes one text per call, must not
// take more than titanFanoutLimit times one call: sluice sends the calls
// concurrently. The upstream delays each call by titanFanoutLatency, so that
// a serial fan-out (16 × 100 ms) could not hide in the noise.
const (
	titanFanoutInputs  = 16
	titanFanoutLatency = 100 * time.Millisecond
	titanFanoutLimit   = 2.0
	// titanFanoutCalls is how many timed requests of each size are sent,
	// one at a time, after one untimed warm-up of each.
	titanFanoutCalls = 5
)

// fanoutFigures is the titan-fanout scenario's Extra.
type fanoutFigures struct {
	UpstreamDelayMS float64 `json:"upstream_delay_ms"`
	Inputs          int     `json:"inputs"`
	Calls           int     `json:"calls_per_size"`
	// DirectMS is one InvokeModel call straight to the slow upstream.
	DirectMS float64 `json:"direct_one_call_ms"`
	// OneMS and FanoutMS are sluice's wall time for one input and for
	// Inputs inputs (medians).
	OneMS    float64 `json:"sluice_one_input_ms"`
	FanoutMS float64 `json:"sluice_fanout_ms"`
	Ratio    float64 `json:"ratio"`
	// UpstreamCalls is how many InvokeModel calls the slow upstream served
	// for the timed fan-out requests (Inputs × Calls when each text was
	// sent once).
	UpstreamCalls int64 `json:"upstream_calls"`
}

func (f *fanoutFigures) print(w io.Writer) {
	if f.FanoutMS == 0 {
		return
	}
	fmt.Fprintf(w, "   upstream delay %.0f ms per call; medians of %d requests of each size, one at a time, after a warm-up: direct Titan call %.1f ms, sluice 1 input %.1f ms, sluice %d inputs %.1f ms (%.2f× one call; %d upstream calls)\n",
		f.UpstreamDelayMS, f.Calls, f.DirectMS, f.OneMS, f.Inputs, f.FanoutMS, f.Ratio, f.UpstreamCalls)
}

// runTitanFanout times sluice's answer to 1 and to 16 Titan inputs against
// an upstream that takes titanFanoutLatency per call.
func (b *bench) runTitanFanout(ctx context.Context) *scenarioReport {
	rep := newScenarioReport("titan-fanout", fmt.Sprintf("POST /v1/embeddings, %d inputs, to Bedrock Titan v2 on an upstream that answers each call after %s",
		titanFanoutInputs, titanFanoutLatency))
	name := fmt.Sprintf("%d-input Titan request ≤ %.0f× one call (wall time)", titanFanoutInputs, titanFanoutLimit)
	fig := &fanoutFigures{UpstreamDelayMS: ms(titanFanoutLatency), Inputs: titanFanoutInputs, Calls: titanFanoutCalls}
	rep.Extra = fig
	switch {
	case b.sluice == nil:
		rep.Skipped["sluice"] = b.sluiceSkip
	case b.slowUpstream == nil:
		rep.Failed["sluice"] = "the slow upstream did not start: " + b.slowSkip
	default:
		if err := b.titanFanout(ctx, fig); err != nil {
			rep.exclude("sluice", err)
		}
	}
	if fig.FanoutMS == 0 {
		rep.Checks = append(rep.Checks, notMeasured(rep, name))
		return rep
	}
	st := statusPass
	if fig.Ratio > titanFanoutLimit {
		st = statusFail
	}
	rep.Checks = append(rep.Checks, check{Scenario: rep.Name, Name: name, Status: st,
		Detail: fmt.Sprintf("%.2f×: %d inputs %.1f ms, 1 input %.1f ms (upstream delay %.0f ms)", fig.Ratio, fig.Inputs, fig.FanoutMS, fig.OneMS, fig.UpstreamDelayMS)})
	return rep
}

func (b *bench) titanFanout(ctx context.Context, fig *fanoutFigures) error {
	sl := target{name: "sluice", base: b.sluice.base, sluice: true, key: b.sluice.key}
	texts := make([]string, titanFanoutInputs)
	for i := range texts {
		texts[i] = fmt.Sprintf("Chunk %d of a document being indexed. %s", i+1, embedInput)
	}
	direct := timedRequest{spec: post(target{base: b.slowUpstreamURL}, titanInvokePath, nil, titanInvokeBody(embedInput)), check: titanCheck(1, titanDims), t: target{name: "direct"}}
	one := timedRequest{spec: post(sl, "/v1/embeddings", bearer(sl), titanEmbeddingsBody(titanSlowModel, []string{embedInput})), check: titanCheck(1, titanDims), t: sl}
	many := timedRequest{spec: post(sl, "/v1/embeddings", bearer(sl), titanEmbeddingsBody(titanSlowModel, texts)), check: titanCheck(titanFanoutInputs, titanDims), t: sl}
	reqs := []timedRequest{direct, one, many}
	for _, r := range reqs { // warm-up: connections, and a first check of each answer
		if _, err := b.timeRequest(ctx, r); err != nil {
			return err
		}
	}
	times := make([][]float64, len(reqs))
	var manyCalls int64
	for i := 0; i < titanFanoutCalls && ctx.Err() == nil; i++ {
		for j, r := range reqs {
			before, err := b.statsOf(ctx, b.slowUpstreamURL)
			if err != nil {
				return err
			}
			d, err := b.timeRequest(ctx, r)
			if err != nil {
				return err
			}
			times[j] = append(times[j], d)
			if j == len(reqs)-1 {
				after, err := b.statsOf(ctx, b.slowUpstreamURL)
				if err != nil {
					return err
				}
				manyCalls += after.Routes["bedrock.invoke"] - before.Routes["bedrock.invoke"]
			}
		}
	}
	if ctx.Err() != nil {
		return ctx.Err()
	}
	fig.DirectMS, fig.OneMS, fig.FanoutMS = median(times[0]), median(times[1]), median(times[2])
	fig.UpstreamCalls = manyCalls
	if want := int64(titanFanoutInputs * titanFanoutCalls); manyCalls != want {
		return fmt.Errorf("the slow upstream served %d Titan calls for %d requests of %d inputs, want %d", manyCalls, titanFanoutCalls, titanFanoutInputs, want)
	}
	fig.Ratio = fig.FanoutMS / fig.OneMS
	b.logf("  %-18s direct %.1f ms, sluice 1 input %.1f ms, %d inputs %.1f ms (%.2f×)", "titan-fanout", fig.DirectMS, fig.OneMS, fig.Inputs, fig.FanoutMS, fig.Ratio)
	return nil
}

// timedRequest is one request of the fan-out scenario and how to check it.
type timedRequest struct {
	spec  requestSpec
	check func(target, http.Header, []byte) error
	t     target
}

// timeRequest sends one request and returns its wall time in ms, to the
// last byte of the answer, which must be a 200 that passes the check.
func (b *bench) timeRequest(ctx context.Context, r timedRequest) (float64, error) {
	what := r.spec.Method + " " + strings.TrimPrefix(r.spec.URL, r.t.base)
	req, err := r.spec.newRequest(ctx)
	if err != nil {
		return 0, fmt.Errorf("build %s: %w", what, err)
	}
	start := time.Now()
	resp, err := b.client.Do(req)
	if err != nil {
		return 0, fmt.Errorf("%s: %w", what, err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 16<<20))
	elapsed := time.Since(start)
	if err != nil {
		return 0, fmt.Errorf("%s: read answer: %w", what, err)
	}
	if resp.StatusCode != http.StatusOK {
		if r.t.sluice && strings.Contains(string(body), "model_not_found") {
			return 0, skipf("%s answers %d model_not_found: the Titan deployment is not configured (%s)", what, resp.StatusCode, clip(body))
		}
		return 0, fmt.Errorf("%s answers %d: %s", what, resp.StatusCode, clip(body))
	}
	if err := r.check(r.t, resp.Header, body); err != nil {
		return 0, fmt.Errorf("%s: %w", what, err)
	}
	return ms(elapsed), nil
}

// translatedFigure is the report line of issue 9: sluice's CPU per request
// for an embeddings answer it translates (Bedrock Titan → OpenAI base64)
// next to the OpenAI pass-through's. It is a figure to watch, not a target.
type translatedFigure struct {
	TitanUS       float64 `json:"titan_cpu_per_request_us"`
	PassthroughUS float64 `json:"passthrough_cpu_per_request_us"`
	Ratio         float64 `json:"ratio"`
	ProxyTitanUS  float64 `json:"proxy_titan_cpu_per_request_us"`
}

func (f *translatedFigure) print(w io.Writer) {
	fmt.Fprintf(w, "   sluice CPU/request: %.1f µs translated (Titan → OpenAI base64) vs %.1f µs OpenAI pass-through (embeddings scenario): %.2f×; bare proxy on the Titan call %.1f µs\n",
		f.TitanUS, f.PassthroughUS, f.Ratio, f.ProxyTitanUS)
}

// reportTranslated adds issue 9's report line to the embeddings-titan
// scenario, when this run measured sluice on both embeddings scenarios.
func reportTranslated(scenarios []*scenarioReport) {
	var titan, pass *scenarioReport
	for _, s := range scenarios {
		switch s.Name {
		case "embeddings-titan":
			titan = s
		case "embeddings":
			pass = s
		}
	}
	if titan == nil {
		return
	}
	name := "sluice CPU/request, translated (Titan → OpenAI base64) next to the OpenAI pass-through (report only)"
	c := check{Scenario: titan.Name, Name: name, Status: statusInfo}
	ts := titan.Summary["sluice"]
	var ps *targetSummary
	if pass != nil {
		ps = pass.Summary["sluice"]
	}
	switch {
	case ts == nil:
		c.Status, c.Detail = statusSkipped, "sluice not measured on embeddings-titan"
		if reason, ok := titan.Failed["sluice"]; ok {
			c.Status, c.Detail = statusError, "sluice: "+reason
		}
	case ps == nil:
		c.Detail = fmt.Sprintf("translated %.1f µs; pass-through not measured in this run (add the embeddings scenario)", ts.CPUPerRequestUS)
	default:
		f := &translatedFigure{TitanUS: ts.CPUPerRequestUS, PassthroughUS: ps.CPUPerRequestUS}
		if px := titan.Summary["proxy"]; px != nil {
			f.ProxyTitanUS = px.CPUPerRequestUS
		}
		if f.PassthroughUS > 0 {
			f.Ratio = f.TitanUS / f.PassthroughUS
		}
		titan.Extra = f
		c.Detail = fmt.Sprintf("%.2f×: translated %.1f µs, pass-through %.1f µs", f.Ratio, f.TitanUS, f.PassthroughUS)
	}
	titan.Checks = append(titan.Checks, c)
}
