package batches_test

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"

	"github.com/sluice-gateway/sluice/pkg/gateway/gatewaytest"
	"github.com/sluice-gateway/sluice/pkg/providers/bedrock/bedrocktest"
	"github.com/sluice-gateway/sluice/pkg/store"
)

const (
	bedrockKeyID  = "AKIDNATIVEBATCH"
	bedrockSecret = "native-batch-secret"
	bedrockRole   = "arn:aws:iam::123456789012:role/sluice-batch"
)

// bedrockJobs is a local server speaking Bedrock's batch-inference API on
// the control plane (CreateModelInvocationJob, GetModelInvocationJob,
// StopModelInvocationJob), every request's SigV4 signature verified. It
// reads a job's input from, and writes its output to, sluice's store as
// Bedrock does from and to S3: <output>/<job id>/input.jsonl.out and
// manifest.json.out.
type bedrockJobs struct {
	t     *testing.T
	srv   *httptest.Server
	blobs store.Blobs

	mu      sync.Mutex
	reqs    []string
	created map[string]any
	input   []map[string]json.RawMessage
	status  string
	sigErrs []error
}

const jobARN = "arn:aws:bedrock:us-east-1:123456789012:model-invocation-job/job0001"

func newBedrockJobs(t *testing.T) *bedrockJobs {
	j := &bedrockJobs{t: t}
	j.srv = httptest.NewServer(http.HandlerFunc(j.serve))
	t.Cleanup(j.srv.Close)
	return j
}

// s3Key is the store key of an s3:// URI.
func s3Key(uri string) string {
	rest := strings.TrimPrefix(uri, "s3://")
	_, key, _ := strings.Cut(rest, "/")
	return key
}

func (j *bedrockJobs) serve(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	j.mu.Lock()
	defer j.mu.Unlock()
	j.reqs = append(j.reqs, r.Method+" "+r.URL.Path)
	sig, err := bedrocktest.Verify(r, body, func(id string) (string, string, bool) { return bedrockSecret, "", id == bedrockKeyID })
	if err == nil && (sig.Service != "bedrock" || sig.Region != "us-east-1") {
		err = fmt.Errorf("signed for %s in %s", sig.Service, sig.Region)
	}
	if err != nil {
		j.sigErrs = append(j.sigErrs, err)
		w.Header().Set("X-Amzn-Errortype", "InvalidSignatureException")
		writeJSON(w, 403, map[string]any{"message": err.Error()})
		return
	}
	switch {
	case r.Method == "POST" && r.URL.Path == "/model-invocation-job":
		json.Unmarshal(body, &j.created)
		in := j.created["inputDataConfig"].(map[string]any)["s3InputDataConfig"].(map[string]any)["s3Uri"].(string)
		rc, err := j.blobs.Get(context.Background(), s3Key(in), 0, -1)
		if err != nil {
			w.Header().Set("X-Amzn-Errortype", "ValidationException")
			writeJSON(w, 400, map[string]any{"message": "cannot read " + in})
			return
		}
		sc := bufio.NewScanner(rc)
		sc.Buffer(nil, 1<<20)
		j.input = nil
		for sc.Scan() {
			var rec map[string]json.RawMessage
			json.Unmarshal(sc.Bytes(), &rec)
			j.input = append(j.input, rec)
		}
		rc.Close()
		j.status = "Submitted"
		writeJSON(w, 200, map[string]any{"jobArn": jobARN})
	case r.Method == "GET" && r.URL.Path == "/model-invocation-job/"+jobARN:
		out := map[string]any{"jobArn": jobARN, "status": j.status, "submitTime": "2025-01-02T03:04:05Z", "lastModifiedTime": "2025-01-02T03:05:05Z",
			"totalRecordCount": len(j.input)}
		if j.status == "Completed" || j.status == "Stopped" {
			out["endTime"] = "2025-01-02T04:00:00Z"
			out["successRecordCount"], out["errorRecordCount"] = len(j.input)-1, 1
		}
		writeJSON(w, 200, out)
	case r.Method == "POST" && r.URL.Path == "/model-invocation-job/"+jobARN+"/stop":
		j.status = "Stopping"
		writeJSON(w, 200, map[string]any{})
	default:
		w.Header().Set("X-Amzn-Errortype", "ResourceNotFoundException")
		writeJSON(w, 404, map[string]any{"message": "no route " + r.Method + " " + r.URL.Path})
	}
}

