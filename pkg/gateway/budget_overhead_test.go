package gateway

import (
	"net/http"
	"net/http/httptest"
	"testing"
)

// BenchmarkBudgetOverhead is make bench's budget scenario in one process:
// the same embeddings call by a key without a budget and by a key with one
// (large enough never to refuse). The difference between the two rows is
// what a budget check costs a call.
//
//	go test -run '^$' -bench BudgetOverhead -benchmem -count 6 ./pkg/gateway | benchstat -
func BenchmarkBudgetOverhead(b *testing.B) {
	up := httptest.NewServer(benchUpstream())
	b.Cleanup(up.Close)
	url, plain := benchSluice(b, up.URL)
	master := "sk-bench-master"
	team := post(b, url+"/team/new", master, `{"team_alias":"bench-budget"}`)["team_id"].(string)
	with := post(b, url+"/key/generate", master, `{"team_id":"`+team+`"}`)["key"].(string)
	post(b, url+"/key/update", master, `{"key":"`+with+`","max_budget":1e9,"budget_duration":"30d"}`)
	body := `{"model":"text-embedding-3-small","input":"` + benchInput + `"}`
	for _, k := range []struct{ name, key string }{{"without", plain}, {"with", with}} {
		b.Run(k.name, func(b *testing.B) {
			benchCalls(b, url+"/v1/embeddings", body, func(h http.Header) { bearer(h, k.key) }, len(embeddingAnswer))
		})
	}
}
