package gateway_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"mime/multipart"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/sluice-gateway/sluice/pkg/config"
	"github.com/sluice-gateway/sluice/pkg/gateway/gatewaytest"
	"github.com/sluice-gateway/sluice/pkg/spend"
	"github.com/sluice-gateway/sluice/pkg/store"
	awsstore "github.com/sluice-gateway/sluice/pkg/store/aws"
	"github.com/sluice-gateway/sluice/pkg/store/aws/awstest"
)

// wantOperations are the AWS operations one call of each request kind makes
// on the AWS backend, warm (its key, team and config read once before), as
// the SDK sends them, in two setups: "bare" (no limits, no budget, no
// logging callback) and "metered" (team and key rpm/tpm limits and
// max_budget, deployment rpm/tpm, a gateway-wide logging callback).
// docs/deploy-aws.md prices them; a kind that gains an operation fails
// here, so the cost table changes with the code.
var wantOperations = map[string]map[string]int{
	// The log event's publish: spend counts every call from its log event
	// (the callback-delivery job, exactly once), so it is published
	// whether or not a callback listens (docs/spend.md).
	"bare/embeddings":    {"SNS PublishBatch": 1},
	"bare/chat streamed": {"SNS PublishBatch": 1},
	"bare/passthrough":   {"SNS PublishBatch": 1},
	// The limiter's windows, one item a scope holding its rpm and tpm
	// counters: at admission the key's, the team's and the deployment's
	// take the request and check their tokens' room in one UpdateItem
	// each; once the usage is known each adds the call's tokens (an
	// UpdateItem each). The budgets: the key's and the team's stored
	// spend and batch reservations, read again when older than
	// spend.DefaultRefresh (a GetItem each, so every call of a container
	// that serves at most one a second). And the log event's publish
	// (one, shared by spend and the callback).
	"metered/embeddings": {
		"DynamoDB GetItem":    4,
		"DynamoDB UpdateItem": 6,
		"SNS PublishBatch":    1,
	},
	"metered/chat streamed": {
		"DynamoDB GetItem":    4,
		"DynamoDB UpdateItem": 6,
		"SNS PublishBatch":    1,
	},
	// A passthrough call has no deployment: the key's and team's windows.
	"metered/passthrough": {
		"DynamoDB GetItem":    4,
		"DynamoDB UpdateItem": 4,
		"SNS PublishBatch":    1,
	},
}

// wantCapacity are the DynamoDB write and read units of one call of each
// metered kind (bare ones use none): every item written or read stays
// within DynamoDB's 1 KB write and 4 KB read unit, so an item that grows
// past one fails here, as an added operation does.
var wantCapacity = map[string][2]int{
	"metered/embeddings":    {6, 4},
	"metered/chat streamed": {6, 4},
	"metered/passthrough":   {4, 4},
}

// countedAWS opens the AWS backend on moto_server with every SDK operation
// counted, and starts the fake provider the counted calls go to.
func countedAWS(t *testing.T) (*awstest.Operations, gatewaytest.Backend, *httptest.Server) {
	t.Helper()
	cfg, res := awstest.Resources(t)
	ops := awstest.CountOperations(&cfg)
	b, err := awsstore.Open(context.Background(), cfg, res)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { b.Close() })
	up := httptest.NewServer(http.HandlerFunc(opsUpstream))
	t.Cleanup(up.Close)
	return ops, gatewaytest.Backend{Name: config.BackendAWS, Open: func(testing.TB) *store.Backend { return b }}, up
}

