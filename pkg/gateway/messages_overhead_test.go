package gateway

import (
	"net/http"
	"net/http/httptest"
	"testing"
)

// BenchmarkMessagesOverhead sets issue 30's two Messages paths beside the
// bare proxy and the paths they are held to, as BenchmarkOverhead does:
// POST /v1/messages served natively by an Anthropic deployment (target ≤ 1.2×
// the proxy's /v1/messages, and the Anthropic passthrough beside it), and
// POST /v1/messages translated to an OpenAI-compatible chat call (target ≤ 2×
// the proxy's /v1/chat/completions, and chat forwarding beside it).
//
//	go test -run '^$' -bench MessagesOverhead -benchmem -count 6 ./pkg/gateway | benchstat -
func BenchmarkMessagesOverhead(b *testing.B) {
	up := httptest.NewServer(benchUpstream())
	b.Cleanup(up.Close)
	sluiceURL, key := benchMessagesSluice(b, up.URL)
	proxyURL := benchProxy(b, up.URL)

	native := `{"model":"claude-sonnet-4-5","max_tokens":256,"messages":[{"role":"user","content":"` + benchInput + `"}]}`
	translated := `{"model":"gpt-4o-mini","max_tokens":256,"system":"You are terse.","messages":[{"role":"user","content":"` + benchInput + `"}]}`
	chat := `{"model":"gpt-4o-mini","messages":[{"role":"system","content":"You are terse."},{"role":"user","content":"` + benchInput + `"}]}`
	for _, p := range []struct {
		name, url, body string
		auth            func(h http.Header)
		want            int
	}{
		{"native/proxy", proxyURL + "/v1/messages", native, func(h http.Header) { anthropicKey(h, "sk-client") }, len(messageAnswer)},
		{"native/passthrough", sluiceURL + "/anthropic/v1/messages", native, func(h http.Header) { anthropicKey(h, key) }, len(messageAnswer)},
		{"native/sluice", sluiceURL + "/v1/messages", native, func(h http.Header) { anthropicKey(h, key) }, len(messageAnswer)},
		{"translated/proxy", proxyURL + "/v1/chat/completions", chat, func(h http.Header) { bearer(h, "sk-client") }, len(chatAnswer)},
		{"translated/chat", sluiceURL + "/v1/chat/completions", chat, func(h http.Header) { bearer(h, key) }, len(chatAnswer)},
		{"translated/sluice", sluiceURL + "/v1/messages", translated, func(h http.Header) { anthropicKey(h, key) }, -1},
	} {
		b.Run(p.name, func(b *testing.B) { benchCalls(b, p.url, p.body, p.auth, p.want) })
	}
}

// benchMessagesSluice starts the local process with a Claude deployment and
// an OpenAI-compatible one on upstream, and the Anthropic passthrough.
func benchMessagesSluice(b testing.TB, upstream string) (url, key string) {
	return benchSluiceWith(b, "model_list:\n"+
		"  - model_name: claude-sonnet-4-5\n    litellm_params: {model: anthropic/claude-sonnet-4-5, api_base: "+upstream+", api_key: sk-ant-up}\n"+
		"  - model_name: gpt-4o-mini\n    litellm_params: {model: openai/gpt-4o-mini, api_base: "+upstream+"/v1, api_key: sk-up}\n"+
		"passthrough:\n  anthropic: {api_base: "+upstream+", api_key: sk-ant-up}\n")
}
