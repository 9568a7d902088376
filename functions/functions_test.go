package functions_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-lambda-go/lambda"
	"github.com/aws/aws-lambda-go/lambdacontext"
	"github.com/google/go-cmp/cmp"

	"github.com/sluice-gateway/sluice/pkg/gateway"
	"github.com/sluice-gateway/sluice/pkg/gateway/lambdafn"
	"github.com/sluice-gateway/sluice/pkg/lambdaedge/rie"
	"github.com/sluice-gateway/sluice/pkg/server"
)

// jobFunctions are the functions of the jobs table: they serve no route.
func jobFunctions() []string {
	var names []string
	for _, j := range server.Jobs() {
		names = append(names, j.Name)
	}
	return names
}

// Ids the sample events carry where a real call would carry ids an earlier
// answer gave. The scenario replaces each with what the step that captures
// it answered.
const (
	sampleTeamID         = "team-Q3vT8mKx2LpR7wNc5YbZa9Hd"
	sampleKey            = "sk-Hk3vQ9dLm2Xr7TbN4wYc8Zp1Fj6Gs5Ae0Ku3Vq7Bn2M"
	sampleFileID         = "file-6F2ksmvXxt4sd9Ao1ZmvyXs6"
	sampleUploadID       = "upload_Tz4Lq8Wn2Kc6Rv9Jb3Mx7Hd5"
	sampleCancelUploadID = "upload_Pa7Ns3Vk9Qe2Lw6Gt4Jy8Rc1"
	samplePartID         = "part_Xe5Bm1Qs8Hv3Nk7Dz2Lc9Wr4"
	sampleBatchID        = "batch_Wd3Rk8Ts2Lq6Nv9Hc4Jx7Pb1"
)

// step is one sample event and what its answer must be. A queue job's
// sample (batch-worker) must answer no failed message.
type step struct {
	sample string // events/<function>/<sample>
	status int
	// capture maps a field of the JSON answer to the placeholder id it
	// stands for in later samples.
	capture map[string]string
	// contains must appear in the answer body.
	contains string
	// firstEvent, in a step that proves streaming, is what the first event
	// of the answer holds: the fake provider holds its stream after that
	// event until it has reached the Runtime API.
	firstEvent string
}

func (s step) function() string { return strings.SplitN(s.sample, "/", 2)[0] }