// TestAWSOperationsPerRequestKind counts, against moto_server, the AWS
// operations each request kind performs, at the SDK's middleware (every
// client the backend builds from the config goes through it).
func TestAWSOperationsPerRequestKind(t *testing.T) {
	ops, backend, up := countedAWS(t)
	models := func(limits string) string {
		return "model_list:\n" +
			"  - model_name: text-embedding-3-small\n    litellm_params: {model: openai/text-embedding-3-small, api_base: " + up.URL + "/v1, api_key: sk-up" + limits + "}\n" +
			"  - model_name: gpt-4o-mini\n    litellm_params: {model: openai/gpt-4o-mini, api_base: " + up.URL + "/v1, api_key: sk-up" + limits + "}\n" +
			"passthrough:\n  anthropic: {api_base: " + up.URL + ", api_key: sk-ant-up}\n"
	}
	for _, setup := range []struct {
		name, config string
		limits       map[string]any
	}{
		{"bare", models(""), nil},
		{"metered", models(", rpm: 100000, tpm: 10000000") +
			"litellm_settings:\n  callbacks: [langfuse]\nenvironment_variables: {LANGFUSE_PUBLIC_KEY: pk-lf, LANGFUSE_SECRET_KEY: sk-lf}\n",
			map[string]any{"rpm_limit": 100000, "tpm_limit": 10000000, "max_budget": 1000}},
	} {
		g := gatewaytest.Start(t, backend, gatewaytest.Options{Config: setup.config})
		fields := map[string]any{"team_alias": setup.name}
		for k, v := range setup.limits {
			fields[k] = v
		}
		team := g.NewTeam(fields)
		delete(fields, "team_alias")
		key := g.NewKey(team, fields)
		for _, c := range []struct {
			kind string
			call func() gatewaytest.Response
		}{
			{"embeddings", func() gatewaytest.Response {
				return g.Do("POST", "/v1/embeddings", key, `{"model":"text-embedding-3-small","input":"the quick brown fox"}`)
			}},
			{"chat streamed", func() gatewaytest.Response {
				return g.Do("POST", "/v1/chat/completions", key, `{"model":"gpt-4o-mini","stream":true,"messages":[{"role":"user","content":"hi"}]}`)
			}},
			{"passthrough", func() gatewaytest.Response {
				return g.Do("POST", "/anthropic/v1/messages", key, `{"model":"claude-sonnet-4-5","max_tokens":16,"messages":[{"role":"user","content":"hi"}]}`,
					"X-Api-Key", key, "Anthropic-Version", "2023-06-01")
			}},
		} {
			name := setup.name + "/" + c.kind
			t.Run(name, func(t *testing.T) {
				if r := c.call(); r.Status != 200 { // warm: key, team, budgets read once
					t.Fatalf("warm-up answered %d: %s", r.Status, r.Body)
				}
				settle(ops)
				// A Lambda container serves one call at a time: a 5 s call's
				// admission finds the stored spend it read for the last one
				// older than the budgets' refresh, and reads it again.
				time.Sleep(spend.DefaultRefresh)
				ops.Reset()
				if r := c.call(); r.Status != 200 {
					t.Fatalf("answered %d: %s", r.Status, r.Body)
				}
				settle(ops)
				t.Logf("%s:\n%s", name, ops)
				if diff := cmp.Diff(wantOperations[name], ops.Counts(), cmpopts.EquateEmpty()); diff != "" {
					t.Errorf("AWS operations of one %s call (-want +got):\n%s\nUpdate wantOperations and the cost table in docs/deploy-aws.md together.", name, diff)
				}
				if wcu, rcu := ops.Capacity(); [2]int{wcu, rcu} != wantCapacity[name] {
					t.Errorf("one %s call used %d WCU and %d RCU, want %v: update wantCapacity and the cost table in docs/deploy-aws.md together", name, wcu, rcu, wantCapacity[name])
				}
			})
		}
	}
}

// settle waits until no operation has been counted, nor been under way,
// for 300 ms: the call's log event and counters are written after its
// answer, and an operation is counted when it ends (a publish slowed by a
// loaded machine would otherwise land in the next call's count).
func settle(ops *awstest.Operations) {
	last, quiet := fmt.Sprint(ops.Counts()), 0
	for quiet < 3 {
		time.Sleep(100 * time.Millisecond)
		now := fmt.Sprint(ops.Counts())
		if now == last && ops.Idle() {
			quiet++
		} else {
			last, quiet = now, 0
		}
	}
}

