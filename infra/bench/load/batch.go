package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"time"
)

// batchIdealLimit is the target: a batch within 1.5× of ideal.
const batchIdealLimit = 1.5

// batchFigures is the batch scenario's Extra.
type batchFigures struct {
	Lines           int     `json:"lines"`
	InputMB         float64 `json:"input_mb"`
	UploadSeconds   float64 `json:"upload_seconds"`
	BatchSeconds    float64 `json:"batch_seconds"`
	IdealSeconds    float64 `json:"ideal_seconds"`
	IdealConc       int     `json:"ideal_concurrency"`
	Ratio           float64 `json:"ratio_to_ideal"`
	Completed       int64   `json:"completed"`
	Failed          int64   `json:"failed"`
	UpstreamCalls   int64   `json:"upstream_calls"`
	PeakRSSMB       float64 `json:"peak_rss_mb"`
	CPUPerLineUS    float64 `json:"cpu_per_line_us"`
	FinalStatus     string  `json:"final_status"`
	DirectCPUPerReq float64 `json:"ideal_upstream_cpu_per_request_us"`
}

func (f *batchFigures) print(w io.Writer) {
	if f.BatchSeconds == 0 {
		return
	}
	fmt.Fprintf(w, "   %d lines (%.1f MB): upload %.1f s; batch %s in %.1f s (%d completed, %d failed, %d upstream calls)\n",
		f.Lines, f.InputMB, f.UploadSeconds, f.FinalStatus, f.BatchSeconds, f.Completed, f.Failed, f.UpstreamCalls)
	fmt.Fprintf(w, "   ideal (the same calls straight to the upstream at %d in flight) %.1f s → %.2f× ideal; sluice peak RSS %.0f MB, %.0f µs CPU per line\n",
		f.IdealConc, f.IdealSeconds, f.Ratio, f.PeakRSSMB, f.CPUPerLineUS)
}

// batchLine is the chat request every line of the batch makes.
func batchBody(i int) map[string]any {
	return map[string]any{
		"model":      "gpt-4o-mini",
		"messages":   []map[string]string{{"role": "user", "content": "Give one fact about item " + strconv.Itoa(i) + "."}},
		"max_tokens": 16,
	}
}

// batchInput renders the JSONL input file.
func batchInput(lines int) ([]byte, error) {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	for i := range lines {
		line := map[string]any{"custom_id": "req-" + strconv.Itoa(i), "method": "POST", "url": "/v1/chat/completions", "body": batchBody(i)}
		if err := enc.Encode(line); err != nil {
			return nil, fmt.Errorf("batch line %d: %w", i, err)
		}
	}
	return buf.Bytes(), nil
}

// batchState is the part of a batch object the harness reads.
type batchState struct {
	ID            string `json:"id"`
	Status        string `json:"status"`
	RequestCounts struct {
		Total     int64 `json:"total"`
		Completed int64 `json:"completed"`
		Failed    int64 `json:"failed"`
	} `json:"request_counts"`
}

func terminal(status string) bool {
	switch status {
	case "completed", "failed", "expired", "cancelled":
		return true
	}
	return false
}

// runBatch runs one large batch through sluice and compares its wall time
// with the ideal: the same calls sent straight to the upstream.
func (b *bench) runBatch(ctx context.Context) *scenarioReport {
	rep := newScenarioReport("batch", fmt.Sprintf("%d-line /v1/chat/completions batch: upload, create, poll to completion; vs the same calls sent directly", b.cfg.batchLines))
	name := fmt.Sprintf("%d-line batch within %.1f× of ideal", b.cfg.batchLines, batchIdealLimit)
	fig := &batchFigures{Lines: b.cfg.batchLines, IdealConc: b.cfg.batchConcurrency}
	rep.Extra = fig
	if b.sluice == nil {
		rep.Skipped["sluice"] = b.sluiceSkip
		rep.Checks = append(rep.Checks, notMeasured(rep, name))
		return rep
	}
	if err := b.batchRun(ctx, fig); err != nil {
		rep.exclude("sluice", err)
		rep.Checks = append(rep.Checks, notMeasured(rep, name))
		return rep
	}
	st := statusPass
	if fig.Ratio > batchIdealLimit {
		st = statusFail
	}
	rep.Checks = append(rep.Checks, check{Scenario: rep.Name, Name: name, Status: st,
		Detail: fmt.Sprintf("%.2f×: batch %.1f s, ideal %.1f s", fig.Ratio, fig.BatchSeconds, fig.IdealSeconds)})
	return rep
}

