package cli

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime/multipart"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/schollz/progressbar/v3"
	"github.com/spf13/cobra"
)

// batch is the part of OpenAI's Batch object the command shows.
type batch struct {
	ID            string  `json:"id"`
	Status        string  `json:"status"`
	Endpoint      string  `json:"endpoint"`
	InputFileID   string  `json:"input_file_id"`
	OutputFileID  *string `json:"output_file_id"`
	ErrorFileID   *string `json:"error_file_id"`
	CreatedAt     int64   `json:"created_at"`
	RequestCounts struct {
		Total     int64 `json:"total"`
		Completed int64 `json:"completed"`
		Failed    int64 `json:"failed"`
	} `json:"request_counts"`
	Usage struct {
		InputTokens  int64 `json:"input_tokens"`
		OutputTokens int64 `json:"output_tokens"`
		TotalTokens  int64 `json:"total_tokens"`
	} `json:"usage"`
	// ResponseCost is what the batch's lines cost so far and ReservedCost
	// what it still holds of its budgets (sluice's extra fields; absent
	// from another gateway's batch, shown then as unknown, never as $0).
	ResponseCost *float64 `json:"response_cost"`
	ReservedCost *float64 `json:"reserved_cost"`
	Errors       *struct {
		Data []struct {
			Code    string `json:"code"`
			Message string `json:"message"`
			Line    *int   `json:"line"`
		} `json:"data"`
	} `json:"errors"`
}

func (b *batch) done() int64 { return b.RequestCounts.Completed + b.RequestCounts.Failed }

// cost is the batch's cost so far, with its reservation while it holds
// one ("" when the gateway does not say).
func (b *batch) cost() string {
	if b.ResponseCost == nil {
		return ""
	}
	s := fmt.Sprintf("$%.6f", *b.ResponseCost)
	if r := b.ReservedCost; r != nil && *r > 0 {
		s += fmt.Sprintf(" (reserved $%.6f)", *r)
	}
	return s
}

// withCost appends ", <what> <cost>" to s when the batch's cost is known.
func (b *batch) withCost(s, sep string) string {
	if c := b.cost(); c != "" {
		return s + sep + c
	}
	return s
}

func ended(status string) bool {
	switch status {
	case "completed", "failed", "expired", "cancelled":
		return true
	}
	return false
}

func (a *app) batchCmd() *cobra.Command {
	cmd := &cobra.Command{Use: "batch", Short: "Run and manage batches"}
	cmd.AddCommand(a.batchRunCmd(), a.batchEstimateCmd(), a.batchStatusCmd(), a.batchListCmd(), a.batchCancelCmd(), a.batchDownloadCmd())
	return cmd
}

func (a *app) batchRunCmd() *cobra.Command {
	var endpoint, window, native string
	var every time.Duration
	cmd := &cobra.Command{
		Use:   "run FILE.jsonl",
		Short: "Upload a JSONL file, run it as a batch with a live progress bar, and download its results",
		Long: "run uploads FILE.jsonl (purpose batch), creates a batch over it and watches it: a bar with\n" +
			"completed, failed and total lines, the rate, the time left, the tokens and what the lines cost so\n" +
			"far (with what the batch still reserves of its budget), redrawn in place on a terminal, one line\n" +
			"per change otherwise. Ctrl-C asks whether to cancel the batch or leave it\n" +
			"running. When it ends, FILE.output.jsonl and FILE.errors.jsonl are written beside the input.\n\n" +
			"Exit status: 0 every line succeeded, 3 some lines failed, 4 the batch failed, expired or was\n" +
			"cancelled, 1 a usage or connection error.",
		Args: exactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			ctx, path := cmd.Context(), args[0]
			c, fileID, err := a.uploadBatchInput(ctx, path, &endpoint)
			if err != nil {
				return err
			}
			q := ""
			if native != "" {
				q = query("custom_llm_provider", native)
			}
			var b batch
			if _, err := c.callInto(ctx, "POST", "/v1/batches"+q, map[string]any{
				"input_file_id": fileID, "endpoint": endpoint, "completion_window": window,
			}, &b); err != nil {
				return err
			}
			if !a.json {
				fmt.Fprintf(a.stdout, "Batch %s created (%s, window %s).\n", b.ID, endpoint, window)
			}
			return a.watch(ctx, c, b.ID, path, every)
		},
	}
	cmd.Flags().StringVar(&endpoint, "endpoint", "", "the batch's endpoint (default: the url of the file's first line)")
	cmd.Flags().StringVar(&window, "window", "24h", "the completion window")
	cmd.Flags().StringVar(&native, "native", "", "run on a provider's own batch API: openai, azure or bedrock")
	cmd.Flags().DurationVar(&every, "poll", time.Second, "how often to read the batch's progress")
	return cmd
}

