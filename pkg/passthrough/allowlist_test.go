package passthrough

import (
	"bytes"
	"compress/gzip"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/sluice-gateway/sluice/pkg/api"
	"github.com/sluice-gateway/sluice/pkg/providers/google/googletest"
)

// allowListHarness serves all four prefixes from one upstream, with model_list
// names for one model of each provider, and acts as a key limited to them.
func allowListHarness(t *testing.T) (*harness, *upstreamRecorder) {
	t.Helper()
	tokens := googletest.NewTokenServer(t)
	up := newUpstream(t, nil)
	cfg := allPrefixes(up.srv.URL) +
		"  vertex_ai: {api_base: " + up.srv.URL + ", vertex_credentials: os.environ/SA, vertex_location: us-central1}\n" +
		"model_list:\n" +
		"  - model_name: fast\n    litellm_params: {model: gemini/gemini-2.5-flash}\n" +
		"  - model_name: sonnet\n    litellm_params: {model: anthropic/claude-sonnet-4-5}\n" +
		"  - model_name: vflash\n    litellm_params: {model: vertex_ai/gemini-2.0-flash-001}\n" +
		"  - model_name: oss\n    litellm_params: {model: bedrock/openai.gpt-oss-20b-1:0}\n"
	h := newHarness(t, cfg, map[string]string{"SA": tokens.ServiceAccountJSON("sa-project")}, nil)
	p := teamPrincipal("fast", "sonnet", "vflash", "oss")
	h.principal.Store(&p)
	h.own(t, Gemini, "batches/b1", p.TeamID)
	h.own(t, Anthropic, "batches/msgbatch_1", p.TeamID)
	return h, up
}

func gzipped(s string) string {
	var b bytes.Buffer
	zw := gzip.NewWriter(&b)
	zw.Write([]byte(s))
	zw.Close()
	return b.String()
}

const vertexLoc = "/vertex-ai/v1/projects/p/locations/us-central1"

// restrictedCase is one call of TestRestrictedKeysAreCheckedWhereTheProviderReadsTheModel
// and the answer it gets (code: the error's, when status is not 200).
type restrictedCase struct {
	name, method, path, contentType, body string
	headers                               []string
	status                                int
	code                                  string
}

// appJSON is most calls' content type.
const appJSON = "application/json"

