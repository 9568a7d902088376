package batches_test

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	mpart "mime/multipart"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"

	"github.com/sluice-gateway/sluice/pkg/gateway/chattest"
	"github.com/sluice-gateway/sluice/pkg/gateway/gatewaytest"
	"github.com/sluice-gateway/sluice/pkg/logevent"
)

// batchAPI is a local server speaking OpenAI's Files and Batch APIs (and,
// under /openai with ?api-version=, Azure's): it keeps the files uploaded
// and the batches created, lets the test move a batch's status, answers a
// completed batch's output file with one chat.completion per input line,
// and records every request.
type batchAPI struct {
	t      *testing.T
	srv    *httptest.Server
	prefix string // "/v1" (OpenAI) or "/openai" (Azure)
	query  string // Azure's api-version

	mu       sync.Mutex
	reqs     []string // "METHOD path"
	auth     []string // the credential header of each request
	files    map[string][]byte
	batches  map[string]map[string]any
	fail     map[string]int // "METHOD path-suffix" → status to answer
	deleted  []string
	seq      int
	lastBody map[string]any
}

func newBatchAPI(t *testing.T, prefix, query string) *batchAPI {
	a := &batchAPI{t: t, prefix: prefix, query: query, files: map[string][]byte{}, batches: map[string]map[string]any{}, fail: map[string]int{}}
	a.srv = httptest.NewServer(http.HandlerFunc(a.serve))
	t.Cleanup(a.srv.Close)
	return a
}

func (a *batchAPI) failing(op string, status int) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.fail[op] = status
}

func (a *batchAPI) requests() []string {
	a.mu.Lock()
	defer a.mu.Unlock()
	return append([]string(nil), a.reqs...)
}

// set changes a batch's fields (status, output_file_id, …).
func (a *batchAPI) set(id string, fields map[string]any) {
	a.mu.Lock()
	defer a.mu.Unlock()
	for k, v := range fields {
		a.batches[id][k] = v
	}
}

func (a *batchAPI) only() (string, map[string]any) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if len(a.batches) != 1 {
		a.t.Fatalf("%d provider batches, want 1", len(a.batches))
	}
	for id, b := range a.batches {
		return id, b
	}
	return "", nil
}