// estimate is the gateway's batch.estimate (POST /v1/batches, dry_run).
type estimate struct {
	Lines                int64 `json:"lines"`
	InputTokens          int64 `json:"input_tokens"`
	InputTokensEstimated bool  `json:"input_tokens_estimated"`
	MaxOutputTokens      int64 `json:"max_output_tokens"`
	EstimatedCost        cost  `json:"estimated_cost"`
	PerModel             []struct {
		Model           string `json:"model"`
		Lines           int64  `json:"lines"`
		InputTokens     int64  `json:"input_tokens"`
		MaxOutputTokens int64  `json:"max_output_tokens"`
		EstimatedCost   cost   `json:"estimated_cost"`
		CostUnknown     bool   `json:"cost_unknown"`
		OutputUncapped  bool   `json:"output_uncapped"`
	} `json:"per_model"`
}

type cost struct {
	Engine float64  `json:"engine"`
	Native *float64 `json:"native"`
}

func (a *app) batchEstimateCmd() *cobra.Command {
	var endpoint string
	cmd := &cobra.Command{
		Use:   "estimate FILE.jsonl",
		Short: "Estimate what a batch would cost, without running it",
		Long: "estimate uploads FILE.jsonl, asks the gateway for the batch's dry run (POST /v1/batches with\n" +
			"dry_run) and deletes the file again: nothing runs. It prints the lines, the input tokens, the\n" +
			"output's worst case (each line's max_tokens, else its model's maximum) and what that costs run by\n" +
			"sluice and, when every model can, on the provider's own batch API.",
		Args: exactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			ctx, path := cmd.Context(), args[0]
			c, fileID, err := a.uploadBatchInput(ctx, path, &endpoint)
			if err != nil {
				return err
			}
			var est estimate
			raw, err := c.callInto(ctx, "POST", "/v1/batches", map[string]any{
				"input_file_id": fileID, "endpoint": endpoint, "completion_window": "24h", "dry_run": true,
			}, &est)
			// The file was only for the estimate.
			if _, derr := c.call(context.WithoutCancel(ctx), "DELETE", "/v1/files/"+url.PathEscape(fileID), nil); derr != nil && err == nil {
				fmt.Fprintf(a.stderr, "The uploaded file %s was not deleted: %v\n", fileID, derr)
			}
			if err != nil {
				return err
			}
			if a.json {
				return a.printJSON(raw)
			}
			a.printEstimate(path, &est)
			return nil
		},
	}
	cmd.Flags().StringVar(&endpoint, "endpoint", "", "the batch's endpoint (default: the url of the file's first line)")
	return cmd
}