// scenario runs every HTTP sample event in an order where each id a sample
// needs was created by an earlier one, so every sample answers as it would
// against a deployment: a team and a key, a batch input file uploaded,
// listed, read and downloaded, an upload in parts, model calls and the four
// passthrough prefixes, and finally the deletions.
var scenario = []step{
	{sample: "health/liveliness.json", status: 200, contains: `"healthy"`},
	{sample: "health/readiness.json", status: 200, contains: `"healthy"`},
	{sample: "ui/page.json", status: 200, contains: `<label for="key">API key</label>`},
	{sample: "models/list.json", status: 200, contains: `"text-embedding-3-small"`},
	{sample: "admin/team-new.json", status: 200, capture: map[string]string{"team_id": sampleTeamID}},
	{sample: "admin/key-generate.json", status: 200, capture: map[string]string{"key": sampleKey}},
	{sample: "admin/team-info.json", status: 200, contains: `"search"`},
	{sample: "admin/team-list.json", status: 200, contains: `"search"`},
	{sample: "admin/key-info.json", status: 200, contains: `"search-ci"`},
	{sample: "team-callback-add/add-langfuse.json", status: 200, contains: `"langfuse_secret_key":"***REDACTED***"`},
	{sample: "team-callback-get/get.json", status: 200, contains: `"success_callbacks":["langfuse"]`},
	{sample: "team-audit/list.json", status: 200, contains: `"changed_by":"ops@example.com"`},
	{sample: "files-upload/upload-batch-input.json", status: 200, capture: map[string]string{"id": sampleFileID}, contains: `"requests.jsonl"`},
	{sample: "files-list/list-batch-files.json", status: 200, contains: `"requests.jsonl"`},
	{sample: "file-get/get.json", status: 200, contains: `"batch"`},
	{sample: "file-content/download.json", status: 200, contains: `{"custom_id":"req-2"`},
	// A batch on that file, run by the worker's samples (plan, its one
	// chunk, finalize); then a second, cancelled before its plan.
	{sample: "batches-create/create.json", status: 200, capture: map[string]string{"id": sampleBatchID}, contains: `"validating"`},
	{sample: "batch-get/get.json", status: 200, contains: `"search-index"`},
	{sample: "batches-list/list.json", status: 200, contains: `"object":"list"`},
	{sample: "batch-worker/plan.json"},
	{sample: "batch-worker/chunk.json"},
	{sample: "batch-worker/finalize.json"},
	{sample: "batch-get/get.json", status: 200, contains: `"completed":2`},
	{sample: "batches-create/create.json", status: 200, capture: map[string]string{"id": sampleBatchID}},
	{sample: "batch-cancel/cancel.json", status: 200, contains: `"cancelling"`},
	{sample: "batch-worker/plan.json"},
	{sample: "batch-worker/finalize.json"},
	{sample: "batch-get/get.json", status: 200, contains: `"cancelled"`},
	{sample: "uploads/create.json", status: 200, capture: map[string]string{"id": sampleUploadID}},
	{sample: "uploads/add-part.json", status: 200, capture: map[string]string{"id": samplePartID}},
	{sample: "uploads/complete.json", status: 200, contains: `"completed"`},
	{sample: "uploads/create.json", status: 200, capture: map[string]string{"id": sampleCancelUploadID}},
	{sample: "uploads/cancel.json", status: 200, contains: `"cancelled"`},
	{sample: "embeddings/create.json", status: 200, contains: `"embedding"`},
	{sample: "moderations/create.json", status: 200, contains: `"flagged":false`},
	{sample: "moderations/create-litellm-path.json", status: 200, contains: `"results"`},
	{sample: "chat-completions/create-stream.json", status: 200, contains: `"usage":{"prompt_tokens":13`, firstEvent: `"role":"assistant"`},
	{sample: "chat-completions/create-litellm-path.json", status: 200, contains: "The Danube."},
	{sample: "completions/create.json", status: 200, contains: "This is a test."},
	{sample: "responses/create.json", status: 200, contains: "Rivers run to the sea"},
	{sample: "messages/create-stream.json", status: 200, contains: `"usage":{"input_tokens":13,"output_tokens":9`, firstEvent: "event: message_start"},
	{sample: "messages/create.json", status: 200, contains: `{"type":"text","text":"The Danube."}`},
	{sample: "messages/count-tokens.json", status: 200, contains: `{"input_tokens":13}`}, // o200k_base: gpt-4o-mini
	{sample: "passthrough-anthropic/messages-stream.json", status: 200, contains: "event: message_stop", firstEvent: "event: message_start"},
	{sample: "passthrough-gemini/stream-generate-content.json", status: 200, contains: "Rhine, Seine."},
	{sample: "passthrough-vertex-ai/generate-content.json", status: 200, contains: "evaporates"},
	{sample: "passthrough-bedrock/converse.json", status: 200, contains: "Lisbon."},
	{sample: "team-callback-delete/delete-langfuse.json", status: 200, contains: `"success_callbacks":[]`},
	{sample: "team-disable-logging/disable.json", status: 200, contains: "Logging disabled"},
	{sample: "file-delete/delete.json", status: 200, contains: `"deleted":true`},
	{sample: "admin/key-delete.json", status: 200},
}

// capturedBy maps each placeholder to the sample that captures it.
func capturedBy() map[string]string {
	m := map[string]string{}
	for _, s := range scenario {
		for _, ph := range s.capture {
			m[ph] = s.sample
		}
	}
	return m
}

// TestEveryFunctionHasAMain: each function of the route table and of the
// jobs table has its functions/<fn>/main.go, one call building that
// function; and every main is such a function, or the local process.
func TestEveryFunctionHasAMain(t *testing.T) {
	fns := append(server.Functions(), jobFunctions()...)
	for _, fn := range fns {
		src, err := os.ReadFile(filepath.Join(fn, "main.go"))
		if err != nil {
			t.Errorf("function %q has no functions/%s/main.go: %v", fn, fn, err)
			continue
		}
		if !bytes.Contains(src, []byte(`lambdafn.Serve("`+fn+`")`)) {
			t.Errorf("functions/%s/main.go does not build function %q", fn, fn)
		}
	}
	mains, _ := filepath.Glob("*/main.go")
	for _, m := range mains {
		fn := filepath.Dir(m)
		if fn != "local" && !slices.Contains(fns, fn) {
			t.Errorf("functions/%s serves no route of the route table and is no job of the jobs table", fn)
		}
	}
}