// finish ends the job (Completed or Stopped) and writes its output: each
// record answered (a Converse answer, or a Titan vector), the record
// "fail" an error.
func (j *bedrockJobs) finish(status string) {
	j.mu.Lock()
	defer j.mu.Unlock()
	var out strings.Builder
	for _, rec := range j.input {
		var id string
		json.Unmarshal(rec["recordId"], &id)
		fmt.Fprintf(&out, `{"recordId":%q,"modelInput":%s,`, id, rec["modelInput"])
		switch {
		case id == "fail":
			out.WriteString(`"error":{"errorCode":400,"errorMessage":"Malformed input request"}}` + "\n")
		case strings.Contains(string(rec["modelInput"]), "inputText"):
			out.WriteString(`"modelOutput":{"embedding":[0.5,-0.25],"inputTextTokenCount":4}}` + "\n")
		default:
			fmt.Fprintf(&out, `"modelOutput":{"output":{"message":{"role":"assistant","content":[{"text":"answer %s"}]}},"stopReason":"end_turn","usage":{"inputTokens":3,"outputTokens":2,"totalTokens":5}}}`+"\n", id)
		}
	}
	prefix := s3Key(j.created["outputDataConfig"].(map[string]any)["s3OutputDataConfig"].(map[string]any)["s3Uri"].(string))
	ctx := context.Background()
	if _, err := j.blobs.Put(ctx, prefix+"job0001/input.jsonl.out", strings.NewReader(out.String())); err != nil {
		j.t.Fatal(err)
	}
	j.blobs.Put(ctx, prefix+"job0001/manifest.json.out", strings.NewReader(fmt.Sprintf(`{"totalRecordCount":%d,"processedRecordCount":%d,"successRecordCount":%d,"errorRecordCount":1}`, len(j.input), len(j.input), len(j.input)-1)))
	j.status = status
}

// s3Blobs gives the local backend's store the s3:// URIs the AWS backend's
// has, so that the same job runs on both.
type s3Blobs struct{ store.Blobs }

func (b s3Blobs) S3URI(key string) (string, bool) { return "s3://sluice-local-test/" + key, true }

func bedrockConfig() string {
	p := "aws_region_name: us-east-1, aws_access_key_id: " + bedrockKeyID + ", aws_secret_access_key: os.environ/BEDROCK_SECRET, aws_batch_role_arn: " + bedrockRole
	return `model_list:
  - model_name: claude-batch
    litellm_params: {model: bedrock/anthropic.claude-3-haiku-20240307-v1:0, ` + p + `}
  - model_name: titan-batch
    litellm_params: {model: bedrock/amazon.titan-embed-text-v2:0, ` + p + `}
`
}

// A Bedrock round trip on both backends, with the official Go client:
// chat lines become Converse records and embedding lines Titan records
// under the batch's prefix of sluice's bucket; the job is created signed,
// with the role, the S3 locations and the invocation type; its output is
// turned back into OpenAI lines (chat.completion, embeddings list) and
// errors. A stop is forwarded.
func TestNativeBedrock(t *testing.T) {
	for _, b := range gatewaytest.Backends() {
		t.Run(b.Name, func(t *testing.T) {
			jobs := newBedrockJobs(t)
			clk := &clock{}
			g := gatewaytest.Start(t, b, gatewaytest.Options{
				Config: bedrockConfig(), Now: clk.now,
				Env: map[string]string{"BEDROCK_SECRET": bedrockSecret, "AWS_ENDPOINT_URL_BEDROCK": jobs.srv.URL},
				Backend: func(be *store.Backend) {
					if _, ok := be.Blobs.(interface{ S3URI(string) (string, bool) }); !ok {
						be.Blobs = s3Blobs{be.Blobs}
					}
				},
			})
			jobs.blobs = g.Backend.Blobs
			_, key := g.TeamKey()
			r := &bedrockRun{t: t, ctx: context.Background(), g: g, jobs: jobs, clk: clk, key: key, c: client(g, key),
				bedrock: option.WithHeader("Custom-Llm-Provider", "bedrock")}
			r.refusesTwoTexts()
			r.chat()
			r.embeddingsThenStop()
		})
	}
}