func (a *batchAPI) serve(w http.ResponseWriter, r *http.Request) {
	a.mu.Lock()
	defer a.mu.Unlock()
	path := strings.TrimPrefix(r.URL.Path, a.prefix)
	a.reqs = append(a.reqs, r.Method+" "+path)
	a.auth = append(a.auth, r.Header.Get("Authorization")+r.Header.Get("Api-Key"))
	if a.query != "" && r.URL.RawQuery != a.query {
		writeJSON(w, 404, map[string]any{"error": map[string]any{"message": "bad query " + r.URL.RawQuery}})
		return
	}
	for op, status := range a.fail {
		if m, suffix, _ := strings.Cut(op, " "); m == r.Method && strings.HasSuffix(path, suffix) {
			writeJSON(w, status, map[string]any{"error": map[string]any{"message": "refused by the test: " + op, "type": "invalid_request_error", "code": "test_refusal"}})
			return
		}
	}
	a.seq++
	switch {
	case r.Method == "POST" && path == "/files":
		mt, params, _ := mime.ParseMediaType(r.Header.Get("Content-Type"))
		if mt != "multipart/form-data" {
			writeJSON(w, 400, map[string]any{"error": map[string]any{"message": "not a form"}})
			return
		}
		mr := mpart.NewReader(r.Body, params["boundary"])
		var purpose string
		var data []byte
		for {
			p, err := mr.NextPart()
			if err != nil {
				break
			}
			b, _ := io.ReadAll(p)
			switch p.FormName() {
			case "purpose":
				purpose = string(b)
			case "file":
				data = b
			}
		}
		if purpose != "batch" {
			writeJSON(w, 400, map[string]any{"error": map[string]any{"message": "purpose " + purpose}})
			return
		}
		id := fmt.Sprintf("file-up%d", a.seq)
		a.files[id] = data
		writeJSON(w, 200, map[string]any{"id": id, "object": "file", "bytes": len(data), "created_at": 1, "filename": "x.jsonl", "purpose": "batch", "status": "processed"})
	case r.Method == "POST" && path == "/batches":
		var body map[string]any
		json.NewDecoder(r.Body).Decode(&body)
		a.lastBody = body
		id := fmt.Sprintf("batch_up%d", a.seq)
		b := map[string]any{"id": id, "object": "batch", "endpoint": body["endpoint"], "input_file_id": body["input_file_id"],
			"completion_window": "24h", "status": "validating", "created_at": 1700000000, "metadata": body["metadata"],
			"request_counts": map[string]any{"total": 0, "completed": 0, "failed": 0}}
		a.batches[id] = b
		writeJSON(w, 200, b)
	case r.Method == "GET" && strings.HasPrefix(path, "/batches/"):
		b, ok := a.batches[strings.TrimPrefix(path, "/batches/")]
		if !ok {
			writeJSON(w, 404, map[string]any{"error": map[string]any{"message": "No batch found"}})
			return
		}
		writeJSON(w, 200, b)
	case r.Method == "POST" && strings.HasSuffix(path, "/cancel"):
		b := a.batches[strings.TrimSuffix(strings.TrimPrefix(path, "/batches/"), "/cancel")]
		b["status"], b["cancelling_at"] = "cancelling", 1700000100
		writeJSON(w, 200, b)
	case r.Method == "GET" && strings.HasSuffix(path, "/content"):
		id := strings.TrimSuffix(strings.TrimPrefix(path, "/files/"), "/content")
		data, ok := a.files[id]
		if !ok {
			writeJSON(w, 404, map[string]any{"error": map[string]any{"message": "No such file"}})
			return
		}
		w.Header().Set("Content-Type", "application/octet-stream")
		w.Write(data)
	case r.Method == "DELETE" && strings.HasPrefix(path, "/files/"):
		id := strings.TrimPrefix(path, "/files/")
		a.deleted = append(a.deleted, id)
		delete(a.files, id)
		writeJSON(w, 200, map[string]any{"id": id, "object": "file", "deleted": true})
	default:
		writeJSON(w, 404, map[string]any{"error": map[string]any{"message": "no route " + r.Method + " " + path}})
	}
}

// complete ends batch id as completed: its output file answers each input
// line (the line "fail" in the error file), with usage.
func (a *batchAPI) complete(id string) {
	a.mu.Lock()
	defer a.mu.Unlock()
	b := a.batches[id]
	in := a.files[b["input_file_id"].(string)]
	var out, errs strings.Builder
	n := 0
	sc := bufio.NewScanner(strings.NewReader(string(in)))
	for sc.Scan() {
		var l line
		json.Unmarshal(sc.Bytes(), &l)
		n++
		if l.CustomID == "fail" {
			fmt.Fprintf(&errs, `{"id":"batch_req_%d","custom_id":%q,"response":{"status_code":400,"request_id":"req_%d","body":{"error":{"message":"bad line","type":"invalid_request_error"}}},"error":null}`+"\n", n, l.CustomID, n)
			continue
		}
		fmt.Fprintf(&out, `{"id":"batch_req_%d","custom_id":%q,"response":{"status_code":200,"request_id":"req_%d","body":{"id":"chatcmpl-%d","object":"chat.completion","created":1,"model":%q,"choices":[{"index":0,"message":{"role":"assistant","content":"answer %s"},"finish_reason":"stop"}],"usage":{"prompt_tokens":3,"completion_tokens":2,"total_tokens":5}}},"error":null}`+"\n",
			n, l.CustomID, n, n, l.Body["model"], l.CustomID)
	}
	a.files["file-out"] = []byte(out.String())
	b["output_file_id"] = "file-out"
	if errs.Len() > 0 {
		a.files["file-err"] = []byte(errs.String())
		b["error_file_id"] = "file-err"
	}
	b["status"] = "completed"
	b["in_progress_at"], b["finalizing_at"], b["completed_at"] = 1700000010, 1700000020, 1700000030
	b["request_counts"] = map[string]any{"total": n, "completed": n - strings.Count(errs.String(), "\n"), "failed": strings.Count(errs.String(), "\n")}
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	json.NewEncoder(w).Encode(v)
}