// opsUpstream answers as OpenAI (embeddings, a streamed chat completion with
// usage) and Anthropic (a message).
func opsUpstream(w http.ResponseWriter, r *http.Request) {
	io.Copy(io.Discard, r.Body)
	switch r.URL.Path {
	case "/v1/embeddings":
		w.Header().Set("Content-Type", "application/json")
		io.WriteString(w, `{"object":"list","data":[{"object":"embedding","index":0,"embedding":[0.1,0.2,0.3]}],"model":"text-embedding-3-small","usage":{"prompt_tokens":4,"total_tokens":4}}`)
	case "/v1/chat/completions":
		w.Header().Set("Content-Type", "text/event-stream")
		for _, d := range []string{
			`{"id":"c1","object":"chat.completion.chunk","created":1,"model":"gpt-4o-mini","choices":[{"index":0,"delta":{"role":"assistant","content":"Hel"}}]}`,
			`{"id":"c1","object":"chat.completion.chunk","created":1,"model":"gpt-4o-mini","choices":[{"index":0,"delta":{"content":"lo"},"finish_reason":"stop"}]}`,
			`{"id":"c1","object":"chat.completion.chunk","created":1,"model":"gpt-4o-mini","choices":[],"usage":{"prompt_tokens":3,"completion_tokens":2,"total_tokens":5}}`,
		} {
			fmt.Fprintf(w, "data: %s\n\n", d)
		}
		io.WriteString(w, "data: [DONE]\n\n")
	case "/v1/messages":
		w.Header().Set("Content-Type", "application/json")
		io.WriteString(w, `{"id":"msg_1","type":"message","role":"assistant","model":"claude-sonnet-4-5","content":[{"type":"text","text":"Hello"}],"stop_reason":"end_turn","usage":{"input_tokens":3,"output_tokens":1}}`)
	default:
		http.Error(w, strings.TrimSpace("no route "+r.URL.Path), http.StatusNotFound)
	}
}

// wantBatchWrites are the AWS writes of one 1,000-line embeddings batch
// (upload, create, plan, chunks, finalize, output file), bare setup. Reads
// and queue receives depend on timing (polls, how SQS groups messages), so
// they are logged, not matched; so do the writes of timedBatchWrites.
var wantBatchWrites = map[string]int{
	"DynamoDB PutItem":     1, // the input file's record
	"DynamoDB UpdateItem":  3,
	"S3 PutObject":         2, // the input file, the output file
	"SQS DeleteMessage":    3, // plan, chunk, finalize
	"SQS SendMessageBatch": 3,
}

// timedBatchWrites are a batch's writes whose count depends on how long
// its lines run, bounded by what the design allows:
//   - the 5 TransactWriteItems of the batch.s life (as before live
//     progress) and a running chunk.s live progress (pkg/batches/progress.go): one
//     TransactWriteItems (its lease and the batch's live counters) at
//     most every batches.DefaultProgressEvery (1 s) while lines finish,
//     so request_counts move while a batch runs; at most one per second
//     the batch ran, plus one;
//   - the lines' log events, published for spend (docs/spend.md): the
//     emitter group-commits them (the lines finishing while a publish is
//     in flight go in the next one, up to logevent.MaxEventsPerMessage
//     an SNS message), so one SNS PublishBatch per ten lines at most.
func timedBatchWrites(ran time.Duration) map[string][2]int {
	return map[string][2]int{
		"DynamoDB TransactWriteItems": {5, 5 + int(ran/time.Second) + 1},
		"SNS PublishBatch":            {1, 1000 / 10},
	}
}

