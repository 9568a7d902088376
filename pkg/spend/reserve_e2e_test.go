package spend_test

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
	"github.com/sluice-gateway/sluice/pkg/batches"
	"github.com/sluice-gateway/sluice/pkg/gateway/gatewaytest"
	"github.com/sluice-gateway/sluice/pkg/store"
)

// recorder keeps every message a queue hands out, so a test can deliver
// them again: what SQS does when a process dies after handling a message
// and before deleting it.
type recorder struct {
	store.Queue
	mu  sync.Mutex
	got []store.Message
}

func (q *recorder) Receive(ctx context.Context, max int, wait time.Duration) ([]store.Message, error) {
	msgs, err := q.Queue.Receive(ctx, max, wait)
	q.mu.Lock()
	q.got = append(q.got, msgs...)
	q.mu.Unlock()
	return msgs, err
}

func (q *recorder) received() []store.Message {
	q.mu.Lock()
	defer q.mu.Unlock()
	return append([]store.Message(nil), q.got...)
}

// reserved is what key's running batches hold of its budget, as stored.
func reserved(t *testing.T, g *gatewaytest.Gateway, key string) float64 {
	t.Helper()
	p, err := g.Services.Auth.Authenticate(context.Background(), key)
	if err != nil {
		t.Fatal(err)
	}
	v, err := g.Services.Budgets.Reserved(context.Background(), "key:"+p.KeyToken())
	if err != nil {
		t.Fatal(err)
	}
	return v
}

func upload(t *testing.T, g *gatewaytest.Gateway, key, lines string) string {
	t.Helper()
	c := openai.NewClient(option.WithBaseURL(g.URL+"/v1/"), option.WithAPIKey(key), option.WithHTTPClient(g.Client), option.WithMaxRetries(0))
	f, err := c.Files.New(context.Background(), openai.FileNewParams{
		File: openai.File(strings.NewReader(lines), "input.jsonl", "application/jsonl"), Purpose: openai.FilePurposeBatch,
	})
	if err != nil {
		t.Fatal(err)
	}
	return f.ID
}

func waitBatch(t *testing.T, g *gatewaytest.Gateway, key, id string, status ...string) map[string]any {
	t.Helper()
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		b := g.Do("GET", "/v1/batches/"+id, key, nil).JSON(t)
		for _, s := range status {
			if b["status"] == s {
				return b
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("batch %v, want %v", b, status)
		}
	}
}

func closeTo(a, b float64) bool { return math.Abs(a-b) <= 1e-9+1e-6*math.Abs(b) }

