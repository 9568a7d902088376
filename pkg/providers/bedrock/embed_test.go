package bedrock_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"reflect"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sluice-gateway/sluice/pkg/api"
	"github.com/sluice-gateway/sluice/pkg/config"
	"github.com/sluice-gateway/sluice/pkg/models"
	"github.com/sluice-gateway/sluice/pkg/oai"
	"github.com/sluice-gateway/sluice/pkg/providers"
	"github.com/sluice-gateway/sluice/pkg/providers/bedrock"
	"github.com/sluice-gateway/sluice/pkg/providers/bedrock/bedrocktest"
	"github.com/sluice-gateway/sluice/pkg/providers/embedbatch"
	"github.com/sluice-gateway/sluice/pkg/providers/embedbatch/embedtest"
)

const (
	testKeyID  = "AKIDEMBEDTEST"
	testSecret = "embed-test-secret"
	testToken  = "embed-session-token"
)

// bedrockCall is what the fake received.
type bedrockCall struct {
	Method, EscapedPath string
	Body                map[string]any
	Region, Service     string
}

// fakeBedrock speaks InvokeModel for Titan Text Embeddings and Cohere Embed.
// It recomputes every call's SigV4 signature and fails the test on a
// mismatch.
type fakeBedrock struct {
	*httptest.Server
	t *testing.T

	mu        sync.Mutex // guards behaviour and calls
	behaviour behaviour
	calls     []bedrockCall
	inFlight  embedtest.InFlight
}

// behaviour is how the fake answers; tests change it between calls.
type behaviour struct {
	delay time.Duration
	// titanTokens: "body" (inputTextTokenCount), "header", or "none".
	titanTokens string
	// cohereShape: "by_type" (the answer to embedding_types) or "floats".
	cohereShape string
	// fail, when set, answers instead of the model.
	fail func(call bedrockCall) (status int, errType, message string)
}

func newFakeBedrock(t *testing.T) *fakeBedrock {
	f := &fakeBedrock{t: t, behaviour: behaviour{titanTokens: "body", cohereShape: "by_type"}}
	f.Server = httptest.NewServer(http.HandlerFunc(f.serve))
	t.Cleanup(f.Close)
	return f
}

func (f *fakeBedrock) set(change func(b *behaviour)) {
	f.mu.Lock()
	defer f.mu.Unlock()
	change(&f.behaviour)
}