// restrictedCases are the calls of a key limited to allowListHarness's
// deployments (gemini-2.5-flash, claude-sonnet-4-5, gemini-2.0-flash-001,
// openai.gpt-oss-20b-1:0), by provider.
var restrictedCases = []restrictedCase{
	// Gemini's OpenAI-compatible API and context caches carry the model in the body.
	{"gemini openai allowed", "POST", "/gemini/v1beta/openai/chat/completions", appJSON, `{"model":"gemini-2.5-flash","messages":[]}`, nil, 200, ""},
	{"gemini openai resource name", "POST", "/gemini/v1beta/openai/chat/completions", appJSON, `{"model":"models/gemini-2.5-flash","messages":[]}`, nil, 200, ""},
	{"gemini openai forbidden", "POST", "/gemini/v1beta/openai/chat/completions", appJSON, `{"model":"gemini-2.5-pro","messages":[]}`, nil, 403, "permission_denied"},
	{"gemini openai embeddings forbidden", "POST", "/gemini/v1beta/openai/embeddings", appJSON, `{"model":"text-embedding-004","input":"x"}`, nil, 403, "permission_denied"},
	{"gemini openai tuned model", "POST", "/gemini/v1beta/openai/chat/completions", appJSON, `{"model":"tunedModels/gemini-2.5-flash","messages":[]}`, nil, 403, "permission_denied"},
	{"gemini openai no model", "POST", "/gemini/v1beta/openai/chat/completions", appJSON, `{"messages":[]}`, nil, 403, "permission_denied"},
	{"gemini openai model twice", "POST", "/gemini/v1beta/openai/chat/completions", appJSON, `{"model":"gemini-2.5-flash","model":"gemini-2.5-pro"}`, nil, 400, "invalid_value"},
	{"gemini cache allowed", "POST", "/gemini/v1beta/cachedContents", appJSON, `{"model":"models/gemini-2.5-flash","contents":[]}`, nil, 200, ""},
	{"gemini cache forbidden", "POST", "/gemini/v1beta/cachedContents", appJSON, `{"model":"models/gemini-2.5-pro","contents":[]}`, nil, 403, "permission_denied"},
	{"gemini tuned model", "POST", "/gemini/v1beta/tunedModels/my-tune:generateContent", appJSON, `{"contents":[]}`, nil, 403, "permission_denied"},
	{"gemini path allowed", "POST", "/gemini/v1beta/models/gemini-2.5-flash:generateContent", appJSON, `{"contents":[]}`, nil, 200, ""},
	{"gemini method override", "POST", "/gemini/v1beta/models/gemini-2.5-flash:generateContent", appJSON, `{}`, []string{"X-HTTP-Method-Override", "GET"}, 400, "invalid_value"},
	{"gemini file upload", "POST", "/gemini/upload/v1beta/files", "application/octet-stream", "bytes", nil, 200, ""},
	{"gemini list", "GET", "/gemini/v1beta/models", "", "", nil, 200, ""},
	{"gemini batch cancel", "POST", "/gemini/v1beta/batches/b1:cancel", "", "", nil, 200, ""},

	// Vertex AI: publisher models in the path; the OpenAI-compatible
	// endpoint, caches and batch jobs in the body; endpoint ids name nothing.
	{"vertex openapi allowed", "POST", vertexLoc + "/endpoints/openapi/chat/completions", appJSON, `{"model":"google/gemini-2.0-flash-001","messages":[]}`, nil, 200, ""},
	{"vertex openapi forbidden", "POST", vertexLoc + "/endpoints/openapi/chat/completions", appJSON, `{"model":"google/gemini-2.5-pro","messages":[]}`, nil, 403, "permission_denied"},
	{"vertex openapi other publisher", "POST", vertexLoc + "/endpoints/openapi/chat/completions", appJSON, `{"model":"meta/gemini-2.0-flash-001","messages":[]}`, nil, 403, "permission_denied"},
	{"vertex endpoint predict", "POST", vertexLoc + "/endpoints/1234567890:predict", appJSON, `{"instances":[]}`, nil, 403, "permission_denied"},
	{"vertex endpoint raw predict", "POST", vertexLoc + "/endpoints/1234567890:rawPredict", appJSON, `{"model":"google/gemini-2.0-flash-001"}`, nil, 403, "permission_denied"},
	{"vertex endpoint chat names an allowed model", "POST", vertexLoc + "/endpoints/1234567890/chat/completions", appJSON, `{"model":"google/gemini-2.0-flash-001","messages":[]}`, nil, 403, "permission_denied"},
	{"vertex tuned endpoint generate", "POST", vertexLoc + "/endpoints/987:generateContent", appJSON, `{"contents":[]}`, nil, 403, "permission_denied"},
	{"vertex publisher path allowed", "POST", vertexLoc + "/publishers/google/models/gemini-2.0-flash-001:generateContent", appJSON, `{"contents":[]}`, nil, 200, ""},
	{"vertex cache allowed", "POST", vertexLoc + "/cachedContents", appJSON, `{"model":"projects/p/locations/us-central1/publishers/google/models/gemini-2.0-flash-001"}`, nil, 200, ""},
	{"vertex batch job forbidden", "POST", vertexLoc + "/batchPredictionJobs", appJSON, `{"model":"publishers/google/models/gemini-2.5-pro"}`, nil, 403, "permission_denied"},
	{"vertex tuning job", "POST", vertexLoc + "/tuningJobs", appJSON, `{"baseModel":"gemini-2.0-flash-001"}`, nil, 403, "permission_denied"},
	{"vertex operation cancel", "POST", vertexLoc + "/operations/42:cancel", "", "", nil, 200, ""},

	// Bedrock: model/{id}/... in the path; the OpenAI-compatible APIs
	// and asynchronous invocations in the body; agents name nothing.
	{"bedrock openai allowed", "POST", "/bedrock/openai/v1/chat/completions", appJSON, `{"model":"openai.gpt-oss-20b-1:0","messages":[]}`, nil, 200, ""},
	{"bedrock openai forbidden", "POST", "/bedrock/openai/v1/chat/completions", appJSON, `{"model":"openai.gpt-oss-120b-1:0","messages":[]}`, nil, 403, "permission_denied"},
	{"bedrock v1 chat forbidden", "POST", "/bedrock/v1/chat/completions", appJSON, `{"model":"openai.gpt-oss-120b-1:0","messages":[]}`, nil, 403, "permission_denied"},
	{"bedrock responses forbidden", "POST", "/bedrock/openai/v1/responses", appJSON, `{"model":"openai.gpt-oss-120b-1:0","input":"x"}`, nil, 403, "permission_denied"},
	{"bedrock async forbidden", "POST", "/bedrock/async-invoke", appJSON, `{"modelId":"amazon.nova-reel-v1:0","modelInput":{},"outputDataConfig":{}}`, nil, 403, "permission_denied"},
	{"bedrock async model member is modelId", "POST", "/bedrock/async-invoke", appJSON, `{"model":"openai.gpt-oss-20b-1:0","modelId":"amazon.nova-reel-v1:0"}`, nil, 403, "permission_denied"},
	{"bedrock path allowed", "POST", "/bedrock/model/openai.gpt-oss-20b-1%3A0/invoke", appJSON, `{"messages":[]}`, nil, 200, ""},
	{"bedrock agent", "POST", "/bedrock/agents/A1/agentAliases/B1/sessions/s1/text", appJSON, `{"inputText":"hi"}`, nil, 403, "permission_denied"},
	{"bedrock retrieve and generate", "POST", "/bedrock/retrieveAndGenerate", appJSON, `{"input":{"text":"hi"}}`, nil, 403, "permission_denied"},
	{"bedrock guardrail", "POST", "/bedrock/guardrail/g1/version/1/apply", appJSON, `{"source":"INPUT","content":[]}`, nil, 200, ""},
	{"bedrock list async", "GET", "/bedrock/async-invoke", "", "", nil, 200, ""},

	// Anthropic: the body names the model; a body sluice cannot read as
	// the provider would is refused, not forwarded unchecked.
	{"anthropic allowed", "POST", "/anthropic/v1/messages", appJSON, `{"model":"claude-sonnet-4-5","max_tokens":1}`, nil, 200, ""},
	{"anthropic charset", "POST", "/anthropic/v1/messages", "application/json; charset=utf-8", `{"model":"claude-sonnet-4-5"}`, nil, 200, ""},
	{"anthropic forbidden", "POST", "/anthropic/v1/messages", appJSON, `{"model":"claude-opus-4"}`, nil, 403, "permission_denied"},
	{"anthropic count tokens forbidden", "POST", "/anthropic/v1/messages/count_tokens", appJSON, `{"model":"claude-opus-4"}`, nil, 403, "permission_denied"},
	{"anthropic gzip", "POST", "/anthropic/v1/messages", appJSON, gzipped(`{"model":"claude-opus-4"}`), []string{"Content-Encoding", "gzip"}, 400, "invalid_value"},
	{"anthropic byte-order mark", "POST", "/anthropic/v1/messages", appJSON, "\xef\xbb\xbf" + `{"model":"claude-opus-4"}`, nil, 400, "invalid_json"},
	{"anthropic trailing bytes", "POST", "/anthropic/v1/messages", appJSON, `{"model":"claude-sonnet-4-5"} {"model":"claude-opus-4"}`, nil, 400, "invalid_json"},
	{"anthropic multipart", "POST", "/anthropic/v1/messages", "multipart/form-data; boundary=b", "--b\r\nContent-Disposition: form-data; name=\"model\"\r\n\r\nclaude-opus-4\r\n--b--\r\n", nil, 400, "invalid_value"},
	{"anthropic form", "POST", "/anthropic/v1/messages", "application/x-www-form-urlencoded", `{"model":"claude-opus-4"}`, nil, 400, "invalid_value"},
	{"anthropic no content type", "POST", "/anthropic/v1/messages", "", `{"model":"claude-opus-4"}`, nil, 400, "invalid_value"},
	{"anthropic model twice", "POST", "/anthropic/v1/messages", appJSON, `{"model":"claude-sonnet-4-5","model":"claude-opus-4"}`, nil, 400, "invalid_value"},
	{"anthropic escaped name", "POST", "/anthropic/v1/messages", appJSON, `{"mod\u0065l":"claude-opus-4"}`, nil, 403, "permission_denied"},
	{"anthropic case differs", "POST", "/anthropic/v1/messages", appJSON, `{"Model":"claude-sonnet-4-5","model":"claude-opus-4"}`, nil, 403, "permission_denied"},
	{"anthropic model not a string", "POST", "/anthropic/v1/messages", appJSON, `{"model":["claude-sonnet-4-5"]}`, nil, 400, "invalid_value"},
	{"anthropic no model", "POST", "/anthropic/v1/messages", appJSON, `{"max_tokens":1}`, nil, 403, "permission_denied"},
	{"anthropic nested model only", "POST", "/anthropic/v1/messages", appJSON, `{"metadata":{"model":"claude-sonnet-4-5"}}`, nil, 403, "permission_denied"},
	{"anthropic batch allowed", "POST", "/anthropic/v1/messages/batches", appJSON, `{"requests":[{"custom_id":"a","params":{"model":"claude-sonnet-4-5"}},{"custom_id":"b","params":{"model":"claude-sonnet-4-5"}}]}`, nil, 200, ""},
	{"anthropic batch one forbidden", "POST", "/anthropic/v1/messages/batches", appJSON, `{"requests":[{"custom_id":"a","params":{"model":"claude-sonnet-4-5"}},{"custom_id":"b","params":{"model":"claude-opus-4"}}]}`, nil, 403, "permission_denied"},
	{"anthropic batch without params", "POST", "/anthropic/v1/messages/batches", appJSON, `{"requests":[{"custom_id":"a"}]}`, nil, 403, "permission_denied"},
	{"anthropic batch empty", "POST", "/anthropic/v1/messages/batches", appJSON, `{"requests":[]}`, nil, 403, "permission_denied"},
	{"anthropic batch cancel", "POST", "/anthropic/v1/messages/batches/msgbatch_1/cancel", "", "", nil, 200, ""},
	{"anthropic file upload", "POST", "/anthropic/v1/files", "multipart/form-data; boundary=b", "--b\r\nContent-Disposition: form-data; name=\"file\"; filename=\"a.txt\"\r\n\r\nhi\r\n--b--\r\n", nil, 200, ""},
	{"anthropic models", "GET", "/anthropic/v1/models", "", "", nil, 200, ""},

	// Every method with a body is checked as a POST would be, on all
	// four prefixes: PUT, PATCH, GET and DELETE cannot carry a
	// forbidden model past the list.
	{"anthropic put forbidden", "PUT", "/anthropic/v1/messages", appJSON, `{"model":"claude-opus-4"}`, nil, 403, "permission_denied"},
	{"anthropic patch forbidden", "PATCH", "/anthropic/v1/messages", appJSON, `{"model":"claude-opus-4"}`, nil, 403, "permission_denied"},
	{"anthropic get with body forbidden", "GET", "/anthropic/v1/messages", appJSON, `{"model":"claude-opus-4"}`, nil, 403, "permission_denied"},
	{"anthropic put allowed", "PUT", "/anthropic/v1/messages", appJSON, `{"model":"claude-sonnet-4-5"}`, nil, 200, ""},
	{"gemini patch forbidden", "PATCH", "/gemini/v1beta/openai/chat/completions", appJSON, `{"model":"gemini-2.5-pro"}`, nil, 403, "permission_denied"},
	{"gemini delete with body forbidden", "DELETE", "/gemini/v1beta/cachedContents", appJSON, `{"model":"models/gemini-2.5-pro"}`, nil, 403, "permission_denied"},
	{"gemini put on a path model forbidden", "PUT", "/gemini/v1beta/models/gemini-2.5-pro:generateContent", appJSON, `{}`, nil, 403, "permission_denied"},
	{"vertex put forbidden", "PUT", vertexLoc + "/endpoints/openapi/chat/completions", appJSON, `{"model":"google/gemini-2.5-pro"}`, nil, 403, "permission_denied"},
	{"vertex patch on an endpoint id", "PATCH", vertexLoc + "/endpoints/123", appJSON, `{"model":"google/gemini-2.0-flash-001"}`, nil, 403, "permission_denied"},
	{"bedrock put forbidden", "PUT", "/bedrock/openai/v1/chat/completions", appJSON, `{"model":"openai.gpt-oss-120b-1:0"}`, nil, 403, "permission_denied"},
	{"bedrock get with body forbidden", "GET", "/bedrock/async-invoke", appJSON, `{"modelId":"amazon.nova-reel-v1:0"}`, nil, 403, "permission_denied"},
	{"vertex delete without body", "DELETE", vertexLoc + "/cachedContents/c1", "", "", nil, 200, ""},
}

