package modelcall_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/sluice-gateway/sluice/pkg/api"
	"github.com/sluice-gateway/sluice/pkg/auth"
	"github.com/sluice-gateway/sluice/pkg/gateway/gatewaytest"
	"github.com/sluice-gateway/sluice/pkg/logevent"
	"github.com/sluice-gateway/sluice/pkg/modelcall"
	"github.com/sluice-gateway/sluice/pkg/store"
)

// recordingLimiter records every take: what a call charges.
type recordingLimiter struct {
	store.Limiter
	mu    sync.Mutex
	takes []string
}

func (l *recordingLimiter) Take(ctx context.Context, scope string, window time.Duration, takes ...store.Take) (store.Decision, error) {
	l.mu.Lock()
	for _, t := range takes {
		l.takes = append(l.takes, fmt.Sprintf("%s:%s %d", scope, t.Counter, t.N))
	}
	l.mu.Unlock()
	return l.Limiter.Take(ctx, scope, window, takes...)
}

// charges returns the takes since the last call.
func (l *recordingLimiter) charges() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	out := l.takes
	l.takes = nil
	return out
}

// fakeOpenAI answers embeddings and moderations as OpenAI does; model
// "bad-model" is refused with OpenAI's 400.
func fakeOpenAI(t *testing.T) *httptest.Server {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var req struct {
			Model string `json:"model"`
		}
		json.NewDecoder(r.Body).Decode(&req)
		w.Header().Set("Content-Type", "application/json")
		switch {
		case req.Model == "bad-model":
			w.WriteHeader(400)
			io.WriteString(w, `{"error":{"message":"This model's maximum context length is 8192 tokens.","type":"invalid_request_error","param":"input","code":null}}`)
		case strings.HasSuffix(r.URL.Path, "/embeddings"):
			io.WriteString(w, `{"object":"list","data":[{"object":"embedding","index":0,"embedding":[0.1,-0.2]},{"object":"embedding","index":1,"embedding":[0.3,0.4]}],"model":"text-embedding-3-small","usage":{"prompt_tokens":4,"total_tokens":4}}`)
		case strings.HasSuffix(r.URL.Path, "/chat/completions"):
			io.WriteString(w, `{"id":"chatcmpl-1","object":"chat.completion","created":1741569952,"model":"gpt-4o-mini","choices":[{"index":0,"message":{"role":"assistant","content":"Hi.","refusal":null},"logprobs":null,"finish_reason":"stop"}],"usage":{"prompt_tokens":9,"completion_tokens":2,"total_tokens":11}}`)
		case strings.HasSuffix(r.URL.Path, "/moderations"):
			io.WriteString(w, `{"id":"modr-1","model":"omni-moderation-latest","results":[{"flagged":true,"categories":{"violence":true},"category_scores":{"violence":0.9},"category_applied_input_types":{"violence":["text"]}}]}`)
		default:
			w.WriteHeader(404)
		}
	}))
	t.Cleanup(srv.Close)
	return srv
}