func (f *fakeBedrock) serve(w http.ResponseWriter, r *http.Request) {
	defer f.inFlight.Enter()()
	raw, _ := io.ReadAll(r.Body)
	sig, err := bedrocktest.Verify(r, raw, func(id string) (string, string, bool) {
		switch id {
		case testKeyID:
			return testSecret, "", true
		case testKeyID + "S":
			return testSecret, testToken, true
		}
		return "", "", false
	})
	if err != nil {
		f.t.Errorf("bedrock: %s %s: %v", r.Method, r.URL.EscapedPath(), err)
		w.WriteHeader(http.StatusForbidden)
		io.WriteString(w, `{"message":"The request signature we calculated does not match the signature you provided."}`)
		return
	}
	call := bedrockCall{Method: r.Method, EscapedPath: r.URL.EscapedPath(), Region: sig.Region, Service: sig.Service}
	if err := json.Unmarshal(raw, &call.Body); err != nil {
		f.t.Errorf("bedrock: body is not JSON: %s", raw)
	}
	if ct := r.Header.Get("Content-Type"); ct != "application/json" {
		f.t.Errorf("bedrock: Content-Type %q", ct)
	}
	f.mu.Lock()
	f.calls = append(f.calls, call)
	b := f.behaviour
	f.mu.Unlock()
	if b.delay > 0 {
		time.Sleep(b.delay)
	}
	if b.fail != nil {
		if status, typ, msg := b.fail(call); status != 0 {
			w.Header().Set("Content-Type", "application/json")
			w.Header().Set("X-Amzn-Errortype", typ+":http://internal.amazon.com/coral/com.amazon.bedrock/")
			w.WriteHeader(status)
			fmt.Fprintf(w, `{"message":%q}`, msg)
			return
		}
	}
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("X-Amzn-Requestid", "3f1c9c3e-0000-4000-8000-000000000000")
	if _, titan := call.Body["inputText"]; titan {
		text, _ := call.Body["inputText"].(string)
		dims := 1024
		if strings.Contains(call.EscapedPath, "v1") {
			dims = 1536
		}
		if d, ok := call.Body["dimensions"].(float64); ok {
			dims = int(d)
		}
		vec := embedtest.AppendFloats(nil, embedtest.Vector(text, dims))
		out := []byte(`{"embedding":`)
		out = append(out, vec...)
		tokens := len(strings.Fields(text)) + 1
		if b.titanTokens == "body" {
			out = fmt.Appendf(out, `,"inputTextTokenCount":%d`, tokens)
		}
		if b.titanTokens == "header" {
			w.Header().Set(bedrock.InputTokenHeader, strconv.Itoa(tokens))
		}
		out = append(out, `,"embeddingsByType":{"float":`...)
		out = append(out, vec...)
		out = append(out, "}}"...)
		w.Write(out)
		return
	}
	texts, _ := call.Body["texts"].([]any)
	dims := 16 // Cohere v3 answers 1024; a small size keeps the fake cheap

	if d, ok := call.Body["output_dimension"].(float64); ok {
		dims = int(d)
	}
	var list []byte
	list = append(list, '[')
	for i, t := range texts {
		if i > 0 {
			list = append(list, ',')
		}
		list = embedtest.AppendFloats(list, embedtest.Vector(t.(string), dims))
	}
	list = append(list, ']')
	w.Header().Set(bedrock.InputTokenHeader, strconv.Itoa(3*len(texts)))
	if b.cohereShape == "floats" {
		fmt.Fprintf(w, `{"id":"emb-1","embeddings":%s,"response_type":"embeddings_floats","texts":[]}`, list)
		return
	}
	fmt.Fprintf(w, `{"id":"emb-1","embeddings":{"float":%s},"response_type":"embeddings_by_type","texts":[]}`, list)
}

func (f *fakeBedrock) received() []bedrockCall {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]bedrockCall(nil), f.calls...)
}

func (f *fakeBedrock) reset() {
	f.mu.Lock()
	f.calls = nil
	f.mu.Unlock()
	f.inFlight.Reset()
}

// deployment is a Bedrock deployment of model on the fake, with static keys.
func (f *fakeBedrock) deployment(model string, extra map[string]any) config.Deployment {
	return config.Deployment{ModelName: "emb", Params: config.Params{
		Model: "bedrock/" + model, APIBase: f.URL, AWSRegionName: "eu-west-1",
		AWSAccessKeyID: testKeyID, AWSSecretAccessKey: testSecret, Extra: extra,
	}}
}

func openEmbedder(t *testing.T, d config.Deployment) models.Embedder {
	t.Helper()
	return embedtest.Open(t, bedrock.NewProvider(providers.NewHTTPClient(), nil), d)
}

// checkVectors checks the answer holds texts' vectors, in order.
func checkVectors(t *testing.T, a embedtest.Answer, texts []string, dims int) {
	t.Helper()
	if len(a.Data) != len(texts) {
		t.Fatalf("%d embeddings for %d texts", len(a.Data), len(texts))
	}
	for i, d := range a.Data {
		if d.Index != i || !reflect.DeepEqual(embedtest.Decode(t, d.Embedding), embedtest.Vector(texts[i], dims)) {
			t.Fatalf("embedding %d (index %d) is not the vector of %q", i, d.Index, texts[i])
		}
	}
}

func inputs(n int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = fmt.Sprintf("chunk %d of the handbook", i)
	}
	return out
}

func body(model string, texts []string, extra string) string {
	in, _ := json.Marshal(texts)
	return fmt.Sprintf(`{"model":%q,"input":%s%s}`, model, in, extra)
}