func (a *app) printEstimate(path string, est *estimate) {
	approx := ""
	if est.InputTokensEstimated {
		approx = " (estimated)"
	}
	fmt.Fprintf(a.stdout, "%s: %d lines, %s input tokens%s, at most %s output tokens.\n",
		path, est.Lines, count(est.InputTokens), approx, count(est.MaxOutputTokens))
	for _, m := range est.PerModel {
		note := ""
		switch {
		case m.CostUnknown:
			note = " (no price known: counted at $0)"
		case m.OutputUncapped:
			note = " (some lines have no max_tokens and the model's maximum is unknown: their output is not counted)"
		}
		fmt.Fprintf(a.stdout, "  %-24s %6d lines  %10s in  %10s out  up to $%.6f%s\n",
			m.Model, m.Lines, count(m.InputTokens), count(m.MaxOutputTokens), m.EstimatedCost.Engine, note)
	}
	fmt.Fprintf(a.stdout, "Worst case: $%.6f run by sluice", est.EstimatedCost.Engine)
	if n := est.EstimatedCost.Native; n != nil {
		fmt.Fprintf(a.stdout, ", $%.6f on the provider's batch API (--native)", *n)
	}
	fmt.Fprintln(a.stdout, ".")
}

// firstURL is the url of a batch input file's first line.
// uploadBatchInput uploads the JSONL file at path for a batch, taking the
// endpoint from its first line when *endpoint is empty.
func (a *app) uploadBatchInput(ctx context.Context, path string, endpoint *string) (*client, string, error) {
	c, err := a.client()
	if err != nil {
		return nil, "", err
	}
	if *endpoint == "" {
		if *endpoint, err = firstURL(path); err != nil {
			return nil, "", err
		}
	}
	fileID, err := a.upload(ctx, c, path, "batch")
	return c, fileID, err
}

func firstURL(path string) (string, error) {
	f, err := os.Open(path)
	if err != nil {
		return "", usageError{err}
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 64<<10), 8<<20)
	for sc.Scan() {
		if strings.TrimSpace(sc.Text()) == "" {
			continue
		}
		var l struct {
			URL string `json:"url"`
		}
		if err := json.Unmarshal(sc.Bytes(), &l); err != nil || l.URL == "" {
			return "", usageError{fmt.Errorf("%s: the first line is not a batch request with a url; give --endpoint", path)}
		}
		return l.URL, nil
	}
	if err := sc.Err(); err != nil {
		return "", fmt.Errorf("read %s: %w", path, err)
	}
	return "", usageError{fmt.Errorf("%s is empty", path)}
}

// upload sends a file as multipart form data, streamed, with a byte bar on
// a terminal, and returns its id.
func (a *app) upload(ctx context.Context, c *client, path, purpose string) (string, error) {
	f, err := os.Open(path)
	if err != nil {
		return "", usageError{err}
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return "", err
	}
	var src io.Reader = f
	var bar *progressbar.ProgressBar
	if a.terminal() && !a.json {
		bar = progressbar.NewOptions64(st.Size(), progressbar.OptionSetWriter(a.stdout), progressbar.OptionShowBytes(true),
			progressbar.OptionSetDescription("uploading "+filepath.Base(path)), progressbar.OptionSetWidth(30),
			progressbar.OptionThrottle(100*time.Millisecond), progressbar.OptionClearOnFinish())
		r := progressbar.NewReader(f, bar)
		src = &r
	}
	pr, pw := io.Pipe()
	mw := multipart.NewWriter(pw)
	go func() {
		err := mw.WriteField("purpose", purpose)
		if err == nil {
			var part io.Writer
			if part, err = mw.CreateFormFile("file", filepath.Base(path)); err == nil {
				if _, err = io.Copy(part, src); err == nil {
					err = mw.Close()
				}
			}
		}
		pw.CloseWithError(err)
	}()
	resp, err := c.do(ctx, "POST", "/v1/files", pr, mw.FormDataContentType())
	pr.CloseWithError(errors.New("upload ended"))
	if bar != nil {
		bar.Finish()
	}
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	var file struct {
		ID    string `json:"id"`
		Bytes int64  `json:"bytes"`
	}
	if err := json.NewDecoder(io.LimitReader(resp.Body, maxJSONBody)).Decode(&file); err != nil || file.ID == "" {
		return "", fmt.Errorf("upload %s: unexpected answer: %v", path, err)
	}
	if !a.json {
		fmt.Fprintf(a.stdout, "Uploaded %s (%s) as %s.\n", filepath.Base(path), byteSize(file.Bytes), file.ID)
	}
	return file.ID, nil
}