// TestRestrictedKeysAreCheckedWhereTheProviderReadsTheModel: a key limited
// to some models reaches only those, whether the path names the model or
// the body does (the providers' OpenAI-compatible endpoints, caches, batch
// jobs, asynchronous invocations, message batches); a call whose model
// sluice cannot name, or whose body it cannot read as the provider would,
// is refused and never forwarded.
func TestRestrictedKeysAreCheckedWhereTheProviderReadsTheModel(t *testing.T) {
	h, up := allowListHarness(t)
	for _, tc := range restrictedCases {
		t.Run(tc.name, func(t *testing.T) {
			before := up.hits.Load()
			headers := tc.headers
			if tc.contentType != "" {
				headers = append(headers, "Content-Type", tc.contentType)
			}
			var body io.Reader
			if tc.body != "" {
				body = strings.NewReader(tc.body)
			}
			resp, got := h.do(t, tc.method, tc.path, body, headers...)
			if resp.StatusCode != tc.status {
				t.Fatalf("%d %s, want %d", resp.StatusCode, got, tc.status)
			}
			if tc.status != 200 {
				if code := errorCode(t, got); code != tc.code {
					t.Errorf("code %s, want %s: %s", code, tc.code, got)
				}
				if up.hits.Load() != before {
					t.Error("a refused call reached the upstream")
				}
				return
			}
			if string(up.last(t).Body) != tc.body {
				t.Errorf("the upstream received %q, want the body as sent", up.last(t).Body)
			}
		})
	}
}

