package spend_test

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
	"github.com/sluice-gateway/sluice/pkg/batches"
	"github.com/sluice-gateway/sluice/pkg/gateway/gatewaytest"
)

// A batch whose key or team runs out of budget stops running lines: those not run
// are in the error file with budget_exceeded, and the batch ends.
func TestABatchStopsWhereItsBudgetEnds(t *testing.T) {
	u := newUpstream(t, 0)
	opts := options(u, nil)
	opts.Jobs = []string{"callback-delivery", "batch-worker"}
	opts.Batches = func(o *batches.Options) {
		o.Concurrency = 1 // lines one after another: where the budget ends is exact
		o.StatusEvery = 20 * time.Millisecond
	}
	gatewaytest.Run(t, opts, func(t *testing.T, g *gatewaytest.Gateway) {
		for _, scope := range []string{"key", "team"} {
			stopsAtTheBudget(t, g, u, scope)
		}
	})
}

// stopsAtTheBudget runs TestABatchStopsWhereItsBudgetEnds with the budget
// on scope: the key, or its team.
func stopsAtTheBudget(t *testing.T, g *gatewaytest.Gateway, u *upstream, scope string) {
	t.Helper()
	u.calls.Store(0)
	budget := map[string]any{"max_budget": 2.5 * callCost}
	team := g.NewTeam(nil)
	key := g.NewKey(team, budget)
	if scope == "team" {
		team = g.NewTeam(budget)
		key = g.NewKey(team, nil)
	}
	var lines strings.Builder
	for i := range 6 {
		fmt.Fprintf(&lines, `{"custom_id":"line-%d","method":"POST","url":"/v1/chat/completions","body":{"model":"chat","messages":[{"role":"user","content":"hi"}]}}`+"\n", i)
	}
	c := openai.NewClient(option.WithBaseURL(g.URL+"/v1/"), option.WithAPIKey(key), option.WithHTTPClient(g.Client), option.WithMaxRetries(0))
	f, err := c.Files.New(context.Background(), openai.FileNewParams{
		File: openai.File(strings.NewReader(lines.String()), "input.jsonl", "application/jsonl"), Purpose: openai.FilePurposeBatch,
	})
	if err != nil {
		t.Fatal(err)
	}
	r := g.Do("POST", "/v1/batches", key, map[string]any{"input_file_id": f.ID, "endpoint": "/v1/chat/completions", "completion_window": "24h"})
	if r.Status != 200 {
		t.Fatalf("create: %d %s", r.Status, r.Body)
	}
	id := r.JSON(t)["id"].(string)
	var b map[string]any
	for deadline := time.Now().Add(20 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		b = g.Do("GET", "/v1/batches/"+id, key, nil).JSON(t)
		if s := b["status"]; s == "completed" || s == "failed" || time.Now().After(deadline) {
			break
		}
	}
	counts := b["request_counts"].(map[string]any)
	if b["status"] != "completed" || counts["completed"] != 3.0 || counts["failed"] != 3.0 {
		t.Fatalf("%s budget: batch %v %v, want completed with 3 lines run and 3 refused", scope, b["status"], counts)
	}
	errFile, _ := b["error_file_id"].(string)
	content := g.Do("GET", "/v1/files/"+errFile+"/content", key, nil)
	refused := 0
	for _, line := range strings.Split(strings.TrimSpace(string(content.Body)), "\n") {
		var l struct {
			Error    *struct{ Code string } `json:"error"`
			Response *struct {
				StatusCode int `json:"status_code"`
				Body       struct {
					Error struct{ Code string }
				} `json:"body"`
			} `json:"response"`
		}
		if err := json.Unmarshal([]byte(line), &l); err != nil {
			t.Fatalf("error file line %q: %v", line, err)
		}
		if l.Response != nil && l.Response.StatusCode == 400 && l.Response.Body.Error.Code == "budget_exceeded" ||
			l.Error != nil && l.Error.Code == "budget_exceeded" {
			refused++
		}
	}
	if refused != 3 {
		t.Errorf("%d lines refused for budget_exceeded in the error file, want 3:\n%s", refused, content.Body)
	}
	if u.calls.Load() != 3 {
		t.Errorf("the provider ran %d lines, want 3", u.calls.Load())
	}
	// Refused lines, like refused requests, have no log event.
	waitReport(t, g, key, "api_key", 3)
}