// watch follows batch id until it ends, then downloads its files beside
// input (when input is not "") and ends with the batch's exit status.
func (a *app) watch(ctx context.Context, c *client, id, input string, every time.Duration) error {
	w := newWatcher(a)
	defer w.stop()
	tick := time.NewTicker(every)
	defer tick.Stop()
	var b batch
	for {
		raw, err := c.callInto(ctx, "GET", "/v1/batches/"+url.PathEscape(id), nil, &b)
		if err != nil {
			return err
		}
		w.show(&b)
		if ended(b.Status) {
			w.stop()
			return a.finish(ctx, c, &b, raw, input, w.started)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-a.interrupts:
			w.stop()
			cancel, err := a.askCancel(id)
			if err != nil {
				return err
			}
			if !cancel {
				fmt.Fprintf(a.stderr, "Batch %s keeps running: sluice batch status %s\n", id, id)
				return nil
			}
			if _, err := c.call(ctx, "POST", "/v1/batches/"+url.PathEscape(id)+"/cancel", nil); err != nil {
				return err
			}
			fmt.Fprintf(a.stderr, "Cancelling batch %s…\n", id)
			w = newWatcher(a)
		case <-tick.C:
		}
	}
}

// askCancel asks whether to cancel the batch (true) or leave it running.
func (a *app) askCancel(id string) (bool, error) {
	fmt.Fprintf(a.stderr, "\nCancel batch %s, or leave it running? [c]ancel/[l]eave: ", id)
	line, err := a.in().ReadString('\n')
	if err != nil && !errors.Is(err, io.EOF) {
		return false, err
	}
	switch strings.ToLower(strings.TrimSpace(line)) {
	case "c", "cancel", "y", "yes":
		return true, nil
	}
	return false, nil
}

// finish writes the batch's files and summary and returns its exit status.
func (a *app) finish(ctx context.Context, c *client, b *batch, raw json.RawMessage, input string, started time.Time) error {
	var outPath, errPath string
	if input != "" {
		base := strings.TrimSuffix(input, ".jsonl")
		outPath, errPath = base+".output.jsonl", base+".errors.jsonl"
		for _, f := range []struct {
			id   *string
			path string
		}{{b.OutputFileID, outPath}, {b.ErrorFileID, errPath}} {
			id := ""
			if f.id != nil {
				id = *f.id
			}
			if err := a.download(ctx, c, id, f.path); err != nil {
				return err
			}
		}
	}
	if a.json {
		if err := a.printJSON(raw); err != nil {
			return err
		}
	} else {
		n := b.RequestCounts
		fmt.Fprintln(a.stdout, b.withCost(fmt.Sprintf("Batch %s %s in %s: %d of %d lines succeeded, %d failed; %s tokens (%s in, %s out)",
			b.ID, b.Status, time.Since(started).Round(100*time.Millisecond), n.Completed, n.Total, n.Failed,
			count(b.Usage.TotalTokens), count(b.Usage.InputTokens), count(b.Usage.OutputTokens)), "; cost ")+".")
		if b.Errors != nil {
			for _, e := range b.Errors.Data {
				fmt.Fprintf(a.stdout, "  %s: %s\n", e.Code, e.Message)
			}
		}
		if outPath != "" {
			fmt.Fprintf(a.stdout, "Output: %s\nErrors: %s\n", outPath, errPath)
		}
	}
	switch {
	case b.Status != "completed":
		return exitStatus(ExitBatchEnd)
	case b.RequestCounts.Failed > 0:
		return exitStatus(ExitSomeLines)
	}
	return nil
}

// download writes file id's content to path (an empty file for id "").
func (a *app) download(ctx context.Context, c *client, id, path string) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	if id != "" {
		resp, err := c.do(ctx, "GET", "/v1/files/"+url.PathEscape(id)+"/content", nil, "")
		if err != nil {
			f.Close()
			return err
		}
		_, err = io.Copy(f, resp.Body)
		resp.Body.Close()
		if err != nil {
			f.Close()
			return fmt.Errorf("download %s to %s: %w", id, path, err)
		}
	}
	return f.Close()
}

