package config

import (
	"math"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func mockDoc(value string) []byte {
	return []byte("model_list:\n  - model_name: m\n    litellm_params:\n      model: openai/x\n      mock_response: " + value + "\n")
}

func TestParseMockResponse(t *testing.T) {
	text := func(s string) *Mock { return &Mock{Text: s} }
	for name, tc := range map[string]struct {
		value string
		env   map[string]string
		want  *Mock
	}{
		"text":             {value: `"Hello!"`, want: text("Hello!")},
		"plain text":       {value: `Hello there`, want: text("Hello there")},
		"empty text":       {value: `""`, want: text("")},
		"quoted number":    {value: `"42"`, want: text("42")},
		"text from env":    {value: `os.environ/MOCK`, env: map[string]string{"MOCK": "from env"}, want: text("from env")},
		"absent":           {value: ``, want: nil},
		"null":             {value: `null`, want: nil},
		"flow vector":      {value: `[0.6, 0.8, 0, -1.5e-3]`, want: &Mock{Vector: []float32{0.6, 0.8, 0, -1.5e-3}}},
		"block vector":     {value: "\n        - 1\n        - 2.5", want: &Mock{Vector: []float32{1, 2.5}}},
		"integers":         {value: `[1, 2, 3]`, want: &Mock{Vector: []float32{1, 2, 3}}},
		"float32 extremes": {value: `[3.4e38, -3.4e38, 1e-50]`, want: &Mock{Vector: []float32{3.4e38, -3.4e38, 0}}},
	} {
		t.Run(name, func(t *testing.T) {
			cfg, err := Parse(mockDoc(tc.value), env(tc.env))
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tc.want, cfg.ModelList[0].Params.MockResponse); diff != "" {
				t.Errorf("mock_response (-want +got):\n%s", diff)
			}
		})
	}
}

func TestParseMockResponseErrors(t *testing.T) {
	for name, tc := range map[string]struct{ value, want string }{
		"empty list":      {`[]`, "empty list"},
		"string in list":  {`[0.1, "two"]`, "mock_response[1] is not a number"},
		"nested list":     {`[[0.1]]`, "mock_response[0] is not a number"},
		"null in list":    {`[0.1, null]`, "mock_response[1] is not a number"},
		"bool in list":    {`[true]`, "mock_response[0] is not a number"},
		"infinity":        {`[.inf]`, "mock_response[0] is .inf, not a finite number"},
		"nan":             {`[.nan]`, "mock_response[0] is .nan, not a finite number"},
		"beyond float32":  {`[1e39]`, "mock_response[0] is 1e39, not a finite number"},
		"mapping":         {`{text: hi}`, "a text (chat) or a list of numbers"},
		"bare number":     {`42`, "mock_response is 42, not a text"},
		"bare boolean":    {`true`, "quote a text"},
		"number from env": {`[os.environ/X]`, "mock_response[0] is not a number"},
	} {
		t.Run(name, func(t *testing.T) {
			_, err := Parse(mockDoc(tc.value), env(map[string]string{"X": "1"}))
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("Parse error = %v, want one saying %q", err, tc.want)
			}
		})
	}
}

// FuzzMockResponse: any YAML value for mock_response either parses into a
// text or a finite vector, or is an error; never a panic.
func FuzzMockResponse(f *testing.F) {
	for _, seed := range []string{`"hi"`, `[1, 2.5]`, `[]`, `[.inf]`, `{a: 1}`, `42`, "\n        - 1\n        - x", `[1e39]`, `[0x10]`} {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, value string) {
		cfg, err := Parse(mockDoc(value), env(nil))
		if err != nil || len(cfg.ModelList) == 0 {
			return
		}
		m := cfg.ModelList[0].Params.MockResponse
		if m == nil || m.Vector == nil {
			return
		}
		if len(m.Vector) == 0 {
			t.Fatalf("%q parsed into an empty vector", value)
		}
		for i, f := range m.Vector {
			if math.IsNaN(float64(f)) || math.IsInf(float64(f), 0) {
				t.Fatalf("%q: vector[%d] = %v", value, i, f)
			}
		}
	})
}