func apiError(t *testing.T, err error, status int, param, msg string) {
	t.Helper()
	var ae *api.Error
	if !errors.As(err, &ae) || ae.Status != status || ae.Param != param || !strings.Contains(ae.Message, msg) {
		t.Errorf("error %v; want %d naming %q saying %q", err, status, param, msg)
	}
}

func TestTitanV2Translation(t *testing.T) {
	f := newFakeBedrock(t)
	e := openEmbedder(t, f.deployment("amazon.titan-embed-text-v2:0", nil))
	texts := inputs(5)
	a, ans, err := embedtest.Embed(t, e, body("emb", texts, `,"dimensions":256,"encoding_format":"base64","normalize":false`))
	if err != nil {
		t.Fatal(err)
	}
	checkVectors(t, a, texts, 256)
	if ans.Encoding != oai.EncodingBase64 || ans.UsageEstimated || a.Model != "amazon.titan-embed-text-v2:0" {
		t.Errorf("encoding %s estimated %v model %s", ans.Encoding, ans.UsageEstimated, a.Model)
	}
	if a.Data[0].Embedding[0] != '"' {
		t.Errorf("not base64: %.40s", a.Data[0].Embedding)
	}
	var want int64
	for _, s := range texts {
		want += int64(len(strings.Fields(s)) + 1)
	}
	if a.Usage.PromptTokens != want || a.Usage.TotalTokens != want {
		t.Errorf("usage %+v, want the sum of inputTextTokenCount %d", a.Usage, want)
	}
	calls := f.received()
	if len(calls) != 5 {
		t.Fatalf("%d calls, want one per input", len(calls))
	}
	seen := map[string]bool{}
	for _, c := range calls {
		if c.Method != "POST" || c.EscapedPath != "/model/amazon.titan-embed-text-v2%3A0/invoke" || c.Region != "eu-west-1" || c.Service != "bedrock" {
			t.Errorf("call %+v", c)
		}
		text, _ := c.Body["inputText"].(string)
		seen[text] = true
		wantBody := map[string]any{"inputText": text, "dimensions": float64(256), "normalize": false, "embeddingTypes": []any{"float"}}
		if !reflect.DeepEqual(c.Body, wantBody) {
			t.Errorf("body %v, want %v", c.Body, wantBody)
		}
	}
	if len(seen) != 5 {
		t.Errorf("inputs sent: %v", seen)
	}
}

// TestTitanFanOutIsConcurrent is the Titan performance target: 16 inputs
// against an upstream taking 100 ms per call finish within 2× one call (not
// 16×: the calls are never made one after another). Connections are warm,
// as in a running gateway; the best of three runs is judged (time and calls
// in flight), so a stall of the shared test machine does not fail it.
func TestTitanFanOutIsConcurrent(t *testing.T) {
	f := newFakeBedrock(t)
	const delay = 100 * time.Millisecond
	e := openEmbedder(t, f.deployment("amazon.titan-embed-text-v2:0", nil))
	texts := inputs(16)
	req := body("emb", texts, `,"dimensions":256,"encoding_format":"base64"`)
	if _, _, err := embedtest.Embed(t, e, req); err != nil { // warm the connection pool
		t.Fatal(err)
	}
	f.set(func(b *behaviour) { b.delay = delay })
	best, peak := time.Hour, 0
	for range 3 {
		f.inFlight.Reset()
		start := time.Now()
		a, _, err := embedtest.Embed(t, e, req)
		took := time.Since(start)
		if err != nil {
			t.Fatal(err)
		}
		checkVectors(t, a, texts, 256)
		best, peak = min(best, took), max(peak, f.inFlight.Peak())
		if best <= 2*delay && peak == 16 {
			break
		}
	}
	if peak != 16 {
		t.Errorf("peak %d calls in flight at best, want all 16 together", peak)
	}
	t.Logf("Titan, 16 inputs, upstream %v per call: %v wall (%.2f× one call; one after another would be 16×)",
		delay, best.Round(time.Millisecond), float64(best)/float64(delay))
	if best > 2*delay {
		t.Errorf("16 inputs took %v at best, more than 2× one call", best)
	}
}

