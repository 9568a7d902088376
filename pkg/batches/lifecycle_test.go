package batches_test

import (
	"context"
	"encoding/json"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sluice-gateway/sluice/pkg/batches"
	"github.com/sluice-gateway/sluice/pkg/gateway/gatewaytest"
)

// request_counts and usage move while the batch runs: each chunk's commit
// adds its lines.
func TestCountsAndUsageMoveWhileItRuns(t *testing.T) {
	u := newUpstream(t)
	opts := options(u)
	opts.Jobs = nil
	gatewaytest.Run(t, opts, func(t *testing.T, g *gatewaytest.Gateway) {
		_, key := g.TeamKey()
		run := t.Name()
		lines := embeddingLines("emb", "l", 6, func(i int) string { return run + strconv.Itoa(i) })
		lines[4].Body["input"] = "fail-400 " + run
		b := createBatch(t, g, key, uploadInput(t, g, key, jsonl(lines)))
		if err := handle(t, g, receive(t, g, 1)[0]); err != nil {
			t.Fatal(err)
		}
		if b = getBatch(t, g, key, b.ID); b.Status != batches.StatusInProgress || b.InProgressAt == nil || b.RequestCounts.Total != 6 {
			t.Fatalf("planned: %+v", b)
		}
		chunks := map[int]bool{}
		for i, m := range receive(t, g, 2) {
			chunks[decodeWork(t, m).Chunk] = true
			if err := handle(t, g, m); err != nil {
				t.Fatal(err)
			}
			b = getBatch(t, g, key, b.ID)
			if i == 0 && (b.Status != batches.StatusInProgress || b.RequestCounts.Completed+b.RequestCounts.Failed != 3 || b.Usage.InputTokens == 0) {
				t.Errorf("after one chunk: %+v %+v", b.RequestCounts, b.Usage)
			}
		}
		if b.RequestCounts != (batches.RequestCounts{Total: 6, Completed: 5, Failed: 1}) || b.Usage.InputTokens != 15 || b.Usage.TotalTokens != 15 {
			t.Errorf("after both chunks: %+v %+v", b.RequestCounts, b.Usage)
		}
		b = drain(t, g, key, b.ID)
		collect(t, g, key, b, lines)
	})
}

// A cancel turns the batch cancelling at once; the lines in flight finish,
// no other starts, and the batch ends cancelled with what finished in the
// output file and what never ran in the error file (batch_cancelled).
func TestCancel(t *testing.T) {
	runEach(t, func(u *upstream) gatewaytest.Options {
		return options(u, func(o *batches.Options) { o.Concurrency = 2 })
	}, func(t *testing.T, u *upstream, g *gatewaytest.Gateway) {
		_, key := g.TeamKey()
		run := t.Name()
		lines := embeddingLines("emb", "l", 9, func(i int) string { return run + " line " + strconv.Itoa(i) })
		lines[0].Body["input"], lines[1].Body["input"] = "block 0", "block 1" // chunk 0: both slots, and line 2 behind them
		b := createBatch(t, g, key, uploadInput(t, g, key, jsonl(lines)))
		<-u.blocked
		<-u.blocked
		resp := g.Do("POST", "/v1/batches/"+b.ID+"/cancel", key, nil)
		if resp.Status != 200 {
			t.Fatalf("cancel: %d %s", resp.Status, resp.Body)
		}
		if c := decodeBatch(t, resp.Body); c.Status != batches.StatusCancelling || c.CancellingAt == nil {
			t.Errorf("cancel answered %+v", c)
		}
		// Cancelling again answers the batch as it is.
		if again := g.Do("POST", "/v1/batches/"+b.ID+"/cancel", key, nil); again.Status != 200 {
			t.Errorf("cancel again: %d %s", again.Status, again.Body)
		}
		u.open()
		b = waitFor(t, g, key, b.ID, batches.StatusCancelled)
		o := collect(t, g, key, b, lines)
		for _, id := range []string{"l-0", "l-1"} {
			if r, ok := o.out[id]; !ok || r.Response.StatusCode != 200 {
				t.Errorf("%s was in flight and finished: %+v", id, r)
			}
		}
		r, ok := o.errs["l-2"]
		if !ok || r.Response != nil || r.Error == nil || r.Error.Code != "batch_cancelled" || u.calls(lines[2].Body["input"].(string)) != 0 {
			t.Errorf("l-2 never ran: %+v, %d calls", r, u.calls(lines[2].Body["input"].(string)))
		}
		for id, r := range o.errs {
			if r.Error == nil || r.Error.Code != "batch_cancelled" {
				t.Errorf("%s: %+v", id, r)
			}
		}
		if b.RequestCounts.Completed != int64(len(o.out)) || b.RequestCounts.Failed != 0 || b.RequestCounts.Total != 9 || b.CancelledAt == nil {
			t.Errorf("%+v %+v", b.RequestCounts, b)
		}
		// Ended: cancelling again is OpenAI's 409, and the input is free.
		if again := g.Do("POST", "/v1/batches/"+b.ID+"/cancel", key, nil); again.Status != 409 ||
			!strings.Contains(string(again.Body), "Cannot cancel a batch with status 'cancelled'.") {
			t.Errorf("cancel after: %d %s", again.Status, again.Body)
		}
		if resp := g.Do("DELETE", "/v1/files/"+b.InputFileID, key, nil); resp.Status != 200 {
			t.Errorf("delete input: %d %s", resp.Status, resp.Body)
		}
	})
}