// watcher shows a batch's progress: a bar redrawn in place on a terminal,
// otherwise a line each time something changes.
type watcher struct {
	a       *app
	bar     *progressbar.ProgressBar
	started time.Time
	// first is the first observation with lines done, the rate's origin.
	first     time.Time
	firstDone int64
	last      string
}

func newWatcher(a *app) *watcher { return &watcher{a: a, started: time.Now()} }

func (w *watcher) show(b *batch) {
	if w.a.json {
		return
	}
	n := b.RequestCounts
	if w.first.IsZero() && b.Status == "in_progress" {
		w.first, w.firstDone = time.Now(), b.done()
	}
	if w.bar != nil || w.a.terminal() && n.Total > 0 && !ended(b.Status) {
		if w.bar == nil {
			w.bar = progressbar.NewOptions64(n.Total, progressbar.OptionSetWriter(w.a.stdout),
				progressbar.OptionSetWidth(30), progressbar.OptionShowCount(), progressbar.OptionShowIts(),
				progressbar.OptionSetItsString("lines"), progressbar.OptionSetPredictTime(true),
				progressbar.OptionShowElapsedTimeOnFinish(), progressbar.OptionSetRenderBlankState(true),
				progressbar.OptionThrottle(0))
		}
		w.bar.Describe(b.withCost(fmt.Sprintf("%s ✓%d ✗%d %s tokens", b.Status, n.Completed, n.Failed, count(b.Usage.TotalTokens)), " "))
		w.bar.Set64(b.done())
		return
	}
	line := b.withCost(fmt.Sprintf("%s %s: %d/%d done (%d completed, %d failed), %s tokens", b.ID, b.Status, b.done(), n.Total, n.Completed, n.Failed, count(b.Usage.TotalTokens)), ", ")
	if n.Total == 0 && !ended(b.Status) {
		line = fmt.Sprintf("%s %s", b.ID, b.Status) // the lines are not counted yet
	}
	if line == w.last {
		return
	}
	w.last = line
	if el := time.Since(w.first); !w.first.IsZero() && el > 0 && b.done() > w.firstDone && !ended(b.Status) {
		rate := float64(b.done()-w.firstDone) / el.Seconds()
		eta := time.Duration(float64(n.Total-b.done()) / rate * float64(time.Second))
		line += fmt.Sprintf(", %.1f lines/s, ETA %s", rate, eta.Round(time.Second))
	}
	fmt.Fprintln(w.a.stdout, line)
}

// stop ends the bar's line.
func (w *watcher) stop() {
	if w.bar != nil {
		w.bar.Exit()
		fmt.Fprintln(w.a.stdout)
		w.bar = nil
	}
}

func (a *app) batchStatusCmd() *cobra.Command {
	return &cobra.Command{
		Use: "status ID", Short: "Show a batch", Args: exactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := a.client()
			if err != nil {
				return err
			}
			var b batch
			raw, err := c.callInto(cmd.Context(), "GET", "/v1/batches/"+url.PathEscape(args[0]), nil, &b)
			if err != nil {
				return err
			}
			if a.json {
				return a.printJSON(raw)
			}
			a.batchTable([]batch{b})
			return nil
		},
	}
}

func (a *app) batchTable(bs []batch) {
	rows := make([][]string, 0, len(bs))
	for _, b := range bs {
		rows = append(rows, []string{b.ID, b.Status, b.Endpoint, when(b.CreatedAt),
			fmt.Sprintf("%d/%d", b.done(), b.RequestCounts.Total), fmt.Sprint(b.RequestCounts.Failed), count(b.Usage.TotalTokens),
			optCost(b.ResponseCost), deref(b.OutputFileID), deref(b.ErrorFileID)})
	}
	a.table([]string{"ID", "STATUS", "ENDPOINT", "CREATED", "DONE", "FAILED", "TOKENS", "COST", "OUTPUT", "ERRORS"}, rows)
}