// TestHTTPAndDirectCallsAreTheSame: a request gives the same answer bytes,
// the same log event (but for its id and times) and the same limiter
// charges through the HTTP route as through modelcall.Run, the batch
// worker's path — for embeddings, moderations and chat, successes and
// failures.
func TestHTTPAndDirectCallsAreTheSame(t *testing.T) {
	up := fakeOpenAI(t)
	cfg := fmt.Sprintf(`model_list:
  - model_name: small
    litellm_params: {model: openai/text-embedding-3-small, api_base: %[1]s/v1, api_key: k, rpm: 1000, tpm: 100000}
  - model_name: bad
    litellm_params: {model: openai/bad-model, api_base: %[1]s/v1, api_key: k}
  - model_name: omni-moderation-latest
    litellm_params: {model: openai/omni-moderation-latest, api_base: %[1]s/v1, api_key: k}
  - model_name: chat
    litellm_params: {model: openai/gpt-4o-mini, api_base: %[1]s/v1, api_key: k, rpm: 1000, tpm: 100000}
litellm_settings:
  callbacks: [langfuse]
environment_variables: {LANGFUSE_PUBLIC_KEY: pk-lf, LANGFUSE_SECRET_KEY: sk-lf}
`, up.URL)
	limiter := &recordingLimiter{}
	opts := gatewaytest.Options{Config: cfg, Backend: func(b *store.Backend) {
		limiter.Limiter = b.Limiter
		b.Limiter = limiter
	}}
	gatewaytest.Run(t, opts, func(t *testing.T, g *gatewaytest.Gateway) {
		ctx := context.Background()
		team := g.NewTeam(map[string]any{"team_alias": "same", "rpm_limit": 1000, "tpm_limit": 100000})
		key := g.NewKey(team, map[string]any{"key_alias": "k", "rpm_limit": 1000, "tpm_limit": 100000})
		p, err := g.Services.Auth.Authenticate(ctx, key)
		if err != nil {
			t.Fatal(err)
		}
		limiter.charges()
		for _, tc := range []struct {
			name, path, body string
			status           int
		}{
			{"embeddings", "/v1/embeddings", `{"model":"small","input":["a","b"],"user":"u-1"}`, 200},
			{"embeddings, bad input", "/v1/embeddings", `{"model":"small","input":""}`, 400},
			{"embeddings, provider refuses", "/v1/embeddings", `{"model":"bad","input":"x"}`, 400},
			{"moderations", "/v1/moderations", `{"input":"I will hurt you"}`, 200},
			{"moderations, no input", "/v1/moderations", `{"model":"omni-moderation-latest"}`, 400},
			{"chat", "/v1/chat/completions", `{"model":"chat","messages":[{"role":"user","content":"Hi"}],"temperature":0.2}`, 200},
			{"chat, bad message", "/v1/chat/completions", `{"model":"chat","messages":[{"role":"robot","content":"Hi"}]}`, 400},
			{"chat, provider refuses", "/v1/chat/completions", `{"model":"bad","messages":[{"role":"user","content":"Hi"}]}`, 400},
		} {
			t.Run(tc.name, func(t *testing.T) {
				resp := g.Do("POST", tc.path, key, tc.body)
				if resp.Status != tc.status {
					t.Fatalf("HTTP: %d %s", resp.Status, resp.Body)
				}
				httpCharges := limiter.charges()
				httpEvent := nextEvent(t, g.Backend.Deliveries)

				status, answer := direct(t, g, tc.path, tc.body, p)
				directCharges := limiter.charges()
				directEvent := nextEvent(t, g.Backend.Deliveries)

				if status != resp.Status || !bytes.Equal(answer, resp.Body) {
					t.Errorf("answers differ:\nHTTP   %d %s\ndirect %d %s", resp.Status, resp.Body, status, answer)
				}
				if diff := cmp.Diff(httpCharges, directCharges); diff != "" || len(httpCharges) == 0 {
					t.Errorf("limiter charges (-HTTP +direct):\n%s", diff)
				}
				if diff := cmp.Diff(httpEvent, directEvent, ignoreIDsAndTimes); diff != "" {
					t.Errorf("log events (-HTTP +direct):\n%s", diff)
				}
				if httpEvent.ID == directEvent.ID || !strings.HasPrefix(directEvent.ID, "req_") {
					t.Errorf("event ids %q %q", httpEvent.ID, directEvent.ID)
				}
			})
		}
	})
}

var ignoreIDsAndTimes = cmpopts.IgnoreFields(logevent.Event{}, "ID", "TraceID", "Metadata.RequestID",
	"StartTime", "EndTime", "CompletionStartTime", "ResponseTime")

// direct runs body through the operation at path as the batch worker will,
// and renders the outcome as the HTTP edge does: the answer, or the error.
func direct(t *testing.T, g *gatewaytest.Gateway, path, body string, p auth.Principal) (int, []byte) {
	t.Helper()
	res, err := modelcall.Run(context.Background(), g.Services.Auth, p, g.Services.Operations[path], []byte(body))
	if err != nil {
		w := httptest.NewRecorder()
		api.WriteError(w, httptest.NewRequest("POST", path, nil), err)
		return w.Code, w.Body.Bytes()
	}
	defer res.Close()
	var out bytes.Buffer
	if _, err := res.WriteTo(&out); err != nil {
		t.Fatal(err)
	}
	return 200, out.Bytes()
}

// nextEvent receives the next log event from the delivery queue.
func nextEvent(t *testing.T, q store.Queue) logevent.Event {
	t.Helper()
	ctx := context.Background()
	deadline := time.Now().Add(20 * time.Second)
	for time.Now().Before(deadline) {
		msgs, err := q.Receive(ctx, 1, time.Second)
		if err != nil {
			t.Fatal(err)
		}
		if len(msgs) == 0 {
			continue
		}
		q.Ack(ctx, msgs[0])
		e, err := store.DecodeEvent(msgs[0])
		if err != nil {
			t.Fatal(err)
		}
		var ev logevent.Event
		if err := json.Unmarshal(e.Body, &ev); err != nil {
			t.Fatal(err)
		}
		return ev
	}
	t.Fatal("no log event arrived")
	return logevent.Event{}
}