// TestAWSOperationsOfABatch counts the AWS operations of a 1,000-line
// embeddings batch run by the batch worker against moto_server.
func TestAWSOperationsOfABatch(t *testing.T) {
	ops, backend, up := countedAWS(t)
	conf := "model_list:\n" +
		"  - model_name: text-embedding-3-small\n    litellm_params: {model: openai/text-embedding-3-small, api_base: " + up.URL + "/v1, api_key: sk-up}\n"
	g := gatewaytest.Start(t, backend,
		gatewaytest.Options{Config: conf, Jobs: []string{"batch-worker"}})
	_, key := g.TeamKey()
	var input strings.Builder
	for i := range 1000 {
		fmt.Fprintf(&input, `{"custom_id":"r-%d","method":"POST","url":"/v1/embeddings","body":{"model":"text-embedding-3-small","input":"line %d"}}`+"\n", i, i)
	}
	settle(ops)
	ops.Reset()
	file := uploadFile(t, g, key, input.String())
	r := g.Do("POST", "/v1/batches", key, map[string]any{"input_file_id": file, "endpoint": "/v1/embeddings", "completion_window": "24h"})
	if r.Status != 200 {
		t.Fatalf("create: %d %s", r.Status, r.Body)
	}
	id := r.JSON(t)["id"].(string)
	created := time.Now()
	deadline := time.Now().Add(2 * time.Minute)
	for {
		time.Sleep(time.Second)
		got := g.Do("GET", "/v1/batches/"+id, key, nil).JSON(t)
		if got["status"] == "completed" {
			break
		}
		if time.Now().After(deadline) || got["status"] == "failed" {
			t.Fatalf("batch %v", got)
		}
	}
	ran := time.Since(created)
	settle(ops)
	t.Logf("1,000-line batch (ran %v):\n%s", ran.Round(time.Millisecond), ops)
	writes := map[string]int{}
	for op, n := range ops.Counts() {
		if awstest.IsWrite(op) {
			writes[op] = n
		}
	}
	for op, bounds := range timedBatchWrites(ran) {
		n := writes[op]
		if n < bounds[0] || n > bounds[1] {
			t.Errorf("%d %s for a 1,000-line batch that ran %v: want %d to %d", n, op, ran, bounds[0], bounds[1])
		}
		delete(writes, op)
	}
	if diff := cmp.Diff(wantBatchWrites, writes, cmpopts.EquateEmpty()); diff != "" {
		t.Errorf("AWS writes of a 1,000-line batch (-want +got):\n%s\nUpdate wantBatchWrites and the cost table in docs/deploy-aws.md together.", diff)
	}
}

// uploadFile uploads content as a batch input file (multipart, as the
// OpenAI clients send it) and returns its id.
func uploadFile(t *testing.T, g *gatewaytest.Gateway, key, content string) string {
	t.Helper()
	var body bytes.Buffer
	mw := multipart.NewWriter(&body)
	mw.WriteField("purpose", "batch")
	fw, _ := mw.CreateFormFile("file", "input.jsonl")
	io.WriteString(fw, content)
	mw.Close()
	r := g.Do("POST", "/v1/files", key, body.Bytes(), "Content-Type", mw.FormDataContentType())
	if r.Status != 200 {
		t.Fatalf("upload: %d %s", r.Status, r.Body)
	}
	return r.JSON(t)["id"].(string)
}

// callbackEvents is how many log events TestAWSOperationsOfCallbackEvents
// publishes and delivers, from callbackCallers calls at a time: the
// emitter group-commits the events of concurrent calls into bus messages,
// and spend counts a message under one dedupe record. (moto_server copies
// the table once per item of a transaction — its rollback copy — so a
// dedupe record per event, one call at a time, made 1,000 events take
// minutes under -race; DynamoDB's transactions do not grow with the
// table.) In Lambda each call publishes its own message: the cost table
// prices that, from TestAWSOperationsPerRequestKind.
const (
	callbackEvents  = 1000
	callbackCallers = 20
)

// maxCallbackOperations bound the AWS operations of delivering
// callbackEvents log events to a logging callback, at most one of each per
// event: the calls' publishes, the delivery worker's receives and acks,
// and spend's count (pkg/spend: one transaction per flush, holding its
// events' dedupe records and the counters they add to; a flush holds the
// events of the messages delivered together). How many events share a
// publish, a receive or a flush depends on timing in one process (the
// emitter's and the counter's group commits; in Lambda each call publishes
// its own), so the counts are bounded and the kinds matched. No S3.
var maxCallbackOperations = map[string]int{
	"SNS PublishBatch":            callbackEvents,
	"SQS ReceiveMessage":          callbackEvents,
	"SQS DeleteMessage":           callbackEvents,
	"DynamoDB TransactWriteItems": callbackEvents,
}

