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

// A batch whose key runs out of budget stops running lines: those not run
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
		u.calls.Store(0)
		team := g.NewTeam(nil)
		key := g.NewKey(team, map[string]any{"max_budget": 2.5 * callCost})
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
			t.Fatalf("batch %v %v, want completed with 3 lines run and 3 refused", b["status"], counts)
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
	})
}
