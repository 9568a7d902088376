package batches_test

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
	"github.com/openai/openai-go/v3/shared"

	"github.com/sluice-gateway/sluice/pkg/gateway/gatewaytest"
)

// The official Go client drives the whole Batch API against the gateway,
// on both backends: upload, create (retried with an Idempotency-Key),
// poll, list, download and parse, for embeddings routed to an
// OpenAI-compatible provider and to Bedrock Titan, and for chat completions
// routed to an OpenAI-compatible provider and to Anthropic; a batch that expires
// (the services' clock moved past its window); a cancel; and the
// validation errors as the client reports them.
func TestOpenAIGoClient(t *testing.T) {
	var clk *clock
	runEach(t, func(u *upstream) gatewaytest.Options {
		clk = &clock{}
		opts := options(u)
		opts.Now = clk.now
		return opts
	}, func(t *testing.T, u *upstream, g *gatewaytest.Gateway) {
		_, key := g.TeamKey()
		s := &sdkRun{t: t, ctx: context.Background(), g: g, u: u, clk: clk, key: key, c: client(g, key)}
		b, file := s.embeddingsBatch()
		chb := s.chatBatch()
		page, err := s.c.Batches.List(s.ctx, openai.BatchListParams{Limit: openai.Int(10)})
		if err != nil || len(page.Data) != 2 || page.Data[0].ID != chb.ID || page.Data[1].ID != b.ID || page.HasMore {
			t.Errorf("list: %+v %v", page, err)
		}
		s.expiry()
		s.cancel()
		s.validationErrors(file, b)
	})
}

// sdkRun is what TestOpenAIGoClient's steps share on one backend: the
// gateway, its upstream and clock, a team key and the Go client holding it.
type sdkRun struct {
	t   *testing.T
	ctx context.Context
	g   *gatewaytest.Gateway
	u   *upstream
	clk *clock
	key string
	c   openai.Client
}

func (s *sdkRun) upload(lines []line) string { return uploadInput(s.t, s.g, s.key, jsonl(lines)) }

// params is an embeddings batch of file, with metadata.
func (s *sdkRun) params(file string) openai.BatchNewParams {
	return openai.BatchNewParams{InputFileID: file, Endpoint: openai.BatchNewParamsEndpointV1Embeddings,
		CompletionWindow: openai.BatchNewParamsCompletionWindow24h, Metadata: shared.Metadata{"job": "nightly"}}
}