// TestRestrictedCallsLogTheModelTheBodyNames: the log event of a call whose
// model the body names says which.
func TestRestrictedCallsLogTheModelTheBodyNames(t *testing.T) {
	h, _ := allowListHarness(t)
	resp, body := h.do(t, "POST", "/gemini/v1beta/openai/chat/completions", strings.NewReader(`{"model":"models/gemini-2.5-flash"}`), "Content-Type", "application/json")
	if resp.StatusCode != 200 {
		t.Fatalf("%d %s", resp.StatusCode, body)
	}
	if ev := h.bus.last(t); ev.Model != "gemini-2.5-flash" {
		t.Errorf("event model %q", ev.Model)
	}
}

// TestUnrestrictedKeysAreNotLookedAt: without a model list, the forms a
// restricted key is refused pass untouched, and bodies stream: the
// upstream reads the start of one before the client has sent the rest.
func TestUnrestrictedKeysAreNotLookedAt(t *testing.T) {
	h, up := allowListHarness(t)
	p := teamPrincipal()
	h.principal.Store(&p)
	for _, tc := range []struct{ path, contentType, body string }{
		{"/anthropic/v1/messages", "application/json", gzipped(`{"model":"claude-opus-4"}`)},
		{"/anthropic/v1/messages", "text/plain", "\xef\xbb\xbf" + `{"model":"claude-opus-4"}`},
		{vertexLoc + "/endpoints/1234567890:predict", "application/json", `{"instances":[]}`},
		{"/gemini/v1beta/openai/chat/completions", "application/json", `{"model":"gemini-2.5-pro","model":"x"}`},
	} {
		resp, got := h.do(t, "POST", tc.path, strings.NewReader(tc.body), "Content-Type", tc.contentType)
		if resp.StatusCode != 200 || string(up.last(t).Body) != tc.body {
			t.Errorf("%s: %d %s; upstream received %q", tc.path, resp.StatusCode, got, up.last(t).Body)
		}
	}

	firstHalf := make(chan struct{})
	stream := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		buf := make([]byte, 5)
		if _, err := io.ReadFull(r.Body, buf); err == nil {
			close(firstHalf)
		}
		io.Copy(io.Discard, r.Body)
	}))
	t.Cleanup(stream.Close)
	hs := newHarness(t, allPrefixes(stream.URL), nil, nil)
	pr, pw := io.Pipe()
	go func() {
		pw.Write([]byte(`{"mod`))
		select {
		case <-firstHalf:
		case <-time.After(5 * time.Second):
		}
		pw.Write([]byte(`el":"claude-opus-4"}`))
		pw.Close()
	}()
	resp, got := hs.do(t, "POST", "/anthropic/v1/messages", pr, "Content-Type", "application/json")
	select {
	case <-firstHalf:
	default:
		t.Errorf("the upstream saw nothing before the whole body was sent (%d %s): it was buffered", resp.StatusCode, got)
	}
}