func nativeChatLines(model string, ids ...string) []line {
	var out []line
	for _, id := range ids {
		out = append(out, line{CustomID: id, Method: "POST", URL: "/v1/chat/completions",
			Body: map[string]any{"model": model, "messages": []any{map[string]any{"role": "user", "content": "hi " + id}}}})
	}
	return out
}

func nativeConfig(openaiURL, azureURL string) string {
	return fmt.Sprintf(`model_list:
  - model_name: gpt-batch
    litellm_params: {model: openai/gpt-4o-mini, api_base: %[1]s/v1, api_key: sk-openai}
  - model_name: azure-batch
    litellm_params: {model: azure/gpt4o-global-batch, api_base: %[2]s, api_key: az-key, api_version: "2024-10-21"}
    model_info: {mode: batch}
  - model_name: azure-online
    litellm_params: {model: azure/gpt4o-standard, api_base: %[2]s, api_key: az-key, api_version: "2024-10-21"}
`, openaiURL, azureURL) + chattest.EventsConfig
}

// A native batch on OpenAI, driven by the official Go client on both
// backends: create (custom_llm_provider) uploads the input with each
// line's model rewritten to OpenAI's name and creates the batch there;
// GET mirrors the provider's progress; once it completes, the output and
// error files are copied into sluice and read through the Files API.
func TestNativeOpenAIRoundTrip(t *testing.T) {
	for _, b := range gatewaytest.Backends() {
		t.Run(b.Name, func(t *testing.T) {
			up := newBatchAPI(t, "/v1", "")
			az := newBatchAPI(t, "/openai", "api-version=2024-10-21")
			clk := &clock{}
			g := gatewaytest.Start(t, b, gatewaytest.Options{Config: nativeConfig(up.srv.URL, az.srv.URL), Now: clk.now})
			ctx := context.Background()
			team, key := g.TeamKey()
			c := client(g, key)
			file := uploadInput(t, g, key, jsonl(nativeChatLines("gpt-batch", "a", "b", "fail")))
			created, err := c.Batches.New(ctx, openai.BatchNewParams{InputFileID: file, Endpoint: openai.BatchNewParamsEndpointV1ChatCompletions,
				CompletionWindow: openai.BatchNewParamsCompletionWindow24h}, option.WithHeader("Custom-Llm-Provider", "openai"))
			if err != nil {
				t.Fatal(err)
			}
			if !strings.HasPrefix(created.ID, "batch_") || created.Status != openai.BatchStatusValidating {
				t.Fatalf("%s", created.RawJSON())
			}
			pid, pb := up.only()
			if diff := cmp.Diff([]string{"POST /files", "POST /batches"}, up.requests()); diff != "" {
				t.Errorf("provider calls (-want +got):\n%s", diff)
			}
			if up.auth[0] != "Bearer sk-openai" {
				t.Errorf("credential %q", up.auth[0])
			}
			want := map[string]any{"input_file_id": pb["input_file_id"], "endpoint": "/v1/chat/completions", "completion_window": "24h",
				"metadata": map[string]any{"sluice_batch_id": created.ID}}
			if diff := cmp.Diff(want, up.lastBody); diff != "" {
				t.Errorf("batch create (-want +got):\n%s", diff)
			}
			if got := string(up.files[pb["input_file_id"].(string)]); strings.Contains(got, "gpt-batch") || strings.Count(got, `"model":"gpt-4o-mini"`) != 3 {
				t.Errorf("uploaded input: %s", got)
			}

			// In progress: a GET within RefreshAfter does not poll; after it, it does.
			up.set(pid, map[string]any{"status": "in_progress", "in_progress_at": 1700000010, "request_counts": map[string]any{"total": 3, "completed": 1, "failed": 0}})
			if got, _ := c.Batches.Get(ctx, created.ID); got.Status != openai.BatchStatusValidating {
				t.Errorf("polled too soon: %s", got.RawJSON())
			}
			clk.advance(10 * time.Second)
			got, err := c.Batches.Get(ctx, created.ID)
			if err != nil || got.Status != openai.BatchStatusInProgress || got.RequestCounts.Total != 3 || got.RequestCounts.Completed != 1 || got.InProgressAt != 1700000010 {
				t.Fatalf("%s %v", got.RawJSON(), err)
			}

			// Completed: the poll job copies the files.
			up.complete(pid)
			clk.advance(10 * time.Second)
			res, err := g.Services.Batches.PollNative(ctx)
			if err != nil || res.Polled != 1 || res.Ended != 1 {
				t.Fatalf("poll: %+v %v", res, err)
			}
			checkMirroredEvents(t, g, created.ID, team)
			got, err = c.Batches.Get(ctx, created.ID)
			if err != nil || got.Status != openai.BatchStatusCompleted || got.OutputFileID == "" || got.ErrorFileID == "" ||
				got.RequestCounts.Completed != 2 || got.RequestCounts.Failed != 1 || got.Usage.TotalTokens != 10 || got.CompletedAt != 1700000030 {
				t.Fatalf("%s %v", got.RawJSON(), err)
			}
			out := readLines(t, c, got.OutputFileID)
			if len(out) != 2 {
				t.Fatalf("output: %v", out)
			}
			for _, l := range out {
				raw, _ := json.Marshal(l["response"].(map[string]any)["body"])
				var cc openai.ChatCompletion
				if err := json.Unmarshal(raw, &cc); err != nil || cc.Choices[0].Message.Content != "answer "+l["custom_id"].(string) || cc.Model != "gpt-4o-mini" {
					t.Errorf("%s: %v", raw, err)
				}
			}
			if errs := readLines(t, c, got.ErrorFileID); len(errs) != 1 || errs[0]["custom_id"] != "fail" {
				t.Errorf("errors: %v", errs)
			}
			f, err := c.Files.Get(ctx, got.OutputFileID)
			if err != nil || f.Purpose != "batch_output" {
				t.Errorf("%+v %v", f, err)
			}
			// Ended: no more polls.
			n := len(up.requests())
			clk.advance(time.Minute)
			c.Batches.Get(ctx, created.ID)
			if res, _ := g.Services.Batches.PollNative(ctx); res.Polled != 0 || len(up.requests()) != n {
				t.Errorf("an ended batch was polled: %+v", res)
			}
		})
	}
}