func TestTitanV1(t *testing.T) {
	f := newFakeBedrock(t)
	e := openEmbedder(t, f.deployment("amazon.titan-embed-text-v1", nil))
	a, _, err := embedtest.Embed(t, e, body("emb", []string{"hello"}, ""))
	if err != nil {
		t.Fatal(err)
	}
	checkVectors(t, a, []string{"hello"}, 1536)
	if c := f.received(); len(c) != 1 || !reflect.DeepEqual(c[0].Body, map[string]any{"inputText": "hello"}) || c[0].EscapedPath != "/model/amazon.titan-embed-text-v1/invoke" {
		t.Errorf("calls %+v", c)
	}
	for _, tc := range []struct{ extra, param, msg string }{
		{`,"dimensions":512`, "dimensions", "does not take 'dimensions'"},
		{`,"normalize":true`, "normalize", "does not take 'normalize'"},
		{`,"input_type":"search_query"`, "input_type", "does not take 'input_type'"},
	} {
		_, _, err := embedtest.Embed(t, e, body("emb", []string{"x"}, tc.extra))
		apiError(t, err, 400, tc.param, tc.msg)
	}
	if len(f.received()) != 1 {
		t.Error("a refused request reached Bedrock")
	}
}

func TestTitanV2Refusals(t *testing.T) {
	f := newFakeBedrock(t)
	e := openEmbedder(t, f.deployment("amazon.titan-embed-text-v2:0", nil))
	for _, tc := range []struct{ body, param, msg string }{
		{body("emb", []string{"x"}, `,"dimensions":300`), "dimensions", "256, 512 or 1024"},
		{body("emb", []string{"x"}, `,"normalize":"yes"`), "normalize", "boolean"},
		{body("emb", []string{"x"}, `,"truncate":"END"`), "truncate", "does not take"},
		{`{"model":"emb","input":[[1,2],[3]]}`, "input", "text only"},
		{`{"model":"emb","input":[1,2,3]}`, "input", "text only"},
	} {
		_, _, err := embedtest.Embed(t, e, tc.body)
		apiError(t, err, 400, tc.param, tc.msg)
	}
	if len(f.received()) != 0 {
		t.Error("a refused request reached Bedrock")
	}
}

func TestTitanUsageSources(t *testing.T) {
	f := newFakeBedrock(t)
	e := openEmbedder(t, f.deployment("amazon.titan-embed-text-v2:0", map[string]any{"normalize": true}))
	texts := []string{"one two", "three"}
	f.set(func(b *behaviour) { b.titanTokens = "header" })
	a, ans, err := embedtest.Embed(t, e, body("emb", texts, ""))
	if err != nil || ans.UsageEstimated || a.Usage.PromptTokens != 3+2 {
		t.Errorf("header tokens: %+v estimated %v %v", a.Usage, ans != nil && ans.UsageEstimated, err)
	}
	if c := f.received(); c[0].Body["normalize"] != true {
		t.Errorf("the deployment's normalize was not sent: %v", c[0].Body)
	}
	f.set(func(b *behaviour) { b.titanTokens = "none" })
	a, ans, err = embedtest.Embed(t, e, body("emb", texts, ""))
	want := embedbatch.EstimateTokens(texts[0]) + embedbatch.EstimateTokens(texts[1])
	if err != nil || !ans.UsageEstimated || a.Usage.PromptTokens != want {
		t.Errorf("no tokens reported: %+v estimated %v %v; want %d estimated", a.Usage, ans != nil && ans.UsageEstimated, err, want)
	}
}