// bedrockRun is what TestNativeBedrock's steps share on one backend.
type bedrockRun struct {
	t       *testing.T
	ctx     context.Context
	g       *gatewaytest.Gateway
	jobs    *bedrockJobs
	clk     *clock
	key     string
	c       openai.Client
	bedrock option.RequestOption // routes a batch to Bedrock's batch inference
}

// refusesTwoTexts: a line Bedrock cannot take: a 400 naming it, and no job.
func (r *bedrockRun) refusesTwoTexts() {
	t, g, ctx, c, key, bedrock, jobs := r.t, r.g, r.ctx, r.c, r.key, r.bedrock, r.jobs
	twoTexts := []line{{CustomID: "t", Method: "POST", URL: "/v1/embeddings", Body: map[string]any{"model": "titan-batch", "input": []string{"a", "b"}}}}
	_, err := c.Batches.New(ctx, openai.BatchNewParams{InputFileID: uploadInput(t, g, key, jsonl(twoTexts)), Endpoint: openai.BatchNewParamsEndpointV1Embeddings,
		CompletionWindow: openai.BatchNewParamsCompletionWindow24h}, bedrock)
	var apiErr *openai.Error
	if !errors.As(err, &apiErr) || apiErr.StatusCode != 400 || apiErr.Param != "line 1" || !strings.Contains(apiErr.Message, "one text") {
		t.Fatalf("%v", err)
	}
	if jobs.created != nil {
		t.Fatalf("a job was created: %v", jobs.created)
	}
}

// chat: a chat batch's job is created with the role, the S3 locations and
// the Converse invocation type; its output comes back as chat.completion
// lines and errors, and the job's objects are removed.
func (r *bedrockRun) chat() {
	t, g, ctx, c, key, bedrock, jobs, clk := r.t, r.g, r.ctx, r.c, r.key, r.bedrock, r.jobs, r.clk
	file := uploadInput(t, g, key, jsonl(nativeChatLines("claude-batch", "a", "b", "fail")))
	created, err := c.Batches.New(ctx, openai.BatchNewParams{InputFileID: file, Endpoint: openai.BatchNewParamsEndpointV1ChatCompletions,
		CompletionWindow: openai.BatchNewParamsCompletionWindow24h}, bedrock)
	if err != nil {
		t.Fatal(err)
	}
	jobs.mu.Lock()
	cr := jobs.created
	input := jobs.input
	errs := jobs.sigErrs
	jobs.mu.Unlock()
	if len(errs) > 0 {
		t.Fatalf("signatures: %v", errs)
	}
	prefix := "batches/" + created.ID + "/bedrock/"
	inURI, _ := g.Backend.Blobs.(interface{ S3URI(string) (string, bool) }).S3URI(prefix + "input.jsonl")
	outURI, _ := g.Backend.Blobs.(interface{ S3URI(string) (string, bool) }).S3URI(prefix + "output/")
	want := map[string]any{
		"jobName": "sluice-" + strings.ReplaceAll(created.ID, "_", "-"), "clientRequestToken": created.ID, "roleArn": bedrockRole,
		"modelId": "anthropic.claude-3-haiku-20240307-v1:0", "modelInvocationType": "Converse", "timeoutDurationInHours": float64(24),
		"inputDataConfig":  map[string]any{"s3InputDataConfig": map[string]any{"s3Uri": inURI, "s3InputFormat": "JSONL"}},
		"outputDataConfig": map[string]any{"s3OutputDataConfig": map[string]any{"s3Uri": outURI}},
		"tags":             []any{map[string]any{"key": "sluice_batch_id", "value": created.ID}},
	}
	if diff := cmp.Diff(want, cr); diff != "" {
		t.Errorf("CreateModelInvocationJob (-want +got):\n%s", diff)
	}
	if len(input) != 3 || string(input[0]["recordId"]) != `"a"` ||
		string(input[0]["modelInput"]) != `{"messages":[{"role":"user","content":[{"text":"hi a"}]}]}` {
		t.Errorf("records: %s", mustJSON(input))
	}
	if created.Status != openai.BatchStatusValidating {
		t.Errorf("%s", created.RawJSON())
	}

	jobs.finish("Completed")
	clk.advance(10 * time.Second)
	got, err := c.Batches.Get(ctx, created.ID)
	if err != nil || got.Status != openai.BatchStatusCompleted || got.RequestCounts.Total != 3 || got.RequestCounts.Completed != 2 ||
		got.RequestCounts.Failed != 1 || got.Usage.TotalTokens != 10 {
		t.Fatalf("%s %v", got.RawJSON(), err)
	}
	for _, l := range readLines(t, c, got.OutputFileID) {
		raw, _ := json.Marshal(l["response"].(map[string]any)["body"])
		var cc openai.ChatCompletion
		if err := json.Unmarshal(raw, &cc); err != nil || cc.Choices[0].Message.Content != "answer "+l["custom_id"].(string) || cc.Usage.TotalTokens != 5 {
			t.Errorf("%s: %v", raw, err)
		}
	}
	for _, k := range []string{prefix + "input.jsonl", prefix + "output/job0001/input.jsonl.out", prefix + "output/job0001/manifest.json.out"} {
		if _, err := g.Backend.Blobs.Size(ctx, k); !errors.Is(err, store.ErrNotFound) {
			t.Errorf("%s left behind: %v", k, err)
		}
	}
	if e := readLines(t, c, got.ErrorFileID); len(e) != 1 || e[0]["custom_id"] != "fail" || e[0]["error"].(map[string]any)["code"] != "400" {
		t.Errorf("errors: %v", e)
	}
}