// A dry run answers the batch's estimate, creates nothing, and is within
// 10 % of what the same batch costs when it runs.
func TestABatchDryRunEstimatesItsCost(t *testing.T) {
	u := newUpstream(t, 0)
	opts := options(u, nil)
	opts.Jobs = []string{"callback-delivery", "batch-worker"}
	gatewaytest.Run(t, opts, func(t *testing.T, g *gatewaytest.Gateway) {
		team := g.NewTeam(nil)
		key := g.NewKey(team, nil)
		var lines strings.Builder
		for i := range 8 {
			// The mock answers "hello there" (3 tokens): max_tokens 3 is
			// the worst case and the real output.
			fmt.Fprintf(&lines, `{"custom_id":"l%d","method":"POST","url":"/v1/chat/completions","body":{"model":"mock-gpt","max_tokens":3,"messages":[{"role":"system","content":"be brief"},{"role":"user","content":[{"type":"text","text":"%s"}]}]}}`+"\n",
				i, strings.Repeat("how much is this line? ", i+1))
		}
		c := openai.NewClient(option.WithBaseURL(g.URL+"/v1/"), option.WithAPIKey(key), option.WithHTTPClient(g.Client), option.WithMaxRetries(0))
		f, err := c.Files.New(context.Background(), openai.FileNewParams{
			File: openai.File(strings.NewReader(lines.String()), "input.jsonl", "application/jsonl"), Purpose: openai.FilePurposeBatch,
		})
		if err != nil {
			t.Fatal(err)
		}
		create := map[string]any{"input_file_id": f.ID, "endpoint": "/v1/chat/completions", "completion_window": "24h"}
		dry := map[string]any{"dry_run": true}
		for k, v := range create {
			dry[k] = v
		}
		r := g.Do("POST", "/v1/batches", key, dry)
		if r.Status != 200 {
			t.Fatalf("dry run: %d %s", r.Status, r.Body)
		}
		var est batches.Estimate
		if err := json.Unmarshal(r.Body, &est); err != nil {
			t.Fatal(err)
		}
		if est.Object != "batch.estimate" || est.Lines != 8 || !est.InputTokensEstimated || est.MaxOutputTokens != 24 ||
			len(est.PerModel) != 1 || est.PerModel[0].Model != "mock-gpt" || est.PerModel[0].Lines != 8 || est.EstimatedCost.Native != nil {
			t.Fatalf("estimate %s", r.Body)
		}
		if list := g.Do("GET", "/v1/batches", key, nil).JSON(t)["data"].([]any); len(list) != 0 {
			t.Fatalf("a dry run created %d batches", len(list))
		}

		r = g.Do("POST", "/v1/batches", key, create)
		if r.Status != 200 {
			t.Fatalf("create: %d %s", r.Status, r.Body)
		}
		id := r.JSON(t)["id"].(string)
		for deadline := time.Now().Add(20 * time.Second); ; time.Sleep(50 * time.Millisecond) {
			b := g.Do("GET", "/v1/batches/"+id, key, nil).JSON(t)
			if b["status"] == "completed" {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("batch %v", b)
			}
		}
		rep := waitReport(t, g, key, "api_key", 8)
		real := rep["total"].(map[string]any)["spend"].(float64)
		t.Logf("estimated %v (%d input, %d output tokens), the batch cost %v", est.EstimatedCost.Engine, est.InputTokens, est.MaxOutputTokens, real)
		if real <= 0 || est.EstimatedCost.Engine < real*0.9 || est.EstimatedCost.Engine > real*1.1 {
			t.Errorf("estimated %v, the batch cost %v: not within 10%%", est.EstimatedCost.Engine, real)
		}
	})
}

