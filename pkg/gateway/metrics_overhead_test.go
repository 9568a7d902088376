package gateway

import (
	"context"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"testing"

	"github.com/sluice-gateway/sluice/pkg/handoff"
)

// BenchmarkMetricsOverhead is issue 31's bench point in process: two local
// processes on the same upstream, one with metrics off (SLUICE_METRICS=false)
// and one with them on, answering the embeddings and passthrough calls of
// BenchmarkOverhead. The sub-benchmarks alternate off and on, so with -count
// each pair is measured under the same load; cpu-µs/op counts the client and
// upstream too, so the on−off difference is what metrics cost a call. The
// direct sub-benchmarks send the same calls to the upstream itself: the
// client's and upstream's share, which the bench's telemetry check takes
// off both to price metrics against sluice's own instructions.
//
//	go test -run '^$' -bench MetricsOverhead -benchmem -count 6 ./pkg/gateway | benchstat -
func BenchmarkMetricsOverhead(b *testing.B) {
	up := httptest.NewServer(benchUpstream())
	b.Cleanup(up.Close)
	conf := "model_list:\n" +
		"  - model_name: text-embedding-3-small\n    litellm_params: {model: openai/text-embedding-3-small, api_base: " + up.URL + "/v1, api_key: sk-up}\n" +
		"passthrough:\n  anthropic: {api_base: " + up.URL + ", api_key: sk-ant-up}\n"
	offURL, offKey := benchSluiceEnv(b, conf, map[string]string{"SLUICE_METRICS": "false"})
	onURL, onKey := benchSluiceEnv(b, conf, nil)

	embeddings := `{"model":"text-embedding-3-small","input":"` + benchInput + `"}`
	messages := `{"model":"claude-sonnet-4-5","max_tokens":256,"messages":[{"role":"user","content":"` + benchInput + `"}]}`
	for _, p := range []struct {
		name, path, body string
		auth             func(h http.Header, key string)
		upPath           string
		want             int
	}{
		{"embeddings", "/v1/embeddings", embeddings, bearer, "/v1/embeddings", len(embeddingAnswer)},
		{"passthrough", "/anthropic/v1/messages", messages, anthropicKey, "/v1/messages", len(messageAnswer)},
	} {
		b.Run(p.name+"/direct", func(b *testing.B) {
			benchCalls(b, up.URL+p.upPath, p.body, func(h http.Header) { p.auth(h, "sk-client") }, p.want)
		})
		b.Run(p.name+"/off", func(b *testing.B) {
			benchCalls(b, offURL+p.path, p.body, func(h http.Header) { p.auth(h, offKey) }, p.want)
		})
		b.Run(p.name+"/on", func(b *testing.B) {
			benchCalls(b, onURL+p.path, p.body, func(h http.Header) { p.auth(h, onKey) }, p.want)
		})
	}
}

// benchSluiceEnv starts the local process with the config conf and the
// settings env beside the bench's own, and returns its URL and a team key.
func benchSluiceEnv(b testing.TB, conf string, env map[string]string) (url, key string) {
	dir := b.TempDir()
	confPath := filepath.Join(dir, "config.yaml")
	if err := os.WriteFile(confPath, []byte(conf), 0o600); err != nil {
		b.Fatal(err)
	}
	master := "sk-bench-master"
	all := map[string]string{"SLUICE_DATA_DIR": filepath.Join(dir, "data"), "SLUICE_ADDR": "127.0.0.1:0", "SLUICE_MASTER_KEY": master, "SLUICE_CONFIG": confPath}
	for k, v := range env {
		all[k] = v
	}
	g, err := Open(context.Background(), func(k string) string { return all[k] }, WithHandoff(handoff.Wrap))
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { g.Close() })
	url, _, stop := serve(b, g)
	b.Cleanup(stop)
	team := post(b, url+"/team/new", master, `{"team_alias":"bench"}`)["team_id"].(string)
	key = post(b, url+"/key/generate", master, `{"team_id":"`+team+`"}`)["key"].(string)
	return url, key
}