// TestEveryFunctionHasOneTransferMode: API Gateway sets the transfer mode
// per integration and a binary answers in one format, so a function's routes
// must all stream or all be buffered.
func TestEveryFunctionHasOneTransferMode(t *testing.T) {
	for _, fn := range server.Functions() {
		if _, err := server.Streams(fn); err != nil {
			t.Error(err)
		}
	}
	if _, err := server.Streams("no-such-function"); err == nil {
		t.Error("Streams accepted a function without routes")
	}
}

// TestEverySampleRuns: every function (jobs included) has sample events,
// and every HTTP sample is in the scenario (so its answer is checked).
func TestEverySampleRuns(t *testing.T) {
	inScenario := map[string]bool{}
	for _, s := range scenario {
		inScenario[s.sample] = true
	}
	fns := server.Functions()
	jobs := jobFunctions()
	for _, fn := range append(slices.Clone(fns), jobs...) {
		if samples, _ := filepath.Glob(filepath.Join("..", "events", fn, "*.json")); len(samples) == 0 {
			t.Errorf("function %s has no sample event in events/%s/", fn, fn)
		}
	}
	samples, _ := filepath.Glob(filepath.Join("..", "events", "*", "*.json"))
	for _, p := range samples {
		rel := filepath.ToSlash(strings.TrimPrefix(p, filepath.Join("..", "events")+string(filepath.Separator)))
		fn := strings.SplitN(rel, "/", 2)[0]
		switch {
		case slices.Contains(fns, fn):
			if !inScenario[rel] {
				t.Errorf("sample events/%s is not in the scenario: add a step saying what it answers", rel)
			}
		case slices.Contains(jobs, fn): // TestJobSamplesInProcess runs them
		default:
			t.Errorf("sample events/%s is for %q, which is no function", rel, fn)
		}
	}
}

// sampleEnv reads events/sample.env.
func sampleEnv(t *testing.T) map[string]string {
	t.Helper()
	f, err := os.Open(filepath.Join("..", "events", "sample.env"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	env := map[string]string{}
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if k, v, ok := strings.Cut(line, "="); ok && !strings.HasPrefix(line, "#") {
			env[k] = v
		}
	}
	if env["SLUICE_MASTER_KEY"] == "" {
		t.Fatal("events/sample.env sets no SLUICE_MASTER_KEY")
	}
	return env
}

// functionEnv is the environment of a function in these tests: the sample
// settings, the world's config and credentials, then extra.
func functionEnv(t *testing.T, w *world, extra map[string]string) map[string]string {
	env := sampleEnv(t)
	env["SLUICE_CONFIG"] = w.config(t)
	for k, v := range w.env() {
		env[k] = v
	}
	for k, v := range extra {
		env[k] = v
	}
	return env
}

// run is one pass of the scenario: the ids captured so far.
type run struct {
	ids map[string]string // placeholder → id
}

// event reads a sample with the placeholders replaced by the captured ids.
func (r *run) event(t *testing.T, s step) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("..", "events", s.sample))
	if err != nil {
		t.Fatal(err)
	}
	if !json.Valid(b) {
		t.Fatalf("events/%s is not JSON", s.sample)
	}
	for ph, by := range capturedBy() {
		if !bytes.Contains(b, []byte(ph)) {
			continue
		}
		id, ok := r.ids[ph]
		if !ok {
			t.Fatalf("events/%s needs the id %s captures, which has not run", s.sample, by)
		}
		b = bytes.ReplaceAll(b, []byte(ph), []byte(id))
	}
	return b
}

// check holds an answer to its step and captures the ids it gives.
func (r *run) check(t *testing.T, s step, streamed bool, out []byte) {
	t.Helper()
	if _, job := server.LookupJob(s.function()); job {
		var resp events.SQSEventResponse
		if err := json.Unmarshal(out, &resp); err != nil || len(resp.BatchItemFailures) != 0 {
			t.Fatalf("%s: answer %s (%v): want no failed message", s.sample, out, err)
		}
		return
	}
	resp, err := rie.DecodeHTTP(streamed, out)
	if err != nil {
		t.Fatalf("%s: %v", s.sample, err)
	}
	if resp.Status != s.status {
		t.Fatalf("%s: status %d, want %d: %s", s.sample, resp.Status, s.status, resp.Body)
	}
	if id := resp.Header.Get("X-Request-Id"); !strings.HasPrefix(id, "req_") {
		t.Errorf("%s: x-request-id %q", s.sample, id)
	}
	if s.contains != "" && !bytes.Contains(resp.Body, []byte(s.contains)) {
		t.Errorf("%s: the answer lacks %s: %s", s.sample, s.contains, resp.Body)
	}
	if len(s.capture) > 0 {
		var m map[string]any
		if err := json.Unmarshal(resp.Body, &m); err != nil {
			t.Fatalf("%s: answer is not a JSON object: %s", s.sample, resp.Body)
		}
		for field, ph := range s.capture {
			v, ok := m[field].(string)
			if !ok || v == "" {
				t.Fatalf("%s: answer has no %q: %s", s.sample, field, resp.Body)
			}
			r.ids[ph] = v
		}
	}
}