// optCost is a batch's cost, "-" when the gateway does not say.
func optCost(p *float64) string {
	if p == nil {
		return "-"
	}
	return fmt.Sprintf("$%.6f", *p)
}

func (a *app) batchListCmd() *cobra.Command {
	var limit int
	cmd := &cobra.Command{
		Use: "list", Short: "List batches, newest first", Args: exactArgs(0),
		RunE: func(cmd *cobra.Command, _ []string) error {
			c, err := a.client()
			if err != nil {
				return err
			}
			var page struct {
				Data []batch `json:"data"`
			}
			raw, err := c.callInto(cmd.Context(), "GET", "/v1/batches"+query("limit", fmt.Sprint(limit)), nil, &page)
			if err != nil {
				return err
			}
			if a.json {
				return a.printJSON(raw)
			}
			a.batchTable(page.Data)
			return nil
		},
	}
	cmd.Flags().IntVar(&limit, "limit", 20, "how many")
	return cmd
}

func (a *app) batchCancelCmd() *cobra.Command {
	return &cobra.Command{
		Use: "cancel ID", Short: "Cancel a batch", Args: exactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := a.client()
			if err != nil {
				return err
			}
			var b batch
			raw, err := c.callInto(cmd.Context(), "POST", "/v1/batches/"+url.PathEscape(args[0])+"/cancel", nil, &b)
			if err != nil {
				return err
			}
			if a.json {
				return a.printJSON(raw)
			}
			fmt.Fprintf(a.stdout, "Batch %s is %s.\n", b.ID, b.Status)
			return nil
		},
	}
}

func (a *app) batchDownloadCmd() *cobra.Command {
	var prefix string
	cmd := &cobra.Command{
		Use: "download ID", Short: "Write an ended batch's output and error files (ID.output.jsonl, ID.errors.jsonl)", Args: exactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := a.client()
			if err != nil {
				return err
			}
			var b batch
			if _, err := c.callInto(cmd.Context(), "GET", "/v1/batches/"+url.PathEscape(args[0]), nil, &b); err != nil {
				return err
			}
			if !ended(b.Status) {
				return fmt.Errorf("batch %s is %s: its files exist once it ends (sluice batch status %s)", b.ID, b.Status, b.ID)
			}
			if prefix == "" {
				prefix = b.ID
			}
			for _, f := range []struct {
				id   *string
				path string
			}{{b.OutputFileID, prefix + ".output.jsonl"}, {b.ErrorFileID, prefix + ".errors.jsonl"}} {
				if err := a.download(cmd.Context(), c, deref(f.id), f.path); err != nil {
					return err
				}
				fmt.Fprintf(a.stdout, "Wrote %s\n", f.path)
			}
			return nil
		},
	}
	cmd.Flags().StringVar(&prefix, "prefix", "", "the files' path without .output.jsonl (default: the batch id)")
	return cmd
}

func deref(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}

func when(unix int64) string {
	if unix == 0 {
		return ""
	}
	return time.Unix(unix, 0).UTC().Format("2006-01-02 15:04")
}

// count renders n with thousands separators.
func count(n int64) string {
	s := fmt.Sprint(n)
	if n < 0 {
		return s
	}
	for i := len(s) - 3; i > 0; i -= 3 {
		s = s[:i] + "," + s[i:]
	}
	return s
}

func byteSize(n int64) string {
	switch {
	case n >= 1<<30:
		return fmt.Sprintf("%.1f GiB", float64(n)/(1<<30))
	case n >= 1<<20:
		return fmt.Sprintf("%.1f MiB", float64(n)/(1<<20))
	case n >= 1<<10:
		return fmt.Sprintf("%.1f KiB", float64(n)/(1<<10))
	}
	return fmt.Sprintf("%d B", n)
}