// embeddingsThenStop: an embeddings batch's job uses InvokeModel; a cancel
// stops the job and the lines done come back as embeddings lists.
func (r *bedrockRun) embeddingsThenStop() {
	t, g, ctx, c, key, bedrock, jobs, clk := r.t, r.g, r.ctx, r.c, r.key, r.bedrock, r.jobs, r.clk
	lines := []line{
		{CustomID: "e1", Method: "POST", URL: "/v1/embeddings", Body: map[string]any{"model": "titan-batch", "input": "first"}},
		{CustomID: "e2", Method: "POST", URL: "/v1/embeddings", Body: map[string]any{"model": "amazon.titan-embed-text-v2:0", "input": "second", "dimensions": 256}},
	}
	created, err := c.Batches.New(ctx, openai.BatchNewParams{InputFileID: uploadInput(t, g, key, jsonl(lines)), Endpoint: openai.BatchNewParamsEndpointV1Embeddings,
		CompletionWindow: openai.BatchNewParamsCompletionWindow24h}, bedrock)
	if err != nil {
		t.Fatal(err)
	}
	jobs.mu.Lock()
	input, typ := jobs.input, jobs.created["modelInvocationType"]
	jobs.mu.Unlock()
	if typ != "InvokeModel" || string(input[1]["modelInput"]) != `{"inputText":"second","dimensions":256,"embeddingTypes":["float"]}` {
		t.Errorf("%v %s", typ, mustJSON(input))
	}
	if got, err := c.Batches.Cancel(ctx, created.ID); err != nil || got.Status != openai.BatchStatusCancelling {
		t.Fatalf("%v %v", got, err)
	}
	jobs.finish("Stopped")
	clk.advance(10 * time.Second)
	got, err := c.Batches.Get(ctx, created.ID)
	if err != nil || got.Status != openai.BatchStatusCancelled {
		t.Fatalf("%s %v", got.RawJSON(), err)
	}
	out := readLines(t, c, got.OutputFileID)
	if len(out) != 2 {
		t.Fatalf("%v", out)
	}
	raw, _ := json.Marshal(out[0]["response"].(map[string]any)["body"])
	var emb openai.CreateEmbeddingResponse
	if err := json.Unmarshal(raw, &emb); err != nil || len(emb.Data) != 1 || !cmp.Equal(emb.Data[0].Embedding, []float64{0.5, -0.25}) || emb.Usage.PromptTokens != 4 {
		t.Errorf("%s %v", raw, err)
	}
	jobs.mu.Lock()
	defer jobs.mu.Unlock()
	if len(jobs.sigErrs) > 0 {
		t.Errorf("signatures: %v", jobs.sigErrs)
	}
	if !strings.Contains(strings.Join(jobs.reqs, "\n"), "POST /model-invocation-job/"+jobARN+"/stop") {
		t.Errorf("no stop: %v", jobs.reqs)
	}
}

func mustJSON(v any) string {
	b, _ := json.Marshal(v)
	return string(b)
}
