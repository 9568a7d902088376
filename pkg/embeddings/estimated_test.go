package embeddings

import (
	"io"
	"strings"
	"testing"
)

func TestEventSaysUsageEstimated(t *testing.T) {
	body := `{"object":"list","data":[{"object":"embedding","index":0,"embedding":[0.5,1]}],"model":"gemini-embedding-001","usage":{"prompt_tokens":3,"total_tokens":3}}`
	for _, estimated := range []bool{false, true} {
		// estimated: a provider that reports no usage (Gemini); the usage in
		// the body is sluice's estimate, and the Answer says so.
		router := &fakeRouter{body: body, encoding: "float", estimated: estimated}
		w, events := serve(t, router, `{"model":"g","input":"hello world"}`)
		if w.Code != 200 || len(events) != 1 {
			t.Fatalf("%d %s, %d events", w.Code, w.Body, len(events))
		}
		if ev := events[0]; ev.UsageEstimated != estimated || ev.PromptTokens != 3 {
			t.Errorf("estimated %v: event usage_estimated %v, prompt_tokens %d", estimated, ev.UsageEstimated, ev.PromptTokens)
		}
		// The client's answer is the provider's, untouched.
		if got, _ := io.ReadAll(w.Body); !strings.Contains(string(got), `"prompt_tokens":3`) {
			t.Errorf("answer %s", got)
		}
	}
}