func TestCohereOnBedrock(t *testing.T) {
	f := newFakeBedrock(t)
	const delay = 50 * time.Millisecond
	f.set(func(b *behaviour) { b.delay = delay })
	e := openEmbedder(t, f.deployment("cohere.embed-english-v3", map[string]any{"truncate": "END"}))
	texts := inputs(200)
	start := time.Now()
	a, ans, err := embedtest.Embed(t, e, body("emb", texts, `,"input_type":"RETRIEVAL_QUERY"`))
	took := time.Since(start)
	if err != nil {
		t.Fatal(err)
	}
	checkVectors(t, a, texts, 16)
	if a.Usage.PromptTokens != 600 || ans.UsageEstimated {
		t.Errorf("usage %+v: want the token headers' sum", a.Usage)
	}
	calls := f.received()
	sizes := map[int]int{}
	for _, c := range calls {
		if c.EscapedPath != "/model/cohere.embed-english-v3/invoke" || c.Body["input_type"] != "search_query" ||
			c.Body["truncate"] != "END" || !reflect.DeepEqual(c.Body["embedding_types"], []any{"float"}) || c.Body["output_dimension"] != nil {
			t.Errorf("call %s %v", c.EscapedPath, c.Body)
		}
		sizes[len(c.Body["texts"].([]any))]++
	}
	if !reflect.DeepEqual(sizes, map[int]int{96: 2, 8: 1}) {
		t.Errorf("batch sizes %v, want 96, 96, 8", sizes)
	}
	if f.inFlight.Peak() != 3 {
		t.Errorf("3 batches: peak %d in flight (%v); want them concurrent", f.inFlight.Peak(), took)
	}

	// The default input type, the other answer shape, and dimensions.
	f.reset()
	f.set(func(b *behaviour) { b.cohereShape = "floats" })
	a, _, err = embedtest.Embed(t, e, body("emb", []string{"a", "b"}, ""))
	if err != nil {
		t.Fatal(err)
	}
	checkVectors(t, a, []string{"a", "b"}, 16)
	if c := f.received(); c[0].Body["input_type"] != "search_document" {
		t.Errorf("default input_type: %v", c[0].Body)
	}
	_, _, err = embedtest.Embed(t, e, body("emb", []string{"a"}, `,"dimensions":256`))
	apiError(t, err, 400, "dimensions", "does not take 'dimensions'")

	v4 := openEmbedder(t, f.deployment("us.cohere.embed-v4:0", map[string]any{"input_type": "classification"}))
	f.reset()
	a, _, err = embedtest.Embed(t, v4, body("emb", []string{"a"}, `,"dimensions":256`))
	if err != nil {
		t.Fatal(err)
	}
	checkVectors(t, a, []string{"a"}, 256)
	c := f.received()[0]
	if c.EscapedPath != "/model/us.cohere.embed-v4%3A0/invoke" || c.Body["output_dimension"] != float64(256) || c.Body["input_type"] != "classification" {
		t.Errorf("v4 call %s %v", c.EscapedPath, c.Body)
	}
}

func TestModelIDs(t *testing.T) {
	f := newFakeBedrock(t)
	arn := "arn:aws:bedrock:eu-west-1:123456789012:application-inference-profile/a1b2c3"
	e := openEmbedder(t, f.deployment("amazon.titan-embed-text-v2:0", map[string]any{"model_id": arn}))
	if _, _, err := embedtest.Embed(t, e, body("emb", []string{"x"}, "")); err != nil {
		t.Fatal(err)
	}
	// The ARN's ':' and '/' are encoded once on the wire, as the AWS SDK does.
	if c := f.received(); len(c) != 1 || c[0].EscapedPath != "/model/arn%3Aaws%3Abedrock%3Aeu-west-1%3A123456789012%3Aapplication-inference-profile%2Fa1b2c3/invoke" {
		t.Errorf("calls %+v", c)
	}
	unknown := openEmbedder(t, f.deployment("anthropic.claude-3-haiku-20240307-v1:0", nil))
	_, _, err := embedtest.Embed(t, unknown, body("emb", []string{"x"}, ""))
	apiError(t, err, 400, "model", "does not translate")
}

func TestSessionCredentials(t *testing.T) {
	f := newFakeBedrock(t)
	d := f.deployment("amazon.titan-embed-text-v2:0", nil)
	d.Params.AWSAccessKeyID, d.Params.AWSSessionToken = testKeyID+"S", testToken
	if _, _, err := embedtest.Embed(t, openEmbedder(t, d), body("emb", []string{"x"}, "")); err != nil {
		t.Fatal(err)
	}
}