// A batch's create reserves its estimate; its lines run against the
// budget without counting their own batch's reservation; one whose budget
// runs out mid-way stops, its lines not run refused with budget_exceeded;
// the batch's cost is on the batch object and equals what was counted; the
// reservation is released once the batch ends — once, even when every
// work message (plan, chunk, finalize) and every log event message is
// delivered again after it ended, as SQS does when a process dies before
// deleting a message it handled.
func TestABatchReservesSettlesAndReleasesOnce(t *testing.T) {
	u := newUpstream(t, 0)
	opts := options(u, nil)
	opts.Jobs = []string{"callback-delivery", "batch-worker"}
	opts.Batches = func(o *batches.Options) {
		o.Concurrency = 1 // lines one after another: where the budget ends is exact
		o.StatusEvery = 20 * time.Millisecond
	}
	var work, deliveries *recorder
	opts.Backend = func(b *store.Backend) {
		work, deliveries = &recorder{Queue: b.Work}, &recorder{Queue: b.Deliveries}
		b.Work, b.Deliveries = work, deliveries
	}
	gatewaytest.Run(t, opts, func(t *testing.T, g *gatewaytest.Gateway) {
		u.calls.Store(0)
		key := g.NewKey(g.NewTeam(nil), map[string]any{"max_budget": 2.5 * callCost})
		var lines strings.Builder
		for i := range 4 {
			// The worst case counts the output at max_tokens (what the
			// provider answers) but the input as estimated from its text
			// (2 tokens; the provider counts 100): the batch is estimated
			// under what it costs, and the budget stops it.
			fmt.Fprintf(&lines, `{"custom_id":"line-%d","method":"POST","url":"/v1/chat/completions","body":{"model":"chat","max_tokens":50,"messages":[{"role":"user","content":"hi"}]}}`+"\n", i)
		}
		create := map[string]any{"input_file_id": upload(t, g, key, lines.String()), "endpoint": "/v1/chat/completions", "completion_window": "24h"}
		dry := map[string]any{"dry_run": true}
		for k, v := range create {
			dry[k] = v
		}
		var est batches.Estimate
		if r := g.Do("POST", "/v1/batches", key, dry); r.Status != 200 || json.Unmarshal(r.Body, &est) != nil {
			t.Fatalf("dry run: %d %s", r.Status, r.Body)
		}
		if est.EstimatedCost.Engine <= 0 || est.EstimatedCost.Engine > 2.5*callCost {
			t.Fatalf("estimate %v: the test needs one that fits the budget", est.EstimatedCost.Engine)
		}
		r := g.Do("POST", "/v1/batches", key, create)
		if r.Status != 200 {
			t.Fatalf("create: %d %s", r.Status, r.Body)
		}
		created := r.JSON(t)
		if rc, ok := created["reserved_cost"].(float64); !ok || !closeTo(rc, est.EstimatedCost.Engine) || created["response_cost"] != 0.0 {
			t.Errorf("created batch: reserved_cost %v response_cost %v, want %v and 0", created["reserved_cost"], created["response_cost"], est.EstimatedCost.Engine)
		}
		id := created["id"].(string)
		b := waitBatch(t, g, key, id, "completed", "failed")
		counts := b["request_counts"].(map[string]any)
		if b["status"] != "completed" || counts["completed"] != 3.0 || counts["failed"] != 1.0 {
			t.Fatalf("batch %v %v, want completed with 3 lines run and 1 refused", b["status"], counts)
		}
		if u.calls.Load() != 3 {
			t.Errorf("the provider ran %d lines, want 3", u.calls.Load())
		}
		content := g.Do("GET", "/v1/files/"+b["error_file_id"].(string)+"/content", key, nil)
		if n := strings.Count(string(content.Body), `"budget_exceeded"`); n != 2 { // type and code of the one line
			t.Errorf("error file %s, want the one line refused for budget_exceeded", content.Body)
		}
		rep := waitReport(t, g, key, "api_key", 3)
		spent := rep["total"].(map[string]any)["spend"].(float64)
		if !closeTo(spent, 3*callCost) || !closeTo(b["response_cost"].(float64), spent) || b["reserved_cost"] != nil {
			t.Errorf("batch response_cost %v reserved_cost %v, counted %v: want %v, null, %v", b["response_cost"], b["reserved_cost"], spent, 3*callCost, 3*callCost)
		}
		if v := reserved(t, g, key); v != 0 {
			t.Errorf("the key still has %v reserved after its batch ended", v)
		}

		// Everything delivered again: nothing runs, counts or releases twice.
		for _, m := range work.received() {
			if err := g.Services.Batches.Work(context.Background(), m); err != nil {
				t.Fatalf("work message delivered again: %v", err)
			}
		}
		sent := deliveries.received()
		for _, m := range sent {
			if err := g.Backend.Deliveries.Send(context.Background(), m.Body); err != nil {
				t.Fatal(err)
			}
		}
		for deadline := time.Now().Add(10 * time.Second); len(deliveries.received()) < 2*len(sent); time.Sleep(20 * time.Millisecond) {
			if time.Now().After(deadline) {
				t.Fatalf("the delivery job took %d of the %d messages sent again", len(deliveries.received())-len(sent), len(sent))
			}
		}
		time.Sleep(500 * time.Millisecond) // and counts them (its flush lingers)
		if v := reserved(t, g, key); v != 0 {
			t.Errorf("after every message was delivered again, %v reserved, want 0", v)
		}
		if u.calls.Load() != 3 {
			t.Errorf("after every message was delivered again, the provider ran %d lines, want 3", u.calls.Load())
		}
		rep = waitReport(t, g, key, "api_key", 3)
		if again := rep["total"].(map[string]any)["spend"].(float64); !closeTo(again, spent) {
			t.Errorf("after every message was delivered again, %v counted, want %v", again, spent)
		}
		if again := g.Do("GET", "/v1/batches/"+id, key, nil).JSON(t); !closeTo(again["response_cost"].(float64), spent) {
			t.Errorf("after every message was delivered again, the batch's response_cost is %v, want %v", again["response_cost"], spent)
		}
	})
}

