package batches_test

import (
	"encoding/json"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/sluice-gateway/sluice/pkg/batches"
	"github.com/sluice-gateway/sluice/pkg/gateway/chattest"
	"github.com/sluice-gateway/sluice/pkg/gateway/gatewaytest"
	"github.com/sluice-gateway/sluice/pkg/logevent"
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

// A chat completions batch runs each line through the chat operation the
// route runs — an OpenAI-compatible provider forwarded, Anthropic
// translated — and writes OpenAI's batch lines: the output line wraps the
// chat.completion the route would answer, the error line the provider's
// status and the error body the route would answer; each line's log event
// names the batch and the line, under the request id of its output line.
func TestChatBatchRunsThroughTheChatOperation(t *testing.T) {
	u := newUpstream(t)
	opts := options(u)
	opts.Config += chattest.EventsConfig
	gatewaytest.Run(t, opts, func(t *testing.T, g *gatewaytest.Gateway) {
		_, key := g.TeamKey()
		run := t.Name()
		lines := append(chatLines("gpt", "gpt", 3, func(i int) string { return run + " gpt " + strconv.Itoa(i) }),
			chatLines("claude", "claude", 3, func(i int) string { return run + " claude " + strconv.Itoa(i) })...)
		lines = append(lines, chatLines("claude", "bad-claude", 1, func(int) string { return "fail-400 claude" })...)
		resp := g.Do("POST", "/v1/batches", key, map[string]any{"input_file_id": uploadInput(t, g, key, jsonl(lines)),
			"endpoint": "/v1/chat/completions", "completion_window": "24h"})
		if resp.Status != 200 {
			t.Fatalf("create: %d %s", resp.Status, resp.Body)
		}
		b := waitFor(t, g, key, decodeBatch(t, resp.Body).ID, batches.StatusCompleted)
		if b.RequestCounts != (batches.RequestCounts{Total: 7, Completed: 6, Failed: 1}) {
			t.Errorf("request_counts %+v", b.RequestCounts)
		}
		if want := (batches.Usage{InputTokens: 3*5 + 3*6, OutputTokens: 3*7 + 3*8, TotalTokens: 3*12 + 3*14}); b.Usage != want {
			t.Errorf("usage %+v, want %+v", b.Usage, want)
		}

		out, errs := readResultLines(t, g, key, b.OutputFileID), readResultLines(t, g, key, b.ErrorFileID)
		if len(out) != 6 || len(errs) != 1 {
			t.Fatalf("%d output lines, %d error lines", len(out), len(errs))
		}
		for _, l := range lines[:6] {
			text := l.Body["messages"].([]any)[0].(map[string]any)["content"].(string)
			var cc struct {
				ID, Object, Model string
				Choices           []struct {
					Index        int
					Message      struct{ Role, Content string }
					FinishReason string `json:"finish_reason"`
				}
				Usage struct {
					PromptTokens     int64 `json:"prompt_tokens"`
					CompletionTokens int64 `json:"completion_tokens"`
				}
			}
			r := out[l.CustomID]
			if err := json.Unmarshal([]byte(r.body), &cc); err != nil || r.status != "200" || !strings.HasPrefix(cc.ID, "chatcmpl-") ||
				cc.Object != "chat.completion" || len(cc.Choices) != 1 || cc.Choices[0].Message.Role != "assistant" ||
				cc.Choices[0].Message.Content != "echo: "+text || cc.Choices[0].FinishReason != "stop" || cc.Usage.PromptTokens == 0 {
				t.Errorf("%s: %+v (%v)", l.CustomID, r, err)
			}
			if u.calls(text) != 1 {
				t.Errorf("%s: the provider was called %d times", l.CustomID, u.calls(text))
			}
		}
		e := errs["bad-claude-0"]
		var eb struct {
			Error struct{ Message, Type string }
		}
		if json.Unmarshal([]byte(e.body), &eb) != nil || e.status != "400" || eb.Error.Type != "invalid_request_error" ||
			!strings.Contains(eb.Error.Message, "this input is not valid for this model") {
			t.Errorf("the refused line: %+v", e)
		}

		events := map[string]logevent.Event{}
		delivered := chattest.NewEvents(g.Backend.Deliveries)
		for range lines {
			ev := delivered.Next(t)
			if ev.Metadata.BatchID != b.ID {
				t.Errorf("an event of batch %q, want %s", ev.Metadata.BatchID, b.ID)
			}
			events[ev.Metadata.CustomID] = ev
		}
		for _, l := range lines {
			r := out[l.CustomID]
			if r.requestID == "" {
				r = errs[l.CustomID]
			}
			if ev, ok := events[l.CustomID]; !ok || ev.ID != r.requestID {
				t.Errorf("%s: event %q, line request_id %q", l.CustomID, ev.ID, r.requestID)
			}
		}
		if ev := events["bad-claude-0"]; ev.Status != logevent.StatusFailure {
			t.Errorf("the refused line's event is a %s", ev.Status)
		}
	})
}

// okLine is a batch output or error file line with a response, as OpenAI
// writes it.
var okLine = regexp.MustCompile(`^\{"id":"batch_req_[A-Za-z0-9]+","custom_id":"([^"]+)","response":\{"status_code":(\d+),"request_id":"(req_[^"]+)","body":(\{.*\})\},"error":null\}$`)

// resultLine is one line's response in a batch's output or error file.
type resultLine struct {
	status    string
	requestID string
	body      string
}

// readResultLines reads the file id (none when nil) by custom_id, failing
// the test on a line that is not OpenAI's.
func readResultLines(t *testing.T, g *gatewaytest.Gateway, key string, id *string) map[string]resultLine {
	t.Helper()
	out := map[string]resultLine{}
	if id == nil {
		return out
	}
	r := g.Do("GET", "/v1/files/"+*id+"/content", key, nil)
	for _, l := range strings.Split(strings.TrimSuffix(string(r.Body), "\n"), "\n") {
		m := okLine.FindStringSubmatch(l)
		if m == nil {
			t.Errorf("not an OpenAI batch line: %s", l)
			continue
		}
		out[m[1]] = resultLine{m[2], m[3], m[4]}
	}
	return out
}