func TestBodyModelName(t *testing.T) {
	for _, tc := range []struct {
		p        Provider
		in, want string
	}{
		{Gemini, "gemini-2.5-flash", "gemini-2.5-flash"},
		{Gemini, "models/gemini-2.5-flash", "gemini-2.5-flash"},
		{Gemini, "tunedModels/x", "tunedModels/x"},
		{Gemini, "google/gemini-2.5-flash", "google/gemini-2.5-flash"},
		{VertexAI, "google/gemini-2.0-flash-001", "gemini-2.0-flash-001"},
		{VertexAI, "meta/llama-3.1-405b-instruct-maas", "meta/llama-3.1-405b-instruct-maas"},
		{VertexAI, "publishers/google/models/gemini-2.0-flash-001", "gemini-2.0-flash-001"},
		{VertexAI, "projects/p/locations/l/publishers/google/models/gemini-2.0-flash-001", "gemini-2.0-flash-001"},
		{VertexAI, "projects/p/locations/l/endpoints/123", "projects/p/locations/l/endpoints/123"},
		{VertexAI, "models//x", "models//x"},
		{Anthropic, "models/claude", "models/claude"},
		{Bedrock, "google/x", "google/x"},
	} {
		if got := bodyModelName(tc.p, tc.in); got != tc.want {
			t.Errorf("%s %q: %q, want %q", tc.p, tc.in, got, tc.want)
		}
	}
}