// While a batch holds its reservation, other calls of the key see it: a
// budget the reservation fills refuses them, naming the reservation; the
// batch cancelled, its reservation is released and they are admitted.
func TestAReservationCountsAgainstOtherCallsUntilItsBatchEnds(t *testing.T) {
	u := newUpstream(t, 0)
	opts := options(u, nil)
	opts.Jobs = []string{"callback-delivery"} // no worker: the batch waits, validating
	gatewaytest.Run(t, opts, func(t *testing.T, g *gatewaytest.Gateway) {
		team := g.NewTeam(nil)
		// Worst case per line: 1000 output tokens at 6e-7 = 6e-4 USD.
		line := `{"custom_id":"l%d","method":"POST","url":"/v1/chat/completions","body":{"model":"mock-gpt","max_tokens":1000,"messages":[{"role":"user","content":"hi"}]}}` + "\n"
		key := g.NewKey(team, map[string]any{"max_budget": 3e-3})
		var lines strings.Builder
		for i := range 4 {
			fmt.Fprintf(&lines, line, i)
		}
		create := map[string]any{"input_file_id": upload(t, g, key, lines.String()), "endpoint": "/v1/chat/completions", "completion_window": "24h"}
		r := g.Do("POST", "/v1/batches", key, create)
		if r.Status != 200 {
			t.Fatalf("create: %d %s", r.Status, r.Body)
		}
		id := r.JSON(t)["id"].(string)
		if v := reserved(t, g, key); v < 2.4e-3 || v > 2.5e-3 {
			t.Fatalf("%v reserved, want the estimate, about 2.4e-3", v)
		}
		// A second batch of the same worst case does not fit what is left.
		r = g.Do("POST", "/v1/batches", key, create)
		overBudget(t, "a second batch", r)
		if !strings.Contains(string(r.Body), "running batches reserve") {
			t.Errorf("the refusal does not name the reservation: %s", r.Body)
		}
		// The budget's room is 3e-3 − 2.4e-3: calls go on until their
		// spend fills it, then are refused.
		admitted := 0
		for range 20 {
			r = g.Do("POST", "/v1/chat/completions", key, chat)
			if r.Status != 200 {
				overBudget(t, "a call beside the batch", r)
				break
			}
			admitted++
		}
		if admitted == 0 || admitted >= 4 {
			t.Errorf("%d calls of %v admitted beside a reservation leaving %v", admitted, callCost, 3e-3-2.4e-3)
		}
		if r := g.Do("POST", "/v1/batches/"+id+"/cancel", key, nil); r.Status != 200 {
			t.Fatalf("cancel: %d %s", r.Status, r.Body)
		}
		// Unplanned, the batch ends once its plan has run: the test is
		// the worker.
		for deadline := time.Now().Add(20 * time.Second); g.Do("GET", "/v1/batches/"+id, key, nil).JSON(t)["status"] != "cancelled"; {
			if time.Now().After(deadline) {
				t.Fatal("the batch was not cancelled")
			}
			msgs, err := g.Backend.Work.Receive(context.Background(), 10, 100*time.Millisecond)
			if err != nil {
				t.Fatal(err)
			}
			for _, m := range msgs {
				if err := g.Services.Batches.Work(context.Background(), m); err != nil {
					t.Fatal(err)
				}
				g.Backend.Work.Ack(context.Background(), m)
			}
		}
		if v := reserved(t, g, key); v != 0 {
			t.Errorf("%v reserved after the batch was cancelled, want 0", v)
		}
	})
}