// checkMirroredEvents checks each line of the native batch (lines a and b
// answered, fail failed), mirrored by the poll job, published its log
// event, of team's gpt-batch.
func checkMirroredEvents(t *testing.T, g *gatewaytest.Gateway, batchID, team string) {
	t.Helper()
	events := map[string]logevent.Event{}
	delivered := chattest.NewEvents(g.Backend.Deliveries)
	for range 3 {
		ev := delivered.Next(t)
		events[ev.Metadata.CustomID] = ev
	}
	for _, id := range []string{"a", "b", "fail"} {
		ev := events[id]
		wantStatus, wantTokens := logevent.StatusSuccess, int64(5)
		if id == "fail" {
			wantStatus, wantTokens = logevent.StatusFailure, 0
		}
		if ev.Metadata.BatchID != batchID || ev.Metadata.UserAPIKeyTeamID != team || ev.CustomLLMProvider != "openai" ||
			ev.ModelGroup != "gpt-batch" || ev.CallType != logevent.CallCompletion || ev.Status != wantStatus || ev.TotalTokens != wantTokens {
			t.Errorf("event of %s: %+v", id, ev)
		}
	}
}

func readLines(t *testing.T, c openai.Client, id string) []map[string]any {
	t.Helper()
	resp, err := c.Files.Content(context.Background(), id)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var out []map[string]any
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		var l map[string]any
		if err := json.Unmarshal(sc.Bytes(), &l); err != nil {
			t.Fatalf("%s: %v", sc.Text(), err)
		}
		out = append(out, l)
	}
	return out
}