func TestBedrockErrors(t *testing.T) {
	f := newFakeBedrock(t)
	e := openEmbedder(t, f.deployment("amazon.titan-embed-text-v2:0", nil))
	for _, tc := range []struct {
		status  int
		errType string
		msg     string
	}{
		{400, "ValidationException", "Malformed input request: expected maxLength: 50000, actual: 50001, please reformat your input and try again."},
		{403, "AccessDeniedException", "You don't have access to the model with the specified model ID."},
		{429, "ThrottlingException", "Too many requests, please wait before trying again."},
		{500, "InternalServerException", "Internal server error"},
	} {
		f.set(func(b *behaviour) {
			b.fail = func(c bedrockCall) (int, string, string) {
				if c.Body["inputText"] == "bad" {
					return tc.status, tc.errType, tc.msg
				}
				return 0, "", ""
			}
		})
		_, _, err := embedtest.Embed(t, e, body("emb", []string{"good", "bad", "good too"}, ""))
		var pe *models.ProviderError
		if !errors.As(err, &pe) || pe.Status != tc.status || pe.Message != tc.msg || pe.Provider != "bedrock" {
			t.Errorf("%d: %v", tc.status, err)
		}
	}
	f.set(func(b *behaviour) { b.fail = nil })

	// An answer sluice cannot read.
	bad := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		io.WriteString(w, `{"embedding":["not","numbers"],"inputTextTokenCount":2}`)
	}))
	defer bad.Close()
	d := f.deployment("amazon.titan-embed-text-v2:0", nil)
	d.Params.APIBase = bad.URL
	_, _, err := embedtest.Embed(t, openEmbedder(t, d), body("emb", []string{"x"}, ""))
	var pe *models.ProviderError
	if !errors.As(err, &pe) || !strings.Contains(pe.Message, "not a number") {
		t.Errorf("malformed answer: %v", err)
	}
}

func TestOpen(t *testing.T) {
	p := bedrock.NewProvider(http.DefaultClient, nil)
	d := config.Deployment{ModelName: "emb", Params: config.Params{Model: "bedrock/amazon.titan-embed-text-v2:0", AWSRegionName: "us-west-2"}}
	_, err := p.Open(context.Background(), d, embedtest.NoSecrets)
	apiError(t, err, 503, "", "no usable AWS credentials")
	if err != nil && strings.Contains(err.Error(), testSecret) {
		t.Error("the secret leaked")
	}

	getenv := env(map[string]string{"AWS_ACCESS_KEY_ID": "AKIDENV", "AWS_SECRET_ACCESS_KEY": "s", "AWS_REGION_NAME": "ap-south-1"})
	d.Params.AWSRegionName = ""
	for _, tc := range []struct {
		extra  map[string]any
		getenv func(string) string
		want   string
	}{
		{nil, getenv, "https://bedrock-runtime.ap-south-1.amazonaws.com"},
		{map[string]any{"aws_bedrock_runtime_endpoint": "https://vpce-1.bedrock-runtime.ap-south-1.vpce.amazonaws.com/"}, getenv, "https://vpce-1.bedrock-runtime.ap-south-1.vpce.amazonaws.com"},
		{nil, func(k string) string {
			if k == "AWS_BEDROCK_RUNTIME_ENDPOINT" {
				return "http://127.0.0.1:9"
			}
			return getenv(k)
		}, "http://127.0.0.1:9"},
	} {
		d.Params.Extra = tc.extra
		ep, err := bedrock.NewProvider(http.DefaultClient, nil).Open(context.Background(), d, models.Resolver{Getenv: tc.getenv})
		if err != nil || ep.APIBase() != tc.want {
			t.Errorf("%v: %v %v, want %s", tc.extra, ep, err, tc.want)
		}
	}
	d.Params.APIBase = "ftp://nope"
	_, err = bedrock.NewProvider(http.DefaultClient, nil).Open(context.Background(), d, models.Resolver{Getenv: getenv})
	apiError(t, err, 503, "", "http")
}
