package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"
)

// Issue 15's targets for the batch scenario.
const (
	// batchIdealLimit: the lines run within 1.3× of the ideal (the same
	// calls straight to the upstream at the same concurrency); planning and
	// finalizing come on top.
	batchIdealLimit = 1.3
	// batchRSSLimitMB: sluice's peak RSS while the batch runs.
	batchRSSLimitMB = 256
	// batchUpstreamLatency: how long the batch's upstream takes per call.
	batchUpstreamLatency = 20 * time.Millisecond
	// batchPlanMB and batchPlanGrowthMB: a batch input file this large
	// plans with flat memory — sluice's RSS grows by at most this much.
	batchPlanMB       = 195
	batchPlanGrowthMB = 64
	// batchDims keeps the output file small (64 floats a line): the
	// scenario measures the engine, not the disk.
	batchDims = 64
)

// batchFigures is the batch scenario's Extra.
type batchFigures struct {
	Lines           int     `json:"lines"`
	Concurrency     int     `json:"concurrency"`
	InputMB         float64 `json:"input_mb"`
	UploadSeconds   float64 `json:"upload_seconds"`
	PlanSeconds     float64 `json:"plan_seconds"`
	RunSeconds      float64 `json:"run_seconds"`
	FinalizeSeconds float64 `json:"finalize_seconds"`
	BatchSeconds    float64 `json:"batch_seconds"`
	IdealSeconds    float64 `json:"ideal_seconds"`
	Ratio           float64 `json:"run_ratio_to_ideal"`
	Completed       int64   `json:"completed"`
	Failed          int64   `json:"failed"`
	OutputLines     int64   `json:"output_lines"`
	UpstreamCalls   int64   `json:"upstream_calls"`
	PeakRSSMB       float64 `json:"peak_rss_mb"`
	CPUPerLineUS    float64 `json:"cpu_per_line_us"`
	FinalStatus     string  `json:"final_status"`

	PlanInputMB      float64 `json:"plan_input_mb"`
	PlanLargeSeconds float64 `json:"plan_large_seconds"`
	PlanRSSBeforeMB  float64 `json:"plan_rss_before_mb"`
	PlanPeakRSSMB    float64 `json:"plan_peak_rss_mb"`
}

func (f *batchFigures) print(w io.Writer) {
	if f.BatchSeconds > 0 {
		fmt.Fprintf(w, "   %d embeddings lines (%.1f MB), upstream at %s, %d lines at once: upload %.1f s; batch %s in %.1f s = plan %.1f + lines %.1f + finalize %.1f (%d completed, %d failed, %d output lines, %d upstream calls)\n",
			f.Lines, f.InputMB, batchUpstreamLatency, f.Concurrency, f.UploadSeconds, f.FinalStatus, f.BatchSeconds,
			f.PlanSeconds, f.RunSeconds, f.FinalizeSeconds, f.Completed, f.Failed, f.OutputLines, f.UpstreamCalls)
		fmt.Fprintf(w, "   ideal (the same calls straight to the upstream, %d in flight) %.1f s → lines %.2f× ideal; sluice peak RSS %.0f MB, %.0f µs CPU per line\n",
			f.Concurrency, f.IdealSeconds, f.Ratio, f.PeakRSSMB, f.CPUPerLineUS)
	}
	if f.PlanLargeSeconds > 0 {
		fmt.Fprintf(w, "   a %.0f MB input planned in %.1f s: sluice RSS %.0f MB before, peak %.0f MB\n",
			f.PlanInputMB, f.PlanLargeSeconds, f.PlanRSSBeforeMB, f.PlanPeakRSSMB)
	}
}

// batchLine renders line i of a batch input: an embeddings request whose
// input is text.
func batchLine(i int, text string) []byte {
	b, _ := json.Marshal(map[string]any{"custom_id": fmt.Sprintf("req-%06d", i), "method": "POST", "url": "/v1/embeddings",
		"body": map[string]any{"model": "text-embedding-3-small", "input": text, "dimensions": batchDims}}) // strings and numbers
	return append(b, '\n')
}

