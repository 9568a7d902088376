package batches_test

import (
	"encoding/json"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/sluice-gateway/sluice/pkg/batches"
	"github.com/sluice-gateway/sluice/pkg/gateway/gatewaytest"
)

// A batch of embeddings lines routed to an OpenAI-compatible provider and
// to Bedrock Titan runs to completed: every line once across the output
// and error files, the provider's failures with their status and body, the
// counts and usage added up, the files readable through the Files API.
func TestBatchRunsToCompletion(t *testing.T) {
	u := newUpstream(t)
	gatewaytest.Run(t, options(u), func(t *testing.T, g *gatewaytest.Gateway) {
		_, key := g.TeamKey()
		run := t.Name() // the stand-in is shared by the backends: texts are not
		lines := append(embeddingLines("emb", "emb", 5, func(i int) string { return run + " emb text " + strconv.Itoa(i) }),
			embeddingLines("titan", "titan", 4, func(i int) string { return run + " titan text " + strconv.Itoa(i) })...)
		lines = append(lines, embeddingLines("emb", "bad-emb", 1, func(int) string { return "fail-400 emb" })...)
		lines = append(lines, embeddingLines("titan", "bad-titan", 1, func(int) string { return "fail-400 titan" })...)
		file := uploadInput(t, g, key, jsonl(lines))
		b := createBatch(t, g, key, file)
		if b.Status != batches.StatusValidating || !strings.HasPrefix(b.ID, "batch_") || b.Object != "batch" || b.ExpiresAt == nil ||
			*b.ExpiresAt-b.CreatedAt != 24*3600 || b.InputFileID != file || b.CompletionWindow != "24h" {
			t.Fatalf("created %+v", b)
		}
		b = waitFor(t, g, key, b.ID, batches.StatusCompleted)
		if b.RequestCounts != (batches.RequestCounts{Total: 11, Completed: 9, Failed: 2}) {
			t.Errorf("request_counts %+v", b.RequestCounts)
		}
		if b.Usage.InputTokens != 27 || b.Usage.TotalTokens != 27 || b.Usage.OutputTokens != 0 {
			t.Errorf("usage %+v", b.Usage)
		}
		if b.InProgressAt == nil || b.FinalizingAt == nil || b.CompletedAt == nil || b.OutputFileID == nil || b.ErrorFileID == nil ||
			b.FailedAt != nil || b.CancelledAt != nil || b.Errors != nil {
			t.Errorf("completed batch %+v", b)
		}
		o := collect(t, g, key, b, lines)
		for _, l := range lines {
			text := l.Body["input"].(string)
			if strings.HasPrefix(text, "fail-400") {
				r := o.errs[l.CustomID]
				if r.Response == nil || r.Response.StatusCode != 400 || r.Error != nil || !strings.HasPrefix(r.Response.RequestID, "req_") {
					t.Errorf("%s: %+v", l.CustomID, r)
					continue
				}
				var e struct {
					Error struct{ Message, Type string }
				}
				json.Unmarshal(r.Response.Body, &e)
				if !strings.Contains(e.Error.Message, "not valid for this model") || e.Error.Type != "invalid_request_error" {
					t.Errorf("%s: error body %s", l.CustomID, r.Response.Body)
				}
				continue
			}
			r, ok := o.out[l.CustomID]
			if !ok || r.Response == nil || r.Response.StatusCode != 200 || r.Error != nil || !strings.HasPrefix(r.Response.RequestID, "req_") {
				t.Errorf("%s: %+v", l.CustomID, r)
				continue
			}
			var e struct {
				Object string
				Data   []struct{ Embedding []float64 }
			}
			if err := json.Unmarshal(r.Response.Body, &e); err != nil || e.Object != "list" || len(e.Data) != 1 || !slices.Equal(e.Data[0].Embedding, vector(text, 4)) {
				t.Errorf("%s: body %s", l.CustomID, r.Response.Body)
			}
			if u.calls(text) != 1 {
				t.Errorf("%s: the provider was called %d times", l.CustomID, u.calls(text))
			}
		}
		// The files are the team's, purpose batch_output.
		for _, id := range []string{*b.OutputFileID, *b.ErrorFileID} {
			resp := g.Do("GET", "/v1/files/"+id, key, nil)
			if resp.Status != 200 || !strings.Contains(string(resp.Body), `"purpose":"batch_output"`) {
				t.Errorf("file %s: %d %s", id, resp.Status, resp.Body)
			}
		}
		// The input is free again.
		if resp := g.Do("DELETE", "/v1/files/"+file, key, nil); resp.Status != 200 {
			t.Errorf("delete input: %d %s", resp.Status, resp.Body)
		}
	})
}