// TestSamplesInProcess runs the whole scenario through every function's
// handler as aws-lambda-go calls it (lambda.Handler.Invoke with the event's
// JSON), each function assembled as its main assembles it, all over one
// local store.
func TestSamplesInProcess(t *testing.T) {
	w := newWorld(t)
	env := functionEnv(t, w, map[string]string{"SLUICE_BACKEND": "local", "SLUICE_DATA_DIR": t.TempDir()})
	g, err := gateway.Open(context.Background(), func(k string) string { return env[k] })
	if err != nil {
		t.Fatal(err)
	}
	defer g.Close()
	// Each function is assembled as its main assembles it.
	handlers := map[string]lambda.Handler{}
	for _, fn := range append(server.Functions(), jobFunctions()...) {
		h, err := lambdafn.Handler(g.Services, fn)
		if err != nil {
			t.Fatal(err)
		}
		handlers[fn] = h
	}
	r := &run{ids: map[string]string{}}
	for i, s := range scenario {
		fn := s.function()
		h, ok := handlers[fn]
		if !ok {
			t.Fatalf("%s: no function %q in the route table", s.sample, fn)
		}
		streamed, _ := server.Streams(fn)
		ctx := lambdacontext.NewContext(context.Background(), &lambdacontext.LambdaContext{AwsRequestID: fmt.Sprintf("in-process-%d", i)})
		ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
		out, err := h.Invoke(ctx, r.event(t, s))
		cancel()
		if err != nil {
			t.Fatalf("%s: %v", s.sample, err)
		}
		r.check(t, s, streamed, out)
	}
}

// TestJobSamplesInProcess runs every job's sample events through its handler
// as its main assembles it: a scheduled run succeeds; a queue job's batch
// reports no failed message.
func TestJobSamplesInProcess(t *testing.T) {
	w := newWorld(t)
	env := functionEnv(t, w, map[string]string{"SLUICE_BACKEND": "local", "SLUICE_DATA_DIR": t.TempDir()})
	g, err := gateway.Open(context.Background(), func(k string) string { return env[k] })
	if err != nil {
		t.Fatal(err)
	}
	defer g.Close()
	for _, j := range server.Jobs() {
		h, err := lambdafn.Handler(g.Services, j.Name)
		if err != nil {
			t.Fatal(err)
		}
		samples, _ := filepath.Glob(filepath.Join("..", "events", j.Name, "*.json"))
		for _, sample := range samples {
			event, err := os.ReadFile(sample)
			if err != nil {
				t.Fatal(err)
			}
			ctx := lambdacontext.NewContext(context.Background(), &lambdacontext.LambdaContext{AwsRequestID: "in-process-" + j.Name})
			ctx, cancel := context.WithTimeout(ctx, time.Minute)
			out, err := h.Invoke(ctx, event)
			cancel()
			if err != nil {
				t.Fatalf("%s: %v", sample, err)
			}
			if j.Queue == "" {
				continue
			}
			var resp events.SQSEventResponse
			if err := json.Unmarshal(out, &resp); err != nil || len(resp.BatchItemFailures) != 0 {
				t.Errorf("%s: answer %s (%v): want no failed message", sample, out, err)
			}
		}
	}
	// The delivery sample's two events (a success and a failure) reached
	// the gateway-wide Langfuse callback of the config.
	want := map[string]int{"req_N7Jd2kR9xQ4mT8vL1wZ5bC3y": 1, "req_P2sW7nK4yH9cR3mV6xB1qT8z": 1}
	if diff := cmp.Diff(want, w.loggedEvents()); diff != "" {
		t.Errorf("events the gateway-wide callback received (-want +got):\n%s", diff)
	}
}