// clock is a services' clock the test moves.
type clock struct{ offset atomic.Int64 }

func (c *clock) now() time.Time          { return time.Now().Add(time.Duration(c.offset.Load())) }
func (c *clock) advance(d time.Duration) { c.offset.Add(int64(d)) }

// At its expiry a batch ends expired: what finished is kept, the rest —
// lines never started and lines a run had in flight — go to the error file
// as batch_expired. The sweep finds it.
func TestExpiry(t *testing.T) {
	var clk *clock
	runEach(t, func(u *upstream) gatewaytest.Options {
		clk = &clock{}
		opts := options(u)
		opts.Jobs = nil
		opts.Now = clk.now
		return opts
	}, func(t *testing.T, u *upstream, g *gatewaytest.Gateway) {
		_, key := g.TeamKey()
		run := t.Name()
		lines := embeddingLines("emb", "l", 9, func(i int) string { return run + " line " + strconv.Itoa(i) })
		for i := 3; i < 6; i++ {
			lines[i].Body["input"] = "block " + strconv.Itoa(i)
		}
		b := createBatch(t, g, key, uploadInput(t, g, key, jsonl(lines)))
		if err := handle(t, g, receive(t, g, 1)[0]); err != nil {
			t.Fatal(err)
		}
		for _, m := range receive(t, g, 3) {
			switch decodeWork(t, m).Chunk {
			case 0:
				if err := handle(t, g, m); err != nil {
					t.Fatal(err)
				}
			case 1:
				inFlight := make(chan error, 1)
				go func() { inFlight <- handle(t, g, m) }()
				for range 3 {
					<-u.blocked
				}
				defer func() {
					u.open()
					if err := <-inFlight; err != nil {
						t.Error(err)
					}
				}()
			}
		}
		// Not yet: the sweep leaves a running batch alone.
		if res, err := g.Services.Batches.Sweep(context.Background()); err != nil || res.Expired != 0 {
			t.Fatalf("sweep before the expiry: %+v %v", res, err)
		}
		clk.advance(24*time.Hour + time.Minute)
		if res, err := g.Services.Batches.Sweep(context.Background()); err != nil || res.Expired != 1 {
			t.Fatalf("sweep: %+v %v", res, err)
		}
		b = drain(t, g, key, b.ID)
		if b.Status != batches.StatusExpired || b.ExpiredAt == nil || b.RequestCounts != (batches.RequestCounts{Total: 9, Completed: 3}) {
			t.Errorf("%s %+v", b.Status, b.RequestCounts)
		}
		o := collect(t, g, key, b, lines)
		if len(o.out) != 3 || len(o.errs) != 6 {
			t.Errorf("%d lines in the output, %d in the error file", len(o.out), len(o.errs))
		}
		for id, r := range o.errs {
			if r.Response != nil || r.Error == nil || r.Error.Code != "batch_expired" || !strings.Contains(r.Error.Message, "expired") {
				t.Errorf("%s: %+v", id, r)
			}
		}
		for _, l := range lines[6:] {
			if n := u.calls(l.Body["input"].(string)); n != 0 {
				t.Errorf("%s ran after the expiry (%d calls)", l.CustomID, n)
			}
		}
	})
}

