package batches

import (
	"encoding/json"
	"testing"
)

func TestInputTokensCountsAsTheMockDoes(t *testing.T) {
	for _, tc := range []struct {
		body string
		want int64
	}{
		{`{"messages":[{"role":"system","content":"1234"},{"role":"user","content":"12345"}]}`, 1 + 2},
		{`{"messages":[{"role":"user","content":[{"type":"text","text":"1234"},{"type":"image_url","image_url":{"url":"https://x"}},{"type":"text","text":"5678"}]}]}`, 2},
		{`{"prompt":["1234","12345678"]}`, 1 + 2},
		{`{"prompt":[[1,2,3],[4]]}`, 4},
		{`{"input":"12345678","instructions":"1234"}`, 2 + 1},
		{`{"input":[{"role":"user","content":[{"type":"input_text","text":"12345678"}]}]}`, 2},
	} {
		var b lineBody
		if err := json.Unmarshal([]byte(tc.body), &b); err != nil {
			t.Fatal(err)
		}
		if got := b.inputTokens(); got != tc.want {
			t.Errorf("%s: %d tokens, want %d", tc.body, got, tc.want)
		}
	}
}

// A line's body is the caller's: any JSON gives a count, never a panic.
func FuzzInputTokens(f *testing.F) {
	for _, s := range []string{`{"messages":[{"content":"hi"}]}`, `{"prompt":[[1,2],"x"]}`, `{"input":[{"content":[{"text":"a"}]}]}`, `{"input":{"text":"x"}}`} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		var b lineBody
		if json.Unmarshal([]byte(s), &b) != nil {
			return
		}
		if n := b.inputTokens(); n < 0 || n > int64(len(s)) {
			t.Errorf("%q: %d tokens", s, n)
		}
	})
}
