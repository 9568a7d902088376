package callbacks_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/fsouza/fake-gcs-server/fakestorage"
	"github.com/google/go-cmp/cmp"

	"github.com/sluice-gateway/sluice/pkg/callbacks/gcsbucket"
	"github.com/sluice-gateway/sluice/pkg/config"
	"github.com/sluice-gateway/sluice/pkg/gateway"
	"github.com/sluice-gateway/sluice/pkg/gateway/gatewaytest"
	"github.com/sluice-gateway/sluice/pkg/gateway/lambdafn"
	"github.com/sluice-gateway/sluice/pkg/logevent"
	"github.com/sluice-gateway/sluice/pkg/providers/google/googletest"
	"github.com/sluice-gateway/sluice/pkg/server"
	"github.com/sluice-gateway/sluice/pkg/store"
)

// arrival is one log event a destination received.
type arrival struct {
	dest, id string
	at       time.Time
	body     map[string]any // what the destination was sent for it
}

// sinks are the three destinations, each checking the credentials and the
// wire format it receives, and recording every event by id.
type sinks struct {
	t        *testing.T
	langfuse *httptest.Server
	smith    *httptest.Server
	gcsFront *httptest.Server
	gcs      *fakestorage.Server
	tokens   *googletest.TokenServer

	mu     sync.Mutex
	bucket string // the GCS bucket of the running subtest
	got    []arrival
	seen   map[string]bool // GCS object names already recorded
}

func newSinks(t *testing.T) *sinks {
	s := &sinks{t: t, tokens: googletest.NewTokenServer(t), seen: map[string]bool{}}
	s.langfuse = httptest.NewServer(http.HandlerFunc(s.ingestion))
	t.Cleanup(s.langfuse.Close)
	s.smith = httptest.NewServer(http.HandlerFunc(s.runs))
	t.Cleanup(s.smith.Close)
	gcs, err := fakestorage.NewServerWithOptions(fakestorage.Options{NoListener: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(gcs.Stop)
	s.gcs = gcs
	s.gcsFront = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if tok, _ := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer "); !s.tokens.Valid(tok) {
			t.Errorf("GCS request without a token minted for the team's service account: %q", r.Header.Get("Authorization"))
			w.WriteHeader(http.StatusUnauthorized)
			return
		}
		gcs.HTTPHandler().ServeHTTP(w, r)
	}))
	t.Cleanup(s.gcsFront.Close)
	return s
}

func (s *sinks) record(dest, id string, body map[string]any) {
	s.mu.Lock()
	s.got = append(s.got, arrival{dest: dest, id: id, at: time.Now(), body: body})
	s.mu.Unlock()
}