// The plan fails a batch whose file has lines only the whole file or the
// configuration can refuse, naming the first 100 and counting the rest.
func TestPlanRefusals(t *testing.T) {
	u := newUpstream(t)
	gatewaytest.Run(t, options(u), func(t *testing.T, g *gatewaytest.Gateway) {
		embOnly := g.NewKey(g.NewTeam(nil), map[string]any{"models": []string{"emb"}})
		lines := embeddingLines("emb", "ok", 4, func(i int) string { return "t" + strconv.Itoa(i) })
		lines[1].URL = "/v1/moderations"
		lines[2].CustomID = "ok-0"
		lines[3].Body["model"] = "nope"
		lines = append(lines, embeddingLines("titan", "titan", 1, func(int) string { return "t" })...)
		b := createBatch(t, g, embOnly, uploadInput(t, g, embOnly, jsonl(lines)))
		b = waitFor(t, g, embOnly, b.ID, batches.StatusFailed)
		if b.FailedAt == nil || b.Errors == nil || b.Errors.Object != "list" || b.OutputFileID != nil || b.RequestCounts.Total != 0 {
			t.Fatalf("%+v", b)
		}
		var got []string
		for _, e := range b.Errors.Data {
			got = append(got, e.Code+"@"+strconv.Itoa(*e.Line))
		}
		want := "endpoint_mismatch@2 duplicate_custom_id@3 model_not_found@4 model_not_allowed@5"
		if strings.Join(got, " ") != want {
			t.Errorf("errors %v, want %s", got, want)
		}
		if !strings.Contains(b.Errors.Data[1].Message, "line 1") {
			t.Errorf("the duplicate does not name the first: %s", b.Errors.Data[1].Message)
		}
		if resp := g.Do("DELETE", "/v1/files/"+b.InputFileID, embOnly, nil); resp.Status != 200 {
			t.Errorf("delete the input of a failed batch: %d %s", resp.Status, resp.Body)
		}

		_, key := g.TeamKey()
		many := embeddingLines("nope", "m", 150, func(i int) string { return "t" })
		b = createBatch(t, g, key, uploadInput(t, g, key, jsonl(many)))
		b = waitFor(t, g, key, b.ID, batches.StatusFailed)
		if n := len(b.Errors.Data); n != 101 || *b.Errors.Data[99].Line != 100 || b.Errors.Data[100].Line != nil ||
			b.Errors.Data[100].Code != "more_errors" || !strings.Contains(b.Errors.Data[100].Message, "50 more") {
			t.Errorf("%d errors; last two %+v %+v", n, b.Errors.Data[99], b.Errors.Data[100])
		}
	})
}

// A line runs as its HTTP call would: one asking to stream fails (a batch
// answer cannot stream); once the creating key is deleted, the lines not
// yet run fail as its calls would (401); a key deleted before the plan
// fails the batch.
func TestLinesRunAsTheirKey(t *testing.T) {
	u := newUpstream(t)
	opts := options(u)
	opts.Jobs = nil
	gatewaytest.Run(t, opts, func(t *testing.T, g *gatewaytest.Gateway) {
		team, _ := g.TeamKey()
		key := g.NewKey(team, nil)
		lines := embeddingLines("emb", "l", 6, func(i int) string { return "t" + strconv.Itoa(i) })
		lines[1].Body["stream"] = true
		b := createBatch(t, g, key, uploadInput(t, g, key, jsonl(lines)))
		if err := handle(t, g, receive(t, g, 1)[0]); err != nil {
			t.Fatal(err)
		}
		msgs := receive(t, g, 2)
		first := msgs[0]
		if decodeWork(t, first).Chunk != 0 {
			first, msgs[1] = msgs[1], first
		}
		if err := handle(t, g, first); err != nil {
			t.Fatal(err)
		}
		if resp := g.Do("POST", "/key/delete", g.MasterKey, map[string]any{"keys": []string{key}}); resp.Status != 200 {
			t.Fatalf("delete key: %d %s", resp.Status, resp.Body)
		}
		if err := handle(t, g, msgs[1]); err != nil {
			t.Fatal(err)
		}
		b = drain(t, g, g.MasterKey, b.ID)
		o := collect(t, g, g.MasterKey, b, lines)
		var e struct{ Error struct{ Param, Code string } }
		if r := o.errs["l-1"]; r.Response == nil || r.Response.StatusCode != 400 || json.Unmarshal(r.Response.Body, &e) != nil || e.Error.Param != "stream" {
			t.Errorf("a streaming line: %+v", r)
		}
		for _, id := range []string{"l-3", "l-4", "l-5"} {
			if r := o.errs[id]; r.Response == nil || r.Response.StatusCode != 401 || !strings.Contains(string(r.Response.Body), "invalid_api_key") {
				t.Errorf("%s after the key was deleted: %+v", id, r)
			}
		}
		if b.RequestCounts != (batches.RequestCounts{Total: 6, Completed: 2, Failed: 4}) {
			t.Errorf("%+v", b.RequestCounts)
		}

		gone := g.NewKey(team, nil)
		b = createBatch(t, g, gone, uploadInput(t, g, gone, jsonl(lines[:1])))
		if resp := g.Do("POST", "/key/delete", g.MasterKey, map[string]any{"keys": []string{gone}}); resp.Status != 200 {
			t.Fatalf("delete key: %d %s", resp.Status, resp.Body)
		}
		b = drain(t, g, g.MasterKey, b.ID)
		if b.Status != batches.StatusFailed || len(b.Errors.Data) != 1 || b.Errors.Data[0].Code != "invalid_api_key" {
			t.Errorf("%s %+v", b.Status, b.Errors)
		}
	})
}