// Cancel is forwarded; the provider's cancelled batch keeps what finished.
// Provider failures: a refused upload and a refused create make failed
// batches with the provider's message (the file of the refused create is
// deleted there); a provider batch that is gone fails the batch at its
// next poll; a refused cancel is a 409. Azure: the lines' models must be
// global-batch deployments (a 400 naming the line), and a batch goes to
// /openai/… with the api-version, the api-key and endpoints without /v1.
func TestNativeCancelFailuresAzure(t *testing.T) {
	for _, b := range gatewaytest.Backends() {
		t.Run(b.Name, func(t *testing.T) {
			up := newBatchAPI(t, "/v1", "")
			az := newBatchAPI(t, "/openai", "api-version=2024-10-21")
			clk := &clock{}
			g := gatewaytest.Start(t, b, gatewaytest.Options{Config: nativeConfig(up.srv.URL, az.srv.URL), Now: clk.now})
			_, key := g.TeamKey()
			r := &nativeRun{ctx: context.Background(), g: g, key: key, c: client(g, key), up: up, az: az, clk: clk,
				native: option.WithJSONSet("model", "gpt-batch")}
			t.Run("cancel", r.cancel)
			t.Run("refused create", r.refusedCreate)
			t.Run("refused upload", r.refusedUpload)
			t.Run("provider batch gone", r.providerBatchGone)
			t.Run("azure", r.azure)
		})
	}
}

// nativeRun is what TestNativeCancelFailuresAzure's cases share on one
// backend: the gateway, a team key and its client, the OpenAI and Azure
// batch APIs and the services' clock.
type nativeRun struct {
	ctx    context.Context
	g      *gatewaytest.Gateway
	key    string
	c      openai.Client
	up, az *batchAPI
	clk    *clock
	native option.RequestOption // LiteLLM's managed form: a model in the body
}

// params is a chat batch of file.
func (r *nativeRun) params(file string) openai.BatchNewParams {
	return openai.BatchNewParams{InputFileID: file, Endpoint: openai.BatchNewParamsEndpointV1ChatCompletions, CompletionWindow: openai.BatchNewParamsCompletionWindow24h}
}

func (r *nativeRun) cancel(t *testing.T) {
	created, err := r.c.Batches.New(r.ctx, r.params(uploadInput(t, r.g, r.key, jsonl(nativeChatLines("gpt-batch", "c1", "c2")))), r.native)
	if err != nil {
		t.Fatal(err)
	}
	got, err := r.c.Batches.Cancel(r.ctx, created.ID)
	if err != nil || got.Status != openai.BatchStatusCancelling {
		t.Fatalf("%s %v", got.RawJSON(), err)
	}
	pid := strings.TrimPrefix(r.up.requests()[len(r.up.requests())-1], "POST /batches/")
	pid = strings.TrimSuffix(pid, "/cancel")
	r.up.complete(pid)
	r.up.set(pid, map[string]any{"status": "cancelled", "cancelled_at": 1700000200, "completed_at": nil})
	r.clk.advance(10 * time.Second)
	got, err = r.c.Batches.Get(r.ctx, created.ID)
	if err != nil || got.Status != openai.BatchStatusCancelled || got.CancelledAt != 1700000200 || len(readLines(t, r.c, got.OutputFileID)) != 2 {
		t.Fatalf("%s %v", got.RawJSON(), err)
	}
	// Cancelled: a further cancel is OpenAI's 409.
	if _, err := r.c.Batches.Cancel(r.ctx, created.ID); !isStatus(err, 409) {
		t.Errorf("cancel of a cancelled native batch: %v", err)
	}
	r.up.failing("POST /cancel", 400)
	created, _ = r.c.Batches.New(r.ctx, r.params(uploadInput(t, r.g, r.key, jsonl(nativeChatLines("gpt-batch", "c3")))), r.native)
	if _, err := r.c.Batches.Cancel(r.ctx, created.ID); !isStatus(err, 409) {
		t.Errorf("a refused cancel: %v", err)
	}
	r.up.mu.Lock()
	delete(r.up.fail, "POST /cancel")
	r.up.mu.Unlock()
}