// poll waits up to 30 s for the batch to reach status.
func (s *sdkRun) poll(id string, status openai.BatchStatus) *openai.Batch {
	s.t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		b, err := s.c.Batches.Get(s.ctx, id)
		if err != nil {
			s.t.Fatal(err)
		}
		if b.Status == status {
			return b
		}
		if time.Now().After(deadline) {
			s.t.Fatalf("batch %s is %s, want %s", id, b.Status, status)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// content downloads a result file through the client: its lines by
// custom_id (none for no file).
func (s *sdkRun) content(id string) map[string]map[string]any {
	s.t.Helper()
	out := map[string]map[string]any{}
	if id == "" {
		return out
	}
	resp, err := s.c.Files.Content(s.ctx, id)
	if err != nil {
		s.t.Fatal(err)
	}
	defer resp.Body.Close()
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		var l map[string]any
		if err := json.Unmarshal(sc.Bytes(), &l); err != nil {
			s.t.Fatalf("line %s: %v", sc.Text(), err)
		}
		out[l["custom_id"].(string)] = l
	}
	return out
}

// embeddingsBatch runs an embeddings batch to completion over two
// providers, created twice with one Idempotency-Key; it answers the batch
// and its input file.
func (s *sdkRun) embeddingsBatch() (*openai.Batch, string) {
	t, ctx, c := s.t, s.ctx, s.c
	lines := append(embeddingLines("emb", "openai", 4, func(i int) string { return "go sdk " + strconv.Itoa(i) }),
		embeddingLines("titan", "bedrock", 4, func(i int) string { return "go sdk titan " + strconv.Itoa(i) })...)
	lines = append(lines, embeddingLines("titan", "refused", 1, func(int) string { return "fail-400 go" })...)
	file := s.upload(lines)
	b, err := c.Batches.New(ctx, s.params(file), option.WithHeader("Idempotency-Key", "nightly-1"))
	if err != nil {
		t.Fatal(err)
	}
	again, err := c.Batches.New(ctx, s.params(file), option.WithHeader("Idempotency-Key", "nightly-1"))
	if err != nil || again.ID != b.ID {
		t.Fatalf("the retry: %v %v", again, err)
	}
	b = s.poll(b.ID, openai.BatchStatusCompleted)
	if b.RequestCounts.Total != 9 || b.RequestCounts.Completed != 8 || b.RequestCounts.Failed != 1 || b.Usage.InputTokens != 24 ||
		b.Metadata["job"] != "nightly" || b.OutputFileID == "" || b.ErrorFileID == "" || b.CompletedAt == 0 {
		t.Errorf("%+v", b.RawJSON())
	}
	out, errs := s.content(b.OutputFileID), s.content(b.ErrorFileID)
	for _, l := range lines {
		text := l.Body["input"].(string)
		if strings.HasPrefix(text, "fail") {
			resp, _ := errs[l.CustomID]["response"].(map[string]any)
			if resp["status_code"] != float64(400) {
				t.Errorf("%s: %v", l.CustomID, errs[l.CustomID])
			}
			continue
		}
		// The body is an embeddings answer the client itself decodes.
		raw, _ := json.Marshal(out[l.CustomID]["response"].(map[string]any)["body"])
		var e openai.CreateEmbeddingResponse
		if err := json.Unmarshal(raw, &e); err != nil || len(e.Data) != 1 || !slices.Equal(e.Data[0].Embedding, vector(text, 4)) {
			t.Errorf("%s: %s (%v)", l.CustomID, raw, err)
		}
	}
	return b, file
}

// chatBatch runs chat completions over two providers: one
// OpenAI-compatible, one translated (Anthropic's Messages API); the answers
// are OpenAI's chat.completion, as the route's would be.
func (s *sdkRun) chatBatch() *openai.Batch {
	t := s.t
	chats := append(chatLines("gpt", "gpt", 3, func(i int) string { return "go chat " + strconv.Itoa(i) }),
		chatLines("claude", "claude", 3, func(i int) string { return "go claude " + strconv.Itoa(i) })...)
	chats = append(chats, chatLines("claude", "claude-refused", 1, func(int) string { return "fail-400 go chat" })...)
	chp := s.params(s.upload(chats))
	chp.Endpoint = openai.BatchNewParamsEndpointV1ChatCompletions
	chb, err := s.c.Batches.New(s.ctx, chp)
	if err != nil {
		t.Fatal(err)
	}
	chb = s.poll(chb.ID, openai.BatchStatusCompleted)
	if chb.RequestCounts.Total != 7 || chb.RequestCounts.Completed != 6 || chb.RequestCounts.Failed != 1 ||
		chb.Usage.InputTokens != 3*5+3*6 || chb.Usage.OutputTokens != 3*7+3*8 || chb.Usage.TotalTokens != 3*12+3*14 {
		t.Errorf("chat batch: %s", chb.RawJSON())
	}
	out, errs := s.content(chb.OutputFileID), s.content(chb.ErrorFileID)
	for _, l := range chats {
		text := l.Body["messages"].([]any)[0].(map[string]any)["content"].(string)
		if strings.HasPrefix(text, "fail") {
			resp, _ := errs[l.CustomID]["response"].(map[string]any)
			body, _ := json.Marshal(resp["body"])
			if resp["status_code"] != float64(400) || !strings.Contains(string(body), "this input is not valid for this model") ||
				!strings.Contains(string(body), `"type":"invalid_request_error"`) {
				t.Errorf("%s: %v", l.CustomID, errs[l.CustomID])
			}
			continue
		}
		raw, _ := json.Marshal(out[l.CustomID]["response"].(map[string]any)["body"])
		var cc openai.ChatCompletion
		if err := json.Unmarshal(raw, &cc); err != nil || cc.Object != "chat.completion" || len(cc.Choices) != 1 ||
			cc.Choices[0].Message.Content != "echo: "+text || cc.Choices[0].FinishReason != "stop" {
			t.Errorf("%s: %s (%v)", l.CustomID, raw, err)
		}
	}
	return chb
}

// expiry: lines still at the provider when the window ends end as
// batch_expired errors.
func (s *sdkRun) expiry() {
	t, ctx := s.t, s.ctx
	blocked := embeddingLines("emb", "late", 3, func(i int) string { return "block late " + strconv.Itoa(i) })
	exp, err := s.c.Batches.New(ctx, s.params(s.upload(blocked)))
	if err != nil {
		t.Fatal(err)
	}
	for range 3 {
		<-s.u.blocked
	}
	s.clk.advance(25 * time.Hour)
	if _, err := s.g.Services.Batches.Sweep(ctx); err != nil {
		t.Fatal(err)
	}
	exp = s.poll(exp.ID, openai.BatchStatusExpired)
	for id, l := range s.content(exp.ErrorFileID) {
		if e, _ := l["error"].(map[string]any); e["code"] != "batch_expired" {
			t.Errorf("%s: %v", id, l)
		}
	}
	if exp.OutputFileID != "" || exp.ExpiredAt == 0 || len(s.content(exp.ErrorFileID)) != 3 {
		t.Errorf("expired: %s", exp.RawJSON())
	}
}

// cancel cancels a batch with lines at the provider: every line ends in
// one of its files.
func (s *sdkRun) cancel() {
	t, ctx := s.t, s.ctx
	cancelLines := embeddingLines("emb", "cancelled", 3, func(i int) string { return "block cancel " + strconv.Itoa(i) })
	cancelLines = append(cancelLines, embeddingLines("emb", "after", 3, func(i int) string { return "go after " + strconv.Itoa(i) })...)
	cb, err := s.c.Batches.New(ctx, s.params(s.upload(cancelLines)))
	if err != nil {
		t.Fatal(err)
	}
	for range 3 {
		<-s.u.blocked
	}
	cb, err = s.c.Batches.Cancel(ctx, cb.ID)
	if err != nil || cb.Status != openai.BatchStatusCancelling {
		t.Fatalf("cancel: %v %v", cb, err)
	}
	s.u.open()
	cb = s.poll(cb.ID, openai.BatchStatusCancelled)
	if cb.CancelledAt == 0 || cb.RequestCounts.Total != 6 {
		t.Errorf("cancelled: %s", cb.RawJSON())
	}
	got := len(s.content(cb.OutputFileID)) + len(s.content(cb.ErrorFileID))
	if got != 6 {
		t.Errorf("%d lines in the files, want 6", got)
	}
}

// validationErrors: the validation errors, as the client sees them; file
// is a valid input file, done a completed batch.
func (s *sdkRun) validationErrors(file string, done *openai.Batch) {
	t, ctx, c := s.t, s.ctx, s.c
	notBatch, err := c.Files.New(ctx, openai.FileNewParams{File: openai.File(strings.NewReader("notes"), "notes.txt", "text/plain"), Purpose: openai.FilePurposeUserData})
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name   string
		change func(p *openai.BatchNewParams)
		status int
		code   string
		param  string
	}{
		{"unknown file", func(p *openai.BatchNewParams) { p.InputFileID = "file-AAAAAAAAAAAAAAAAAAAAAAAA" }, 404, "not_found", ""},
		{"a file that is not batch input", func(p *openai.BatchNewParams) { p.InputFileID = notBatch.ID }, 400, "invalid_value", "input_file_id"},
		{"no input file", func(p *openai.BatchNewParams) { p.InputFileID = "" }, 400, "missing_required_parameter", "input_file_id"},
		{"an endpoint batches do not take", func(p *openai.BatchNewParams) { p.Endpoint = openai.BatchNewParamsEndpointV1Videos }, 400, "invalid_value", "endpoint"},
		{"a window not allowed", func(p *openai.BatchNewParams) { p.CompletionWindow = "72h" }, 400, "invalid_value", "completion_window"},
		{"too much metadata", func(p *openai.BatchNewParams) {
			for i := range 17 {
				p.Metadata["k"+strconv.Itoa(i)] = "v"
			}
		}, 400, "invalid_value", "metadata"},
		{"an output expiry too short", func(p *openai.BatchNewParams) {
			p.OutputExpiresAfter = openai.BatchNewParamsOutputExpiresAfter{Seconds: 60}
		}, 400, "invalid_value", "output_expires_after.seconds"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := s.params(file)
			tc.change(&p)
			_, err := c.Batches.New(ctx, p)
			var apiErr *openai.Error
			if !errors.As(err, &apiErr) || apiErr.StatusCode != tc.status || apiErr.Code != tc.code || apiErr.Param != tc.param {
				t.Errorf("%v; want %d %s %s", err, tc.status, tc.code, tc.param)
			}
		})
	}
	for _, tc := range []struct {
		name string
		call func() error
		code string
	}{
		{"get unknown", func() error { _, err := c.Batches.Get(ctx, "batch_AAAAAAAAAAAAAAAAAAAAAAAA"); return err }, "not_found"},
		{"cancel a completed batch", func() error { _, err := c.Batches.Cancel(ctx, done.ID); return err }, "conflict"},
		{"list beyond 100", func() error {
			_, err := c.Batches.List(ctx, openai.BatchListParams{Limit: openai.Int(101)})
			return err
		}, "invalid_value"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var apiErr *openai.Error
			if err := tc.call(); !errors.As(err, &apiErr) || apiErr.Code != tc.code {
				t.Errorf("%v; want %s", err, tc.code)
			}
		})
	}
}