// FuzzModelsOfBody holds the body check to encoding/json: whatever models it
// reads, encoding/json reads the same from the same members of the same
// single object; a body it cannot read that way is refused, never read
// otherwise.
func FuzzModelsOfBody(f *testing.F) {
	for _, s := range []string{
		`{"model":"a"}`, `{"model":"a","model":"b"}`, `{"mod\u0065l":"a"}`, `{"Model":"a"}`, "\xef\xbb\xbf{\"model\":\"a\"}",
		`{"model":"a"} {}`, `{"model":1}`, `{"requests":[{"params":{"model":"a"}},{"params":{"model":"b"}}]}`,
		`{"requests":[{"params":{"model":"a","model":"b"}}]}`, `{"requests":{}}`, `[{"model":"a"}]`, `{"model":"\ud800"}`,
	} {
		f.Add([]byte(s), false)
		f.Add([]byte(s), true)
	}
	f.Fuzz(func(t *testing.T, body []byte, batch bool) {
		rule := modelRule{source: sourceBody, member: "model"}
		if batch {
			rule = modelRule{source: sourceBatch}
		}
		models, err := modelsOfBody(body, rule)
		if err != nil {
			if api.AsError(err).Status == 500 {
				t.Fatalf("%q: a 500 for a client's body: %v", body, err)
			}
			return
		}
		// encoding/json into maps: names matched exactly, as the
		// providers match them.
		var want []string
		str := func(raw json.RawMessage) string {
			var m string
			if err := json.Unmarshal(raw, &m); err != nil {
				t.Fatalf("%q: read %q, but encoding/json reads no string: %v", body, models, err)
			}
			return m
		}
		obj := func(raw []byte) map[string]json.RawMessage {
			var m map[string]json.RawMessage
			if err := json.Unmarshal(raw, &m); err != nil {
				t.Fatalf("%q: read %q, but encoding/json reads no object: %v", body, models, err)
			}
			return m
		}
		doc := obj(body)
		if !batch {
			want = append(want, str(doc["model"]))
		} else {
			var reqs []json.RawMessage
			if err := json.Unmarshal(doc["requests"], &reqs); err != nil {
				t.Fatalf("%q: read %q, but encoding/json reads no requests: %v", body, models, err)
			}
			for _, r := range reqs {
				want = append(want, str(obj(obj(r)["params"])["model"]))
			}
		}
		if !slices.Equal(models, want) {
			t.Fatalf("%q: read %q, encoding/json reads %q", body, models, want)
		}
	})
}