// ingestion is Langfuse's batch ingestion endpoint.
func (s *sinks) ingestion(w http.ResponseWriter, r *http.Request) {
	if u, p, _ := r.BasicAuth(); r.URL.Path != "/api/public/ingestion" || u != "pk-lf-team" || p != "sk-lf-team-secret" {
		s.t.Errorf("langfuse: %s %s as %q", r.Method, r.URL.Path, u)
		w.WriteHeader(http.StatusUnauthorized)
		return
	}
	var req struct {
		Batch []struct {
			ID   string         `json:"id"`
			Type string         `json:"type"`
			Body map[string]any `json:"body"`
		} `json:"batch"`
	}
	if err := json.NewDecoder(r.Body).Decode(&req); err != nil {
		s.t.Errorf("langfuse body: %v", err)
	}
	var ok []map[string]any
	for _, e := range req.Batch {
		if e.Type == "generation-create" {
			s.record("langfuse", e.Body["id"].(string), e.Body)
		}
		ok = append(ok, map[string]any{"id": e.ID, "status": 201})
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(http.StatusMultiStatus)
	json.NewEncoder(w).Encode(map[string]any{"successes": ok, "errors": []any{}})
}

// runs is LangSmith's runs batch endpoint.
func (s *sinks) runs(w http.ResponseWriter, r *http.Request) {
	if r.URL.Path != "/runs/batch" || r.Header.Get("X-Api-Key") != "ls-team-key" {
		s.t.Errorf("langsmith: %s %s with key %q", r.Method, r.URL.Path, r.Header.Get("X-Api-Key"))
		w.WriteHeader(http.StatusUnauthorized)
		return
	}
	var req struct {
		Post []map[string]any `json:"post"`
	}
	if err := json.NewDecoder(r.Body).Decode(&req); err != nil {
		s.t.Errorf("langsmith body: %v", err)
	}
	for _, run := range req.Post {
		inputs, _ := run["inputs"].(map[string]any)
		id, _ := inputs["id"].(string)
		s.record("langsmith", id, run)
	}
	w.Header().Set("Content-Type", "application/json")
	io.WriteString(w, `{}`)
}

// scanGCS records the objects that appeared in the bucket.
func (s *sinks) scanGCS() {
	objs, _, err := s.gcs.ListObjectsWithOptions(s.bucket, fakestorage.ListOptions{})
	if err != nil {
		s.t.Errorf("list GCS objects: %v", err)
		return
	}
	for _, o := range objs {
		s.mu.Lock()
		seen := s.seen[o.Name]
		s.seen[o.Name] = true
		s.mu.Unlock()
		if seen {
			continue
		}
		obj, err := s.gcs.GetObject(s.bucket, o.Name)
		if err != nil {
			s.t.Errorf("GCS object %s: %v", o.Name, err)
			continue
		}
		var body map[string]any
		if err := json.Unmarshal(obj.Content, &body); err != nil {
			s.t.Errorf("GCS object %s: %v", o.Name, err)
		}
		id := o.Name[strings.LastIndexByte(o.Name, '/')+1:]
		if want := time.Now().UTC().Format("2006-01-02") + "/" + id; o.Name != want {
			s.t.Errorf("GCS object %s, want %s", o.Name, want)
		}
		s.record("gcs", id, body)
	}
}

// wait waits until every (destination, id) of want has arrived, or within.
func (s *sinks) wait(within time.Duration, want ...[2]string) map[[2]string]arrival {
	s.t.Helper()
	deadline := time.Now().Add(within)
	for {
		s.scanGCS()
		found := map[[2]string]arrival{}
		s.mu.Lock()
		for _, a := range s.got {
			found[[2]string{a.dest, a.id}] = a
		}
		s.mu.Unlock()
		missing := 0
		for _, w := range want {
			if _, ok := found[w]; !ok {
				missing++
			}
		}
		if missing == 0 {
			return found
		}
		if time.Now().After(deadline) {
			s.t.Fatalf("%d of %v did not arrive within %s", missing, want, within)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// received lists every (destination, id) received, sorted.
func (s *sinks) received() [][2]string {
	s.scanGCS()
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([][2]string, 0, len(s.got))
	for _, a := range s.got {
		out = append(out, [2]string{a.dest, a.id})
	}
	sort.Slice(out, func(i, j int) bool { return out[i][0]+out[i][1] < out[j][0]+out[j][1] })
	return out
}

// upstream is the provider behind the model calls: OpenAI embeddings,
// moderations (a model "bad" it refuses) and chat completions (streamed
// when asked), and Anthropic's messages.
func upstream(t *testing.T) *httptest.Server {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		w.Header().Set("Content-Type", "application/json")
		switch {
		case r.URL.Path == "/v1/embeddings" && strings.Contains(string(body), `"bad-model"`):
			w.WriteHeader(http.StatusBadRequest)
			io.WriteString(w, `{"error":{"message":"The model bad-model does not exist.","type":"invalid_request_error","param":"model","code":"model_not_found"}}`)
		case r.URL.Path == "/v1/embeddings":
			io.WriteString(w, `{"object":"list","data":[{"object":"embedding","index":0,"embedding":[0.1,0.2]}],"model":"text-embedding-3-small","usage":{"prompt_tokens":2,"total_tokens":2}}`)
		case r.URL.Path == "/v1/moderations":
			io.WriteString(w, `{"id":"modr-1","model":"omni-moderation-latest","results":[{"flagged":false,"categories":{},"category_scores":{}}]}`)
		case r.URL.Path == "/v1/chat/completions" && strings.Contains(string(body), `"stream":true`):
			w.Header().Set("Content-Type", "text/event-stream")
			for _, chunk := range []string{
				`{"id":"chatcmpl-2","object":"chat.completion.chunk","created":1,"model":"gpt-4o-mini","choices":[{"index":0,"delta":{"role":"assistant","content":"Hi"},"finish_reason":null}]}`,
				`{"id":"chatcmpl-2","object":"chat.completion.chunk","created":1,"model":"gpt-4o-mini","choices":[{"index":0,"delta":{},"finish_reason":"stop"}]}`,
				`{"id":"chatcmpl-2","object":"chat.completion.chunk","created":1,"model":"gpt-4o-mini","choices":[],"usage":{"prompt_tokens":3,"completion_tokens":1,"total_tokens":4}}`,
				`[DONE]`,
			} {
				io.WriteString(w, "data: "+chunk+"\n\n")
			}
		case r.URL.Path == "/v1/chat/completions":
			io.WriteString(w, `{"id":"chatcmpl-1","object":"chat.completion","created":1,"model":"gpt-4o-mini","choices":[{"index":0,"message":{"role":"assistant","content":"Hi."},"finish_reason":"stop"}],"usage":{"prompt_tokens":3,"completion_tokens":2,"total_tokens":5}}`)
		case r.URL.Path == "/v1/messages":
			io.WriteString(w, `{"id":"msg_1","type":"message","role":"assistant","model":"claude-3-5-haiku-20241022","content":[{"type":"text","text":"Hi."}],"stop_reason":"end_turn","usage":{"input_tokens":5,"output_tokens":2}}`)
		default:
			w.WriteHeader(http.StatusNotFound)
		}
	}))
	t.Cleanup(srv.Close)
	return srv
}

// deliverOnAWS is the callback-delivery function as Lambda runs it on the
// AWS backend: the SQS delivery queue (the SNS topic's subscription, on
// moto) polled as the event source mapping does, each batch given to the
// function's handler as an SQS event, and the messages it did not report
// failed deleted.
func deliverOnAWS(ctx context.Context, t *testing.T, g *gatewaytest.Gateway) {
	job, _ := server.LookupJob("callback-delivery")
	h, err := lambdafn.JobHandler(g.Services, job)
	if err != nil {
		t.Error(err)
		return
	}
	for ctx.Err() == nil {
		msgs, err := g.Backend.Deliveries.Receive(ctx, 10, time.Second)
		if err != nil || len(msgs) == 0 {
			continue
		}
		var ev events.SQSEvent
		for _, m := range msgs {
			body, enc := store.EncodeQueueBody(m.Body)
			rec := events.SQSMessage{MessageId: m.ID, ReceiptHandle: m.Receipt, Body: body, EventSource: "aws:sqs",
				Attributes: map[string]string{"ApproximateReceiveCount": strconv.Itoa(m.Receives)}}
			if enc != "" {
				rec.MessageAttributes = map[string]events.SQSMessageAttribute{store.QueueEncodingAttribute: {StringValue: &enc, DataType: "String"}}
			}
			ev.Records = append(ev.Records, rec)
		}
		payload, _ := json.Marshal(ev)
		out, err := h.Invoke(ctx, payload)
		if err != nil {
			t.Errorf("callback-delivery: %v", err)
			continue
		}
		var resp events.SQSEventResponse
		json.Unmarshal(out, &resp)
		failed := map[string]bool{}
		for _, f := range resp.BatchItemFailures {
			failed[f.ItemIdentifier] = true
		}
		for _, m := range msgs {
			if !failed[m.ID] {
				g.Backend.Deliveries.Ack(context.WithoutCancel(ctx), m)
			}
		}
	}
}

// TestTeamCallbacksEndToEnd: a team adds a Langfuse, a LangSmith and a GCS
// callback through the API; its model calls — embeddings (a success and a
// provider's refusal), a moderation, a chat completion and a streamed one,
// an Anthropic passthrough call — arrive
// at the destinations their callback types select (locally within 5 s of
// the call), another team's calls nowhere; a deleted callback receives
// nothing more, at once. Locally the in-process bus feeds the delivery job
// (store.Consume); on AWS the SNS topic's SQS queue feeds the
// callback-delivery Lambda handler.
func TestTeamCallbacksEndToEnd(t *testing.T) {
	up := upstream(t)
	d := newSinks(t)
	cfg := fmt.Sprintf(`model_list:
  - model_name: small
    litellm_params: {model: openai/text-embedding-3-small, api_base: %[1]s/v1, api_key: k}
  - model_name: bad
    litellm_params: {model: openai/bad-model, api_base: %[1]s/v1, api_key: k}
  - model_name: omni-moderation-latest
    litellm_params: {model: openai/omni-moderation-latest, api_base: %[1]s/v1, api_key: k}
  - model_name: chat
    litellm_params: {model: openai/gpt-4o-mini, api_base: %[1]s/v1, api_key: k}
passthrough:
  anthropic: {api_base: %[1]s, api_key: sk-ant}
callback_settings:
  allow_hosts: ["127.0.0.1"]
`, up.URL)
	opts := gatewaytest.Options{Config: cfg, Env: map[string]string{gcsbucket.EmulatorHostVar: strings.TrimPrefix(d.gcsFront.URL, "http://")}}
	gatewaytest.Run(t, opts, func(t *testing.T, g *gatewaytest.Gateway) {
		bucket := "team-logs-" + t.Name()[strings.LastIndexByte(t.Name(), '/')+1:]
		d.use(t, bucket)
		ctx, stop := context.WithCancel(context.Background())
		var jobs sync.WaitGroup
		t.Cleanup(func() { stop(); jobs.Wait() })
		within := 5 * time.Second
		if isAWS(t) {
			within = 30 * time.Second // moto's SQS long polls are slower; the 5 s is the local mode's
			jobs.Go(func() { deliverOnAWS(ctx, t, g) })
		} else {
			job, _ := server.LookupJob("callback-delivery")
			jobs.Go(func() { gateway.RunJob(ctx, g.Services, job) })
		}

		team, key := g.TeamKey()
		_, quietKey := g.TeamKey()
		d.addTeamCallbacks(t, g, team, key, bucket)

		call := func(key, method, path, body string, status int) string {
			t.Helper()
			resp := g.Do(method, path, key, body)
			if resp.Status != status {
				t.Fatalf("%s %s: %d %s", method, path, resp.Status, resp.Body)
			}
			return resp.Header.Get("X-Request-Id")
		}
		ok := call(key, "POST", "/v1/embeddings", `{"model":"small","input":"hello"}`, 200)
		refused := call(key, "POST", "/v1/embeddings", `{"model":"bad","input":"hello"}`, 400)
		moderated := call(key, "POST", "/v1/moderations", `{"input":"hello"}`, 200)
		chatted := call(key, "POST", "/v1/chat/completions", `{"model":"chat","messages":[{"role":"user","content":"Hi"}]}`, 200)
		streamed := call(key, "POST", "/v1/chat/completions", `{"model":"chat","stream":true,"messages":[{"role":"user","content":"Hi"}]}`, 200)
		passed := call(key, "POST", "/anthropic/v1/messages", `{"model":"claude-3-5-haiku-20241022","max_tokens":8,"messages":[{"role":"user","content":"Hi"}]}`, 200)
		quiet := call(quietKey, "POST", "/v1/embeddings", `{"model":"small","input":"hello"}`, 200)
		called := time.Now()

		got := d.wait(within,
			[2]string{"langfuse", ok}, [2]string{"gcs", ok},
			[2]string{"langfuse", refused}, [2]string{"langsmith", refused},
			[2]string{"langfuse", moderated}, [2]string{"gcs", moderated},
			[2]string{"langfuse", chatted}, [2]string{"gcs", chatted},
			[2]string{"langfuse", streamed}, [2]string{"gcs", streamed},
			[2]string{"langfuse", passed}, [2]string{"gcs", passed})
		t.Logf("delivered %s after the last call", time.Since(called).Round(time.Millisecond))

		checkSentBodies(t, got, ok, refused, moderated, chatted, streamed, passed)

		// A deleted callback receives nothing more: the catalog is dropped
		// at once.
		if resp := g.Do("DELETE", "/team/"+team+"/callback/langfuse", key, nil); resp.Status != 200 {
			t.Fatalf("delete langfuse: %d %s", resp.Status, resp.Body)
		}
		after := call(key, "POST", "/v1/embeddings", `{"model":"small","input":"again"}`, 200)
		d.wait(within, [2]string{"gcs", after})

		want := [][2]string{
			{"gcs", after}, {"gcs", chatted}, {"gcs", moderated}, {"gcs", ok}, {"gcs", passed}, {"gcs", streamed},
			{"langfuse", chatted}, {"langfuse", moderated}, {"langfuse", ok}, {"langfuse", passed}, {"langfuse", refused}, {"langfuse", streamed},
			{"langsmith", refused},
		}
		sort.Slice(want, func(i, j int) bool { return want[i][0]+want[i][1] < want[j][0]+want[j][1] })
		if diff := cmp.Diff(want, d.received()); diff != "" {
			t.Errorf("received (-want +got): %s\n(the quiet team's call was %s)", diff, quiet)
		}
	})
}

// addTeamCallbacks gives the team its three callbacks: Langfuse on success
// and failure, LangSmith on failure, GCS (into bucket) on success.
func (d *sinks) addTeamCallbacks(t *testing.T, g *gatewaytest.Gateway, team, key, bucket string) {
	t.Helper()
	for _, cb := range []map[string]any{
		{"callback_name": "langfuse", "callback_type": "success_and_failure", "callback_vars": map[string]string{
			"langfuse_public_key": "pk-lf-team", "langfuse_secret_key": "sk-lf-team-secret", "langfuse_host": d.langfuse.URL}},
		{"callback_name": "langsmith", "callback_type": "failure", "callback_vars": map[string]string{
			"langsmith_api_key": "ls-team-key", "langsmith_project": "team-proj", "langsmith_base_url": d.smith.URL}},
		{"callback_name": "gcs_bucket", "callback_type": "success", "callback_vars": map[string]string{
			"gcs_bucket_name": bucket, "gcs_path_service_account": d.tokens.ServiceAccountJSON("p")}},
	} {
		if resp := g.Do("POST", "/team/"+team+"/callback", key, cb, "sluice-changed-by", "e2e"); resp.Status != 200 {
			t.Fatalf("add %s: %d %s", cb["callback_name"], resp.Status, resp.Body)
		}
	}
}

// checkSentBodies checks what each destination was sent for the calls of
// TestTeamCallbacksEndToEnd, by their request ids.
func checkSentBodies(t *testing.T, got map[[2]string]arrival, ok, refused, moderated, chatted, streamed, passed string) {
	t.Helper()
	if gen := got[[2]string{"langfuse", refused}].body; gen["level"] != "ERROR" || gen["model"] != "bad-model" {
		t.Errorf("langfuse generation of the refused call: %v", gen)
	}
	if gen := got[[2]string{"langfuse", ok}].body; gen["level"] != "DEFAULT" || gen["input"] != "hello" {
		t.Errorf("langfuse generation of the embeddings call: %v", gen)
	}
	if run := got[[2]string{"langsmith", refused}].body; run["run_type"] != "llm" || run["session_name"] != "team-proj" || !strings.Contains(fmt.Sprint(run["error"]), "bad-model") {
		t.Errorf("langsmith run of the refused call: %v", run)
	}
	if ev := got[[2]string{"gcs", passed}].body; ev["call_type"] != logevent.CallPassthrough || ev["status"] != "success" {
		t.Errorf("GCS object of the passthrough call: %v", ev)
	}
	if ev := got[[2]string{"gcs", moderated}].body; ev["call_type"] != logevent.CallModeration {
		t.Errorf("GCS object of the moderation: %v", ev)
	}
	if ev := got[[2]string{"gcs", chatted}].body; ev["call_type"] != logevent.CallCompletion || ev["stream"] != false || ev["total_tokens"] != 5.0 {
		t.Errorf("GCS object of the chat completion: %v", ev)
	}
	// A team's callback logs the answer's body: the gateway keeps it for
	// the event only when a callback may log it.
	if resp, _ := got[[2]string{"gcs", chatted}].body["response"].(map[string]any); resp["object"] != "chat.completion" || !strings.Contains(fmt.Sprint(resp["choices"]), "Hi.") {
		t.Errorf("GCS object of the chat completion: response %v", resp)
	}
	if ev := got[[2]string{"gcs", streamed}].body; ev["call_type"] != logevent.CallCompletion || ev["stream"] != true || ev["total_tokens"] != 4.0 {
		t.Errorf("GCS object of the streamed chat completion: %v", ev)
	}
	if gen := got[[2]string{"langfuse", streamed}].body; gen["model"] != "gpt-4o-mini" || gen["level"] != "DEFAULT" {
		t.Errorf("langfuse generation of the streamed chat completion: %v", gen)
	}
}

// use starts a subtest: nothing received yet, a fresh bucket.
func (s *sinks) use(t *testing.T, bucket string) {
	s.gcs.CreateBucketWithOpts(fakestorage.CreateBucketOpts{Name: bucket})
	s.mu.Lock()
	s.t, s.bucket, s.got, s.seen = t, bucket, nil, map[string]bool{}
	s.mu.Unlock()
}

// isAWS reports whether the running subtest is the AWS backend's.
func isAWS(t *testing.T) bool { return strings.HasSuffix(t.Name(), "/"+config.BackendAWS) }

// TestGatewayWideCallbacksEndToEnd: a callback of the config's
// litellm_settings, with LiteLLM's environment credentials, receives every
// team's events of its outcome.
func TestGatewayWideCallbacksEndToEnd(t *testing.T) {
	up := upstream(t)
	d := newSinks(t)
	cfg := fmt.Sprintf(`model_list:
  - model_name: small
    litellm_params: {model: openai/text-embedding-3-small, api_base: %[1]s/v1, api_key: k}
  - model_name: bad
    litellm_params: {model: openai/bad-model, api_base: %[1]s/v1, api_key: k}
litellm_settings:
  failure_callback: [langsmith]
environment_variables:
  LANGSMITH_API_KEY: ls-team-key
  LANGSMITH_PROJECT: team-proj
`, up.URL)
	opts := gatewaytest.Options{Config: cfg, Env: map[string]string{"LANGSMITH_BASE_URL": d.smith.URL}}
	gatewaytest.Run(t, opts, func(t *testing.T, g *gatewaytest.Gateway) {
		d.use(t, "unused-"+t.Name()[strings.LastIndexByte(t.Name(), '/')+1:])
		ctx, stop := context.WithCancel(context.Background())
		var jobs sync.WaitGroup
		t.Cleanup(func() { stop(); jobs.Wait() })
		if isAWS(t) {
			jobs.Go(func() { deliverOnAWS(ctx, t, g) })
		} else {
			job, _ := server.LookupJob("callback-delivery")
			jobs.Go(func() { gateway.RunJob(ctx, g.Services, job) })
		}
		_, key := g.TeamKey()
		fine := g.Do("POST", "/v1/embeddings", key, `{"model":"small","input":"hello"}`)
		refused := g.Do("POST", "/v1/embeddings", key, `{"model":"bad","input":"hello"}`)
		if fine.Status != 200 || refused.Status != 400 {
			t.Fatalf("calls: %d, %d", fine.Status, refused.Status)
		}
		id := refused.Header.Get("X-Request-Id")
		got := d.wait(30*time.Second, [2]string{"langsmith", id})
		if run := got[[2]string{"langsmith", id}].body; run["session_name"] != "team-proj" || run["error"] == nil {
			t.Errorf("run %v", run)
		}
		if diff := cmp.Diff([][2]string{{"langsmith", id}}, d.received()); diff != "" {
			t.Errorf("received (-want +got): %s", diff)
		}
	})
}