// TestAWSOperationsOfCallbackEvents counts the AWS operations of
// callbackEvents log events published by as many embeddings calls and delivered to Langfuse by
// the delivery worker, against moto_server.
func TestAWSOperationsOfCallbackEvents(t *testing.T) {
	ops, backend, up := countedAWS(t)
	var mu sync.Mutex
	delivered := 0
	langfuse := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var batch struct {
			Batch []struct {
				Type string `json:"type"`
			} `json:"batch"`
		}
		if err := json.NewDecoder(r.Body).Decode(&batch); err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		mu.Lock()
		for _, it := range batch.Batch {
			if it.Type == "trace-create" { // one per log event
				delivered++
			}
		}
		mu.Unlock()
		w.WriteHeader(http.StatusMultiStatus)
		io.WriteString(w, `{"successes":[],"errors":[]}`)
	}))
	t.Cleanup(langfuse.Close)
	conf := "model_list:\n" +
		"  - model_name: text-embedding-3-small\n    litellm_params: {model: openai/text-embedding-3-small, api_base: " + up.URL + "/v1, api_key: sk-up}\n" +
		"litellm_settings:\n  callbacks: [langfuse]\n" +
		"environment_variables: {LANGFUSE_PUBLIC_KEY: pk-lf, LANGFUSE_SECRET_KEY: sk-lf, LANGFUSE_HOST: '" + langfuse.URL + "'}\n" +
		"callback_settings:\n  allow_hosts: [\"127.0.0.1\"]\n"
	g := gatewaytest.Start(t, backend,
		gatewaytest.Options{Config: conf, Jobs: []string{"callback-delivery"}})
	_, key := g.TeamKey()
	if r := g.Do("POST", "/v1/embeddings", key, `{"model":"text-embedding-3-small","input":"warm"}`); r.Status != 200 {
		t.Fatalf("warm-up: %d %s", r.Status, r.Body)
	}
	settle(ops)
	mu.Lock()
	delivered = 0
	mu.Unlock()
	ops.Reset()
	began := time.Now()
	var calls sync.WaitGroup
	next := make(chan int)
	for range callbackCallers {
		calls.Go(func() {
			for i := range next {
				if r := g.Do("POST", "/v1/embeddings", key, fmt.Sprintf(`{"model":"text-embedding-3-small","input":"call %d"}`, i)); r.Status != 200 {
					t.Errorf("call %d: %d %s", i, r.Status, r.Body)
				}
			}
		})
	}
	for i := range callbackEvents {
		next <- i
	}
	close(next)
	calls.Wait()
	if t.Failed() {
		t.FailNow()
	}
	started := time.Now()
	deadline := time.Now().Add(2 * time.Minute)
	for {
		mu.Lock()
		n := delivered
		mu.Unlock()
		if n >= callbackEvents {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d of %d events delivered; operations so far:\n%s", n, callbackEvents, ops)
		}
		time.Sleep(100 * time.Millisecond)
	}
	settle(ops)
	t.Logf("%d callback events (%d calls at a time), delivered %v after the last call:\n%s", callbackEvents, callbackCallers, time.Since(started).Round(time.Millisecond), ops)
	// Spend's count writes a dedupe record a bus message (an SNS
	// PublishBatch holds at most 10), not one an event, and per transaction
	// the counters the events touch (5 here: the key's, team's and model's
	// day rows, the key's and team's budget periods): 2 WCU each, as
	// transactional writes.
	counts := ops.Counts()
	most := 2 * (10*counts["SNS PublishBatch"] + 5*counts["DynamoDB TransactWriteItems"])
	if wcu, _ := ops.Capacity(); wcu > most {
		t.Errorf("%d callback events cost %d DynamoDB WCU, want at most %d: a dedupe record a message, not an event", callbackEvents, wcu, most)
	}
	// The caches' refreshes, per process and TTL, not per event: the
	// callbacks catalog (a Query) and the key and its team (a GetItem each).
	refreshes := 1 + int(time.Since(began)/config.DefaultCallbackCacheTTL)
	limits := maps.Clone(maxCallbackOperations)
	limits["DynamoDB Query"] = refreshes
	limits["DynamoDB GetItem"] = 2 * refreshes
	for op, n := range counts {
		if limit, ok := limits[op]; !ok || n > limit {
			t.Errorf("%d callback events made %d %s (at most %d expected): update maxCallbackOperations and the cost table in docs/deploy-aws.md together", callbackEvents, n, op, limit)
		}
	}
}