func (r *nativeRun) refusedCreate(t *testing.T) {
	r.up.failing("POST /batches", 400)
	defer func() { r.up.mu.Lock(); delete(r.up.fail, "POST /batches"); r.up.mu.Unlock() }()
	got, err := r.c.Batches.New(r.ctx, r.params(uploadInput(t, r.g, r.key, jsonl(nativeChatLines("gpt-batch", "r1")))), r.native)
	if err != nil || got.Status != openai.BatchStatusFailed || len(got.Errors.Data) != 1 ||
		got.Errors.Data[0].Code != "test_refusal" || !strings.Contains(got.Errors.Data[0].Message, "refused by the test") {
		t.Fatalf("%s %v", got.RawJSON(), err)
	}
	r.up.mu.Lock()
	deleted := append([]string(nil), r.up.deleted...)
	r.up.mu.Unlock()
	if len(deleted) != 1 {
		t.Errorf("the refused batch's file was not deleted: %v", deleted)
	}
}

func (r *nativeRun) refusedUpload(t *testing.T) {
	r.up.failing("POST /files", 413)
	defer func() { r.up.mu.Lock(); delete(r.up.fail, "POST /files"); r.up.mu.Unlock() }()
	n := len(r.up.requests())
	got, err := r.c.Batches.New(r.ctx, r.params(uploadInput(t, r.g, r.key, jsonl(nativeChatLines("gpt-batch", "u1")))), r.native)
	if err != nil || got.Status != openai.BatchStatusFailed || got.Errors.Data[0].Code != "test_refusal" {
		t.Fatalf("%s %v", got.RawJSON(), err)
	}
	if diff := cmp.Diff([]string{"POST /files"}, r.up.requests()[n:]); diff != "" {
		t.Errorf("after a refused upload (-want +got):\n%s", diff)
	}
}

func (r *nativeRun) providerBatchGone(t *testing.T) {
	created, err := r.c.Batches.New(r.ctx, r.params(uploadInput(t, r.g, r.key, jsonl(nativeChatLines("gpt-batch", "g1")))), r.native)
	if err != nil {
		t.Fatal(err)
	}
	r.up.mu.Lock()
	for id, pb := range r.up.batches {
		if pb["metadata"].(map[string]any)["sluice_batch_id"] == created.ID {
			delete(r.up.batches, id)
		}
	}
	r.up.mu.Unlock()
	r.clk.advance(10 * time.Second)
	got, err := r.c.Batches.Get(r.ctx, created.ID)
	if err != nil || got.Status != openai.BatchStatusFailed || !strings.Contains(got.Errors.Data[0].Message, "no longer has the batch") {
		t.Fatalf("%s %v", got.RawJSON(), err)
	}
}

func (r *nativeRun) azure(t *testing.T) {
	// Line 2 names a deployment that is not a global-batch one.
	bad := append(nativeChatLines("azure-batch", "z1"), nativeChatLines("azure-online", "z2")...)
	_, err := r.c.Batches.New(r.ctx, r.params(uploadInput(t, r.g, r.key, jsonl(bad))), option.WithQuery("custom_llm_provider", "azure"))
	var apiErr *openai.Error
	if !errors.As(err, &apiErr) || apiErr.StatusCode != 400 || apiErr.Param != "line 2" || !strings.Contains(apiErr.Message, "global-batch") {
		t.Fatalf("%v", err)
	}
	created, err := r.c.Batches.New(r.ctx, r.params(uploadInput(t, r.g, r.key, jsonl(nativeChatLines("gpt4o-global-batch", "z3", "z4")))), option.WithQuery("custom_llm_provider", "azure"))
	if err != nil || created.Status != openai.BatchStatusValidating {
		t.Fatalf("%v", err)
	}
	_, pb := r.az.only()
	if pb["endpoint"] != "/chat/completions" || r.az.auth[0] != "az-key" {
		t.Errorf("azure batch %v (credential %q)", pb, r.az.auth[0])
	}
	in := string(r.az.files[pb["input_file_id"].(string)])
	if strings.Count(in, `"url":"/chat/completions"`) != 2 || strings.Count(in, `"model":"gpt4o-global-batch"`) != 2 {
		t.Errorf("azure input: %s", in)
	}
}

func isStatus(err error, status int) bool {
	var apiErr *openai.Error
	return errors.As(err, &apiErr) && apiErr.StatusCode == status
}