func (b *bench) batchRun(ctx context.Context, fig *batchFigures) error {
	s := b.sluice
	status, body, err := doJSON(ctx, b.client, http.MethodGet, s.base+"/v1/batches?limit=1", s.key, nil)
	if err != nil {
		return fmt.Errorf("GET /v1/batches: %w", err)
	}
	if status == http.StatusNotFound || status == http.StatusMethodNotAllowed {
		return skipf("GET /v1/batches answers %d: the Batch API has not landed in sluice yet", status)
	}
	if status != http.StatusOK {
		return fmt.Errorf("GET /v1/batches answers %d: %s", status, clip(body))
	}
	input, err := batchInput(fig.Lines)
	if err != nil {
		return err
	}
	fig.InputMB = mb(int64(len(input)))
	files := filesClient{client: b.client, base: s.base, key: s.key}
	start := time.Now()
	fileID, err := files.uploadSmall(ctx, "batch", "bench-batch.jsonl", input)
	if err != nil {
		return err
	}
	defer files.delete(ctx, fileID)
	fig.UploadSeconds = time.Since(start).Seconds()

	upBefore, err := b.upstreamStats(ctx)
	if err != nil {
		return err
	}
	p := s.child.proc
	if err := p.resetPeak(); err != nil {
		return err
	}
	cpuBefore, err := p.sample()
	if err != nil {
		return err
	}
	create := mustJSON(map[string]string{"input_file_id": fileID, "endpoint": "/v1/chat/completions", "completion_window": "24h"})
	start = time.Now()
	status, body, err = doJSON(ctx, b.client, http.MethodPost, s.base+"/v1/batches", s.key, create)
	if err != nil {
		return fmt.Errorf("POST /v1/batches: %w", err)
	}
	if status/100 != 2 {
		return fmt.Errorf("POST /v1/batches answers %d: %s", status, clip(body))
	}
	var st batchState
	if err := json.Unmarshal(body, &st); err != nil || st.ID == "" {
		return fmt.Errorf("POST /v1/batches: no batch id in %s", clip(body))
	}
	deadline := time.Now().Add(b.cfg.batchTimeout)
	for !terminal(st.Status) {
		if time.Now().After(deadline) {
			return fmt.Errorf("batch %s still %s after %s (%d of %d done)", st.ID, st.Status, b.cfg.batchTimeout, st.RequestCounts.Completed, st.RequestCounts.Total)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(200 * time.Millisecond):
		}
		status, body, err = doJSON(ctx, b.client, http.MethodGet, s.base+"/v1/batches/"+st.ID, s.key, nil)
		if err != nil {
			return fmt.Errorf("GET /v1/batches/%s: %w", st.ID, err)
		}
		if status != http.StatusOK {
			return fmt.Errorf("GET /v1/batches/%s answers %d: %s", st.ID, status, clip(body))
		}
		if err := json.Unmarshal(body, &st); err != nil {
			return fmt.Errorf("GET /v1/batches/%s: %w", st.ID, err)
		}
	}
	elapsed := time.Since(start)
	cpuAfter, err := p.sample()
	if err != nil {
		return err
	}
	upAfter, err := b.upstreamStats(ctx)
	if err != nil {
		return err
	}
	fig.BatchSeconds = elapsed.Seconds()
	fig.FinalStatus = st.Status
	fig.Completed, fig.Failed = st.RequestCounts.Completed, st.RequestCounts.Failed
	fig.UpstreamCalls = upAfter.Routes["openai.chat"] - upBefore.Routes["openai.chat"]
	fig.PeakRSSMB = mb(cpuAfter.HWM)
	fig.CPUPerLineUS = perRequestUS(cpuAfter.CPU-cpuBefore.CPU, int64(fig.Lines))
	if st.Status != "completed" || fig.Completed != int64(fig.Lines) {
		return fmt.Errorf("batch %s ended %s with %d of %d lines completed", st.ID, st.Status, fig.Completed, fig.Lines)
	}
	if fig.UpstreamCalls < int64(fig.Lines) {
		return fmt.Errorf("batch completed but the upstream saw only %d of %d calls", fig.UpstreamCalls, fig.Lines)
	}

	// Ideal: the same number of the same calls, straight to the upstream.
	spec := requestSpec{Method: http.MethodPost, URL: b.upstreamURL + "/v1/chat/completions",
		Header: http.Header{"Authorization": {"Bearer sk-client-direct"}}, Body: mustJSON(batchBody(0))}
	upProc := b.upstream.proc
	upCPU, err := upProc.sample()
	if err != nil {
		return err
	}
	ideal := runClosed(ctx, fig.IdealConc, b.cfg.batchTimeout, int64(fig.Lines), httpCall(b.client, spec))
	if ideal.OK != int64(fig.Lines) {
		return fmt.Errorf("ideal run: %d of %d calls succeeded (%v)", ideal.OK, fig.Lines, ideal.Errors)
	}
	upCPU2, err := upProc.sample()
	if err != nil {
		return err
	}
	fig.IdealSeconds = ideal.Elapsed.Seconds()
	fig.DirectCPUPerReq = perRequestUS(upCPU2.CPU-upCPU.CPU, ideal.OK)
	fig.Ratio = fig.BatchSeconds / fig.IdealSeconds
	return nil
}