// batchState is the part of a batch object the harness reads.
type batchState struct {
	ID            string  `json:"id"`
	Status        string  `json:"status"`
	OutputFileID  *string `json:"output_file_id"`
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

// batchRig is what the scenario runs on: its own upstream answering in
// batchUpstreamLatency and its own sluice running batchConcurrency lines
// at once, so that the figures (peak RSS above all) are the batch's alone.
type batchRig struct {
	upstream    *child
	upstreamURL string
	sluice      *sluiceProc
}

func (r *batchRig) stop() {
	r.sluice.stop()
	if r.upstream != nil {
		r.upstream.stop()
	}
}

func (b *bench) startBatchRig(ctx context.Context) (*batchRig, error) {
	r := &batchRig{}
	var err error
	r.upstream, r.upstreamURL, err = startChild(ctx, "upstream-batch", b.cfg.logDir, filepath.Join(b.cfg.binDir, "upstream"),
		[]string{"-addr", "127.0.0.1:0", "-latency", batchUpstreamLatency.String()}, nil, b.ticks, true)
	if err != nil {
		return nil, fmt.Errorf("batch upstream: %w", err)
	}
	// The child inherits the harness's environment; scenarios run one at a
	// time, so the setting reaches this sluice only.
	os.Setenv("SLUICE_BATCH_CONCURRENCY", strconv.Itoa(b.cfg.batchConcurrency))
	r.sluice, err = startSluice(ctx, b.cfg, b.client, r.upstreamURL, "", b.ticks)
	os.Unsetenv("SLUICE_BATCH_CONCURRENCY")
	if err != nil {
		r.stop()
		return nil, err
	}
	return r, nil
}

// runBatch runs one large embeddings batch through a sluice of its own and
// compares the time its lines take with the ideal: the same calls sent
// straight to the upstream at the same concurrency. Then it plans a
// near-200 MB input and watches sluice's memory.
func (b *bench) runBatch(ctx context.Context) *scenarioReport {
	rep := newScenarioReport("batch", fmt.Sprintf("%d-line /v1/embeddings batch, upstream at %s, %d lines at once: upload, create, poll to completed; vs the same calls sent directly; a %d MB input planned",
		b.cfg.batchLines, batchUpstreamLatency, b.cfg.batchConcurrency, batchPlanMB))
	fig := &batchFigures{Lines: b.cfg.batchLines, Concurrency: b.cfg.batchConcurrency}
	rep.Extra = fig
	names := []string{
		fmt.Sprintf("%d-line batch's lines within %.1f× of ideal", b.cfg.batchLines, batchIdealLimit),
		fmt.Sprintf("batch peak RSS ≤ %d MB", batchRSSLimitMB),
		fmt.Sprintf("a %d MB input plans with flat memory (RSS + ≤ %d MB)", batchPlanMB, batchPlanGrowthMB),
	}
	skip := func(err error) *scenarioReport {
		rep.exclude("sluice", err)
		for _, n := range names[len(rep.Checks):] {
			rep.Checks = append(rep.Checks, notMeasured(rep, n))
		}
		return rep
	}
	if b.sluice == nil {
		rep.Skipped["sluice"] = b.sluiceSkip
		for _, n := range names {
			rep.Checks = append(rep.Checks, notMeasured(rep, n))
		}
		return rep
	}
	rig, err := b.startBatchRig(ctx)
	if err != nil {
		return skip(err)
	}
	defer rig.stop()
	if err := b.batchRun(ctx, rig, fig); err != nil {
		return skip(err)
	}
	rep.Checks = append(rep.Checks,
		passIf(rep, names[0], fig.Ratio <= batchIdealLimit, "%.2f×: lines %.1f s, ideal %.1f s (plan %.1f s, finalize %.1f s besides)", fig.Ratio, fig.RunSeconds, fig.IdealSeconds, fig.PlanSeconds, fig.FinalizeSeconds),
		passIf(rep, names[1], fig.PeakRSSMB <= batchRSSLimitMB, "%.0f MB", fig.PeakRSSMB))
	if err := b.batchPlanLarge(ctx, rig, fig); err != nil {
		return skip(err)
	}
	rep.Checks = append(rep.Checks, passIf(rep, names[2], fig.PlanPeakRSSMB-fig.PlanRSSBeforeMB <= batchPlanGrowthMB,
		"%.0f MB → peak %.0f MB while planning (%.1f s)", fig.PlanRSSBeforeMB, fig.PlanPeakRSSMB, fig.PlanLargeSeconds))
	return rep
}

func passIf(rep *scenarioReport, name string, ok bool, format string, args ...any) check {
	st := statusPass
	if !ok {
		st = statusFail
	}
	return check{Scenario: rep.Name, Name: name, Status: st, Detail: fmt.Sprintf(format, args...)}
}

func (b *bench) batchRun(ctx context.Context, rig *batchRig, fig *batchFigures) error {
	s := rig.sluice
	var input bytes.Buffer
	for i := range fig.Lines {
		input.Write(batchLine(i, "Give one fact about item "+strconv.Itoa(i)+"."))
	}
	fig.InputMB = mb(int64(input.Len()))
	files := filesClient{client: b.client, base: s.base, key: s.key}
	start := time.Now()
	fileID, err := files.uploadSmall(ctx, "batch", "bench-batch.jsonl", input.Bytes())
	if err != nil {
		return err
	}
	defer files.delete(ctx, fileID)
	fig.UploadSeconds = time.Since(start).Seconds()

	upBefore, err := b.statsOf(ctx, rig.upstreamURL)
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
	start = time.Now()
	st, err := b.createBatch(ctx, s, fileID)
	if err != nil {
		return err
	}
	st, planned, linesDone, err := b.waitBatch(ctx, s, st)
	if err != nil {
		return err
	}
	end := time.Now()
	cpuAfter, err := p.sample()
	if err != nil {
		return err
	}
	upAfter, err := b.statsOf(ctx, rig.upstreamURL)
	if err != nil {
		return err
	}
	fig.BatchSeconds = end.Sub(start).Seconds()
	fig.PlanSeconds = planned.Sub(start).Seconds()
	fig.RunSeconds = linesDone.Sub(planned).Seconds()
	fig.FinalizeSeconds = end.Sub(linesDone).Seconds()
	fig.FinalStatus = st.Status
	fig.Completed, fig.Failed = st.RequestCounts.Completed, st.RequestCounts.Failed
	fig.UpstreamCalls = upAfter.Routes["openai.embeddings"] - upBefore.Routes["openai.embeddings"]
	fig.PeakRSSMB = mb(cpuAfter.HWM)
	fig.CPUPerLineUS = perRequestUS(cpuAfter.CPU-cpuBefore.CPU, int64(fig.Lines))
	if st.Status != "completed" || fig.Completed != int64(fig.Lines) || st.OutputFileID == nil {
		return fmt.Errorf("batch %s ended %s with %d of %d lines completed", st.ID, st.Status, fig.Completed, fig.Lines)
	}
	if fig.UpstreamCalls < int64(fig.Lines) {
		return fmt.Errorf("batch completed but the upstream saw only %d of %d calls", fig.UpstreamCalls, fig.Lines)
	}
	if fig.OutputLines, err = countLines(ctx, files, *st.OutputFileID); err != nil {
		return err
	}
	if fig.OutputLines != int64(fig.Lines) {
		return fmt.Errorf("batch %s: %d lines in the output file, want %d", st.ID, fig.OutputLines, fig.Lines)
	}

	return b.batchIdeal(ctx, rig, fig)
}

// waitBatch polls the batch until it ends, noting the phases as a client
// sees them: planned once the batch is in progress, its lines done once the
// counts reach the total (the last chunk's commit); it answers the final
// state.
func (b *bench) waitBatch(ctx context.Context, s *sluiceProc, st batchState) (_ batchState, planned, linesDone time.Time, err error) {
	deadline := time.Now().Add(b.cfg.batchTimeout)
	for !terminal(st.Status) {
		if time.Now().After(deadline) {
			return st, planned, linesDone, fmt.Errorf("batch %s still %s after %s (%d of %d done)", st.ID, st.Status, b.cfg.batchTimeout, st.RequestCounts.Completed, st.RequestCounts.Total)
		}
		select {
		case <-ctx.Done():
			return st, planned, linesDone, ctx.Err()
		case <-time.After(20 * time.Millisecond):
		}
		if st, err = b.getBatch(ctx, s, st.ID); err != nil {
			return st, planned, linesDone, err
		}
		now := time.Now()
		if planned.IsZero() && st.Status != "validating" {
			planned = now
		}
		if linesDone.IsZero() && st.RequestCounts.Total > 0 && st.RequestCounts.Completed+st.RequestCounts.Failed == st.RequestCounts.Total {
			linesDone = now
		}
	}
	return st, planned, linesDone, nil
}

// batchIdeal runs the same number of the same calls straight to the
// upstream, the batch's ideal.
func (b *bench) batchIdeal(ctx context.Context, rig *batchRig, fig *batchFigures) error {
	spec := requestSpec{Method: http.MethodPost, URL: rig.upstreamURL + "/v1/embeddings",
		Header: http.Header{"Authorization": {"Bearer sk-client-direct"}, "Content-Type": {"application/json"}},
		Body:   mustJSON(map[string]any{"model": "text-embedding-3-small", "input": "Give one fact about item 0.", "dimensions": batchDims})}
	ideal := runClosed(ctx, fig.Concurrency, b.cfg.batchTimeout, int64(fig.Lines), httpCall(b.client, spec))
	if ideal.OK != int64(fig.Lines) {
		return fmt.Errorf("ideal run: %d of %d calls succeeded (%v)", ideal.OK, fig.Lines, ideal.Errors)
	}
	fig.IdealSeconds = ideal.Elapsed.Seconds()
	fig.Ratio = fig.RunSeconds / fig.IdealSeconds
	return nil
}

// batchPlanLarge uploads a near-200 MB input (50,000 lines of about 4 KB,
// generated as it is sent), creates a batch on it and waits until it is
// planned, watching sluice's peak RSS; then cancels it.
func (b *bench) batchPlanLarge(ctx context.Context, rig *batchRig, fig *batchFigures) error {
	s := rig.sluice
	const lines = 50000
	// Every line is as long (custom ids of a fixed width), so the size is
	// known before the file is made.
	text := strings.Repeat("lorem ipsum ", (batchPlanMB<<20/lines-len(batchLine(0, "")))/12)
	size := int64(lines * len(batchLine(0, text)))
	fig.PlanInputMB = mb(size)
	pr, pw := io.Pipe()
	go func() {
		w := bufio.NewWriterSize(pw, 256<<10)
		for i := range lines {
			if _, err := w.Write(batchLine(i, text)); err != nil {
				return
			}
		}
		pw.CloseWithError(w.Flush())
	}()
	files := filesClient{client: b.client, base: s.base, key: s.key}
	status, body, err := files.upload(ctx, "batch", "bench-plan.jsonl", size, pr)
	pr.Close()
	if err != nil {
		return err
	}
	var fa fileAnswer
	if status/100 != 2 || json.Unmarshal(body, &fa) != nil || fa.ID == "" {
		return fmt.Errorf("POST /v1/files (%d MB batch input) answers %d: %s", batchPlanMB, status, clip(body))
	}
	defer files.delete(ctx, fa.ID)

	p := s.child.proc
	if err := p.resetPeak(); err != nil {
		return err
	}
	before, err := p.sample()
	if err != nil {
		return err
	}
	start := time.Now()
	st, err := b.createBatch(ctx, s, fa.ID)
	if err != nil {
		return err
	}
	deadline := start.Add(b.cfg.batchTimeout)
	for st.Status == "validating" {
		if time.Now().After(deadline) {
			return fmt.Errorf("batch %s still validating after %s", st.ID, b.cfg.batchTimeout)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(20 * time.Millisecond):
		}
		if st, err = b.getBatch(ctx, s, st.ID); err != nil {
			return err
		}
	}
	fig.PlanLargeSeconds = time.Since(start).Seconds()
	after, err := p.sample()
	if err != nil {
		return err
	}
	fig.PlanRSSBeforeMB, fig.PlanPeakRSSMB = mb(before.RSS), mb(after.HWM)
	if st.Status != "in_progress" {
		return fmt.Errorf("batch %s on the %d MB input: %s after its plan", st.ID, batchPlanMB, st.Status)
	}
	// Stop it: what runs after the plan is not this measurement's.
	if status, body, err := doJSON(ctx, b.client, http.MethodPost, s.base+"/v1/batches/"+st.ID+"/cancel", s.key, nil); err != nil || status != http.StatusOK {
		return fmt.Errorf("cancel %s: %d %s %v", st.ID, status, clip(body), err)
	}
	for !terminal(st.Status) {
		if time.Now().After(deadline) {
			return fmt.Errorf("batch %s still %s after its cancel", st.ID, st.Status)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(100 * time.Millisecond):
		}
		if st, err = b.getBatch(ctx, s, st.ID); err != nil {
			return err
		}
	}
	return nil
}

func (b *bench) createBatch(ctx context.Context, s *sluiceProc, fileID string) (batchState, error) {
	var st batchState
	create := mustJSON(map[string]string{"input_file_id": fileID, "endpoint": "/v1/embeddings", "completion_window": "24h"})
	status, body, err := doJSON(ctx, b.client, http.MethodPost, s.base+"/v1/batches", s.key, create)
	if err != nil {
		return st, fmt.Errorf("POST /v1/batches: %w", err)
	}
	if status == http.StatusNotFound || status == http.StatusMethodNotAllowed {
		return st, skipf("POST /v1/batches answers %d: the Batch API has not landed in sluice yet", status)
	}
	if status != http.StatusOK {
		return st, fmt.Errorf("POST /v1/batches answers %d: %s", status, clip(body))
	}
	if err := json.Unmarshal(body, &st); err != nil || st.ID == "" {
		return st, fmt.Errorf("POST /v1/batches: no batch id in %s", clip(body))
	}
	return st, nil
}

func (b *bench) getBatch(ctx context.Context, s *sluiceProc, id string) (batchState, error) {
	var st batchState
	status, body, err := doJSON(ctx, b.client, http.MethodGet, s.base+"/v1/batches/"+id, s.key, nil)
	if err != nil {
		return st, fmt.Errorf("GET /v1/batches/%s: %w", id, err)
	}
	if status != http.StatusOK {
		return st, fmt.Errorf("GET /v1/batches/%s answers %d: %s", id, status, clip(body))
	}
	if err := json.Unmarshal(body, &st); err != nil {
		return st, fmt.Errorf("GET /v1/batches/%s: %w", id, err)
	}
	return st, nil
}

// countLines reads file id's content to the end and counts its lines.
func countLines(ctx context.Context, f filesClient, id string) (int64, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, f.base+"/v1/files/"+id+"/content", nil)
	if err != nil {
		return 0, err
	}
	req.Header.Set("Authorization", "Bearer "+f.key)
	resp, err := f.client.Do(req)
	if err != nil {
		return 0, fmt.Errorf("GET /v1/files/%s/content: %w", id, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return 0, fmt.Errorf("GET /v1/files/%s/content answers %d", id, resp.StatusCode)
	}
	var n int64
	buf := make([]byte, 256<<10)
	for {
		k, err := resp.Body.Read(buf)
		n += int64(bytes.Count(buf[:k], []byte{'\n'}))
		if err == io.EOF {
			return n, nil
		}
		if err != nil {
			return n, fmt.Errorf("GET /v1/files/%s/content: %w", id, err)
		}
	}
}
