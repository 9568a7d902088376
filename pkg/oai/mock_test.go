package oai

import (
	"math"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/sluice-gateway/sluice/pkg/api"
)

func TestParseEmbeddingMockResponse(t *testing.T) {
	for name, tc := range map[string]struct {
		value string
		want  *Mock
	}{
		"absent":     {value: ``, want: nil},
		"null":       {value: `,"mock_response":null`, want: nil},
		"text":       {value: `,"mock_response":"any"`, want: &Mock{Text: "any"}},
		"empty text": {value: `,"mock_response":""`, want: &Mock{Text: ""}},
		"vector":     {value: `,"mock_response":[0.5, -1, 2e-3, 0]`, want: &Mock{Vector: []float32{0.5, -1, 2e-3, 0}}},
		"longest":    {value: `,"mock_response":[` + strings.Repeat("0,", MaxMockDimensions-1) + `1]`, want: &Mock{Vector: append(make([]float32, MaxMockDimensions-1), 1)}},
	} {
		t.Run(name, func(t *testing.T) {
			req, err := ParseEmbeddingRequest([]byte(`{"model":"m","input":"x"` + tc.value + `}`))
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tc.want, req.MockResponse); diff != "" {
				t.Errorf("MockResponse (-want +got):\n%s", diff)
			}
		})
	}
}

func TestParseEmbeddingMockResponseErrors(t *testing.T) {
	for name, tc := range map[string]struct{ value, msg string }{
		"number":         {`1`, "must be a string or a non-empty array"},
		"object":         {`{"a":1}`, "must be a string or a non-empty array"},
		"empty array":    {`[]`, "must be a string or a non-empty array"},
		"string item":    {`[1,"2"]`, `'mock_response[1]' is "2"`},
		"nested":         {`[[1]]`, `'mock_response[0]' is [1]`},
		"beyond float32": {`[1e39]`, `'mock_response[0]' is 1e39`},
		"too long":       {`[` + strings.Repeat("0,", MaxMockDimensions) + `1]`, "more than 4096 numbers"},
		"twice":          {`"a","mock_response":"b"`, "more than once"},
	} {
		t.Run(name, func(t *testing.T) {
			_, err := ParseEmbeddingRequest([]byte(`{"model":"m","input":"x","mock_response":` + tc.value + `}`))
			e := api.AsError(err)
			if err == nil || e.Status != 400 || e.Param != "mock_response" || !strings.Contains(e.Message, tc.msg) {
				t.Fatalf("error %v, want a 400 on mock_response saying %q", err, tc.msg)
			}
		})
	}
}

// FuzzEmbeddingMockResponse: a request's mock_response is refused with a
// 400 or read as a text or as a finite vector within the bound.
func FuzzEmbeddingMockResponse(f *testing.F) {
	for _, s := range []string{`"a"`, `[1,2.5,-3e-2]`, `[]`, `[1e39]`, `[-0]`, `["x"]`, `null`, `[1,[2]]`, `{}`} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, value string) {
		req, err := ParseEmbeddingRequest([]byte(`{"model":"m","input":"x","mock_response":` + value + `}`))
		if err != nil {
			if e := api.AsError(err); e.Status != 400 || e.Message == "" {
				t.Fatalf("%q: %v", value, err)
			}
			return
		}
		m := req.MockResponse
		if m == nil || m.Vector == nil {
			return
		}
		if len(m.Vector) == 0 || len(m.Vector) > MaxMockDimensions {
			t.Fatalf("%q: a vector of %d", value, len(m.Vector))
		}
		for i, f := range m.Vector {
			if math.IsNaN(float64(f)) || math.IsInf(float64(f), 0) {
				t.Fatalf("%q: vector[%d] = %v", value, i, f)
			}
		}
	})
}

func TestAppendEmbedding(t *testing.T) {
	v := []float32{0.5, -1, 0.1}
	if got, err := AppendEmbedding([]byte("x"), v, EncodingFloat); err != nil || string(got) != "x[0.5,-1,0.1]" {
		t.Errorf("float: %s, %v", got, err)
	}
	// 0.5 = 0x3f000000, -1 = 0xbf800000, 0.1 = 0x3dcccccd, little-endian.
	if got, err := AppendEmbedding(nil, v, EncodingBase64); err != nil || string(got) != `"AAAAPwAAgL/NzMw9"` {
		t.Errorf("base64: %s, %v", got, err)
	}
	if _, err := AppendEmbedding(nil, []float32{float32(math.NaN())}, EncodingFloat); err == nil {
		t.Error("NaN encoded as float")
	}
}
