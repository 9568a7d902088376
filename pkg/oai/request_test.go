package oai

import (
	"encoding/json"
	"maps"
	"strings"
	"testing"

	"github.com/sluice-gateway/sluice/pkg/api"
)

func TestParseEmbeddingRequest(t *testing.T) {
	many := func(n int, item string) string {
		return `{"model":"m","input":[` + strings.TrimSuffix(strings.Repeat(item+",", n), ",") + `]}`
	}
	for _, tc := range []struct {
		name, body string
		kind       InputKind
		count      int
		encoding   string
		dims       int
		// an error:
		status      int
		code, param string
		msg         string
	}{
		{name: "string", body: `{"model":"m","input":"hello"}`, kind: InputString, count: 1, encoding: "float"},
		{name: "strings", body: `{"model":"m","input":["a","b"],"encoding_format":"base64","dimensions":256,"user":"u"}`, kind: InputStrings, count: 2, encoding: "base64", dims: 256},
		{name: "tokens", body: `{"model":"m","input":[1,2,3]}`, kind: InputTokens, count: 1, encoding: "float"},
		{name: "token arrays", body: `{"model":"m","input":[[1,2],[3]]}`, kind: InputTokenArrays, count: 2, encoding: "float"},
		{name: "nulls are absent", body: `{"model":"m","input":"x","encoding_format":null,"dimensions":null,"user":null}`, kind: InputString, count: 1, encoding: "float"},
		{name: "unknown members kept", body: `{"model":"m","input":"x","input_type":"query","extra":{"a":[1]}}`, kind: InputString, count: 1, encoding: "float"},
		{name: "2048 inputs", body: many(2048, `"a"`), kind: InputStrings, count: 2048, encoding: "float"},
		{name: "escaped key", body: `{"mod\u0065l":"m","input":"x"}`, kind: InputString, count: 1, encoding: "float"},
		{name: "escaped encoding", body: `{"model":"m","input":"x","encoding_format":"b\u0061se64"}`, kind: InputString, count: 1, encoding: "base64"},
		{name: "float given", body: `{"model":"m","input":"x","encoding_format":"float"}`, kind: InputString, count: 1, encoding: "float"},

		{name: "empty body", body: ``, status: 400, code: "invalid_json", msg: "empty"},
		{name: "not JSON", body: `{"model":`, status: 400, code: "invalid_json", msg: "not valid JSON"},
		{name: "not JSON after a duplicate", body: `{"model":"a","model":"b","input":"x"`, status: 400, code: "invalid_json", msg: "not valid JSON"},
		{name: "not JSON deep in a value", body: `{"model":"m","input":"x","extra":{"a":[1,}}`, status: 400, code: "invalid_json", msg: "not valid JSON"},
		{name: "control byte in a string", body: "{\"model\":\"m\",\"input\":\"a\x01b\"}", status: 400, code: "invalid_json", msg: "not valid JSON"},
		{name: "not an object", body: `["m"]`, status: 400, code: "invalid_json", msg: "JSON object"},
		{name: "missing model", body: `{"input":"x"}`, status: 400, code: "missing_required_parameter", param: "model"},
		{name: "null model", body: `{"model":null,"input":"x"}`, status: 400, code: "missing_required_parameter", param: "model"},
		{name: "empty model", body: `{"model":"","input":"x"}`, status: 400, code: "invalid_value", param: "model"},
		{name: "model not a string", body: `{"model":3,"input":"x"}`, status: 400, code: "invalid_value", param: "model", msg: "expected a string"},
		{name: "duplicate model", body: `{"model":"a","model":"b","input":"x"}`, status: 400, code: "invalid_value", param: "model", msg: "more than once"},
		{name: "missing input", body: `{"model":"m"}`, status: 400, code: "missing_required_parameter", param: "input"},
		{name: "empty string input", body: `{"model":"m","input":""}`, status: 400, code: "invalid_value", param: "input", msg: "empty string"},
		{name: "empty array", body: `{"model":"m","input":[]}`, status: 400, code: "invalid_value", param: "input", msg: "empty array"},
		{name: "empty item", body: `{"model":"m","input":["a",""]}`, status: 400, code: "invalid_value", param: "input", msg: "'input[1]'"},
		{name: "empty token array", body: `{"model":"m","input":[[1],[]]}`, status: 400, code: "invalid_value", param: "input", msg: "'input[1]'"},
		{name: "too many inputs", body: many(2049, `"a"`), status: 400, code: "invalid_value", param: "input", msg: "2049 items; at most 2048"},
		{name: "number input", body: `{"model":"m","input":5}`, status: 400, code: "invalid_value", param: "input", msg: "must be a string"},
		{name: "object input", body: `{"model":"m","input":{"text":"x"}}`, status: 400, code: "invalid_value", param: "input"},
		{name: "mixed items", body: `{"model":"m","input":["a",1]}`, status: 400, code: "invalid_value", param: "input", msg: "mixes"},
		{name: "negative token", body: `{"model":"m","input":[1,-2]}`, status: 400, code: "invalid_value", param: "input", msg: "non-negative"},
		{name: "fractional token", body: `{"model":"m","input":[[1.5]]}`, status: 400, code: "invalid_value", param: "input"},
		{name: "bool item", body: `{"model":"m","input":[true]}`, status: 400, code: "invalid_value", param: "input"},
		{name: "bad encoding", body: `{"model":"m","input":"x","encoding_format":"int8"}`, status: 400, code: "invalid_value", param: "encoding_format", msg: "'float' or 'base64'"},
		{name: "encoding not a string", body: `{"model":"m","input":"x","encoding_format":1}`, status: 400, code: "invalid_value", param: "encoding_format"},
		{name: "zero dimensions", body: `{"model":"m","input":"x","dimensions":0}`, status: 400, code: "invalid_value", param: "dimensions", msg: "positive integer"},
		{name: "negative dimensions", body: `{"model":"m","input":"x","dimensions":-3}`, status: 400, code: "invalid_value", param: "dimensions"},
		{name: "fractional dimensions", body: `{"model":"m","input":"x","dimensions":1.5}`, status: 400, code: "invalid_value", param: "dimensions"},
		{name: "string dimensions", body: `{"model":"m","input":"x","dimensions":"256"}`, status: 400, code: "invalid_value", param: "dimensions"},
		{name: "huge dimensions", body: `{"model":"m","input":"x","dimensions":99999999999}`, status: 400, code: "invalid_value", param: "dimensions"},
		{name: "user not a string", body: `{"model":"m","input":"x","user":{}}`, status: 400, code: "invalid_value", param: "user"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			req, err := ParseEmbeddingRequest([]byte(tc.body))
			if tc.status != 0 {
				e := api.AsError(err)
				if err == nil || e.Status != tc.status || e.Code != tc.code || e.Param != tc.param || !strings.Contains(e.Message, tc.msg) {
					t.Fatalf("got %v; want %d %s param=%q containing %q", err, tc.status, tc.code, tc.param, tc.msg)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if req.Model != "m" || req.InputKind != tc.kind || req.InputCount != tc.count || req.Encoding() != tc.encoding || req.Dimensions != tc.dims {
				t.Errorf("got %+v", req)
			}
		})
	}
}

func TestBodyRewritesOnlyTheModel(t *testing.T) {
	body := `{ "input" : ["a"], "model" : "alias" , "x":{"model":"inner"} }`
	req, err := ParseEmbeddingRequest([]byte(body))
	if err != nil {
		t.Fatal(err)
	}
	got := string(req.Body("text-embedding-3-small"))
	want := `{ "input" : ["a"], "model" : "text-embedding-3-small" , "x":{"model":"inner"} }`
	if got != want {
		t.Errorf("Body = %s\nwant   %s", got, want)
	}
	// The same model: the client's bytes, not a copy.
	if same := req.Body("alias"); &same[0] != &req.Raw()[0] {
		t.Error("Body copied an unchanged body")
	}
	// A name that needs escaping stays valid JSON.
	var m map[string]any
	if err := json.Unmarshal(req.Body(`we"ird\`), &m); err != nil || m["model"] != `we"ird\` {
		t.Errorf("escaped model: %v %v", m, err)
	}
}

func TestModerationBodyInsertsModel(t *testing.T) {
	for _, body := range []string{`{"input":"x"}`, ` { "input" : ["a","b"] } `} {
		req, err := ParseModerationRequest([]byte(body))
		if err != nil {
			t.Fatal(err)
		}
		var m map[string]any
		if err := json.Unmarshal(req.Body("omni-moderation-latest"), &m); err != nil || m["model"] != "omni-moderation-latest" || m["input"] == nil {
			t.Errorf("%s → %s (%v)", body, req.Body("omni-moderation-latest"), err)
		}
	}
}

func TestParseModerationRequest(t *testing.T) {
	for _, tc := range []struct {
		name, body string
		count      int
		multimodal bool
		code, msg  string
	}{
		{name: "string", body: `{"input":"hi"}`, count: 1},
		{name: "strings", body: `{"model":"omni-moderation-latest","input":["a","b"]}`, count: 2},
		{name: "multimodal", body: `{"input":[{"type":"text","text":"a"},{"type":"image_url","image_url":{"url":"https://x/y.png"}}]}`, count: 2, multimodal: true},
		{name: "missing input", body: `{"model":"m"}`, code: "missing_required_parameter"},
		{name: "empty array", body: `{"input":[]}`, code: "invalid_value", msg: "empty array"},
		{name: "number", body: `{"input":1}`, code: "invalid_value", msg: "must be a string"},
		{name: "mixed", body: `{"input":["a",{"type":"text","text":"b"}]}`, code: "invalid_value", msg: "mixes"},
		{name: "part without type", body: `{"input":[{"text":"a"}]}`, code: "invalid_value", msg: "type' is required"},
		{name: "unknown part", body: `{"input":[{"type":"audio"}]}`, code: "invalid_value", msg: "'text' or 'image_url'"},
		{name: "text part without text", body: `{"input":[{"type":"text"}]}`, code: "invalid_value", msg: "text' is required"},
		{name: "image part without url", body: `{"input":[{"type":"image_url","image_url":{}}]}`, code: "invalid_value", msg: "url' is required"},
		{name: "part of wrong types", body: `{"input":[{"type":1}]}`, code: "invalid_value", msg: "wrong type"},
		{name: "model not a string", body: `{"model":[],"input":"x"}`, code: "invalid_value"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			req, err := ParseModerationRequest([]byte(tc.body))
			if tc.code != "" {
				e := api.AsError(err)
				if err == nil || e.Status != 400 || e.Code != tc.code || !strings.Contains(e.Message, tc.msg) {
					t.Fatalf("got %v; want 400 %s containing %q", err, tc.code, tc.msg)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if req.InputCount != tc.count || req.Multimodal != tc.multimodal {
				t.Errorf("got %+v", req)
			}
		})
	}
}

// FuzzParseEmbeddingRequest checks the parser against encoding/json: it
// never panics, refuses only with a 400 or 413, and what it accepts agrees
// with a full decode; the rewritten body is valid JSON that differs only in
// its model.
func FuzzParseEmbeddingRequest(f *testing.F) {
	for _, s := range []string{
		`{"model":"m","input":"hello"}`,
		`{"model":"m","input":["a","b"],"encoding_format":"base64","dimensions":8,"user":"u"}`,
		`{"model":"m","input":[[1,2],[3]]}`,
		`{"model":"m","input":[1,2,3]}`,
		`{"model":"m\"x","input":"\\\"","model2":{"model":"n"}}`,
		`{"input":"x"}`, `[]`, `{"model":"m","input":[""]}`, `{"model":"a","model":"b"}`,
		`{"model":"m","input":"x","mock_response":[0.5,1e-3]}`, `{"model":"m","input":"x","mock_response":"t"}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		req, err := ParseEmbeddingRequest(body)
		if err != nil {
			if e := api.AsError(err); e.Status != 400 || e.Message == "" {
				t.Fatalf("%q: %v", body, err)
			}
			return
		}
		var full map[string]json.RawMessage
		if err := json.Unmarshal(body, &full); err != nil {
			t.Fatalf("accepted invalid JSON %q", body)
		}
		var model string
		if json.Unmarshal(full["model"], &model) != nil || model != req.Model {
			// encoding/json matches keys case-insensitively into structs
			// but not into maps; the map is exact, as a provider is.
			t.Fatalf("%q: model %q, full decode %q", body, req.Model, model)
		}
		if string(full["input"]) != string(req.Input) {
			t.Fatalf("%q: input %q", body, req.Input)
		}
		if req.InputCount < 1 || req.InputCount > MaxEmbeddingInputs {
			t.Fatalf("%q: %d inputs", body, req.InputCount)
		}
		out := req.Body("provider-model")
		var rewritten map[string]json.RawMessage
		if err := json.Unmarshal(out, &rewritten); err != nil {
			t.Fatalf("%q rewritten to invalid JSON %q", body, out)
		}
		if string(rewritten["model"]) != `"provider-model"` {
			t.Fatalf("%q rewritten model %s", body, rewritten["model"])
		}
		delete(full, "model")
		delete(rewritten, "model")
		if !maps.EqualFunc(full, rewritten, func(a, b json.RawMessage) bool { return string(a) == string(b) }) {
			t.Fatalf("%q: rewrite changed other members: %q", body, out)
		}
	})
}

func FuzzParseModerationRequest(f *testing.F) {
	for _, s := range []string{
		`{"input":"hi"}`, `{"model":"m","input":["a"]}`,
		`{"input":[{"type":"text","text":"a"},{"type":"image_url","image_url":{"url":"u"}}]}`,
		`{"input":[{"type":"x"}]}`, `{}`, `[`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		req, err := ParseModerationRequest(body)
		if err != nil {
			if e := api.AsError(err); e.Status != 400 || e.Message == "" {
				t.Fatalf("%q: %v", body, err)
			}
			return
		}
		var m map[string]any
		if err := json.Unmarshal(req.Body("x"), &m); err != nil || m["model"] != "x" {
			t.Fatalf("%q rewritten to %q (%v)", body, req.Body("x"), err)
		}
	})
}

func TestExtras(t *testing.T) {
	req, err := ParseEmbeddingRequest([]byte(`{"model":"m","input":["a"],"input_type":"search_query","normalize":false,"task_type":null,"x":{"input_type":1}}`))
	if err != nil {
		t.Fatal(err)
	}
	x, err := req.Extras("input_type", "normalize", "task_type", "truncate")
	if err != nil {
		t.Fatal(err)
	}
	if len(x) != 2 {
		t.Errorf("extras %q: null and absent members are left out, nested ones are not members", x)
	}
	if v, given, err := x.String("input_type"); v != "search_query" || !given || err != nil {
		t.Errorf("input_type %q %v %v", v, given, err)
	}
	if v, given, err := x.Bool("normalize"); v || !given || err != nil {
		t.Errorf("normalize %v %v %v", v, given, err)
	}
	if _, given, err := x.String("truncate"); given || err != nil {
		t.Errorf("truncate given %v %v", given, err)
	}
	if _, _, err := x.Bool("input_type"); err == nil || api.AsError(err).Param != "input_type" {
		t.Errorf("a string read as a boolean: %v", err)
	}
	if _, _, err := x.String("normalize"); err == nil || api.AsError(err).Param != "normalize" {
		t.Errorf("a boolean read as a string: %v", err)
	}
	dup, _ := ParseEmbeddingRequest([]byte(`{"model":"m","input":"a","input_type":"a","input_type":"b"}`))
	if _, err := dup.Extras("input_type"); err == nil || api.AsError(err).Status != 400 || api.AsError(err).Param != "input_type" {
		t.Errorf("duplicate: %v", err)
	}
}