// A line without an output cap is counted at its model's maximum; an
// embeddings batch has no output.
func TestABatchDryRunTakesTheModelsMaximumOutput(t *testing.T) {
	u := newUpstream(t, 0)
	gatewaytest.Run(t, options(u, nil), func(t *testing.T, g *gatewaytest.Gateway) {
		key := g.NewKey(g.NewTeam(nil), nil)
		c := openai.NewClient(option.WithBaseURL(g.URL+"/v1/"), option.WithAPIKey(key), option.WithHTTPClient(g.Client), option.WithMaxRetries(0))
		for _, tc := range []struct {
			endpoint, line string
			input, output  int64
		}{
			{"/v1/chat/completions", `{"custom_id":"a","method":"POST","url":"/v1/chat/completions","body":{"model":"mock-gpt","n":2,"messages":[{"role":"user","content":"12345678"}]}}`, 2, 2 * 16384},
			{"/v1/embeddings", `{"custom_id":"a","method":"POST","url":"/v1/embeddings","body":{"model":"mock-embed","input":["1234","12345678",[1,2,3]]}}`, 1 + 2 + 3, 0},
		} {
			f, err := c.Files.New(context.Background(), openai.FileNewParams{
				File: openai.File(strings.NewReader(tc.line+"\n"), "input.jsonl", "application/jsonl"), Purpose: openai.FilePurposeBatch,
			})
			if err != nil {
				t.Fatal(err)
			}
			r := g.Do("POST", "/v1/batches", key, map[string]any{"input_file_id": f.ID, "endpoint": tc.endpoint, "completion_window": "24h", "dry_run": true})
			var est batches.Estimate
			if r.Status != 200 || json.Unmarshal(r.Body, &est) != nil {
				t.Fatalf("dry run: %d %s", r.Status, r.Body)
			}
			if est.InputTokens != tc.input || est.MaxOutputTokens != tc.output {
				t.Errorf("%s: input %d output %d, want %d %d: %s", tc.endpoint, est.InputTokens, est.MaxOutputTokens, tc.input, tc.output, r.Body)
			}
		}
	})
}

// A create whose worst case does not fit the key's budget is refused,
// naming the estimate; one that fits is created.
func TestABatchCreateChecksItsEstimateAgainstTheBudget(t *testing.T) {
	u := newUpstream(t, 0)
	gatewaytest.Run(t, options(u, nil), func(t *testing.T, g *gatewaytest.Gateway) {
		team := g.NewTeam(nil)
		var lines strings.Builder
		for i := range 4 {
			// Worst case per line: 1000 output tokens at 6e-7 = 6e-4 USD.
			fmt.Fprintf(&lines, `{"custom_id":"l%d","method":"POST","url":"/v1/chat/completions","body":{"model":"mock-gpt","max_tokens":1000,"messages":[{"role":"user","content":"hi"}]}}`+"\n", i)
		}
		for _, tc := range []struct {
			budget float64
			status int
		}{{1e-3, 400}, {1e-2, 200}} {
			key := g.NewKey(team, map[string]any{"max_budget": tc.budget})
			c := openai.NewClient(option.WithBaseURL(g.URL+"/v1/"), option.WithAPIKey(key), option.WithHTTPClient(g.Client), option.WithMaxRetries(0))
			f, err := c.Files.New(context.Background(), openai.FileNewParams{
				File: openai.File(strings.NewReader(lines.String()), "input.jsonl", "application/jsonl"), Purpose: openai.FilePurposeBatch,
			})
			if err != nil {
				t.Fatal(err)
			}
			r := g.Do("POST", "/v1/batches", key, map[string]any{"input_file_id": f.ID, "endpoint": "/v1/chat/completions", "completion_window": "24h"})
			if r.Status != tc.status {
				t.Fatalf("budget %v: create %d %s, want %d", tc.budget, r.Status, r.Body, tc.status)
			}
			if tc.status == 400 {
				overBudget(t, "batch create", r)
				if !strings.Contains(string(r.Body), "estimated at up to 0.0024") {
					t.Errorf("the refusal does not name the estimate: %s", r.Body)
				}
			}
		}
	})
}
