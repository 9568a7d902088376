package gateway

import (
	"bytes"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"sync/atomic"
	"testing"
	"time"
)

// BenchmarkCallbackOverhead is make bench's callback scenario in one
// process: the same embeddings call by a team without a callback and by a
// team with a Langfuse callback whose ingestion endpoint is a local server
// answering as Langfuse does (207, per-item results). The "with" row waits
// until every call's event has reached the sink, so its cost is the call's
// plus its delivery; the difference between the rows is what a callback
// costs a call.
//
//	go test -run '^$' -bench CallbackOverhead -benchmem -count 6 ./pkg/gateway | benchstat -
func BenchmarkCallbackOverhead(b *testing.B) {
	up := httptest.NewServer(benchUpstream())
	b.Cleanup(up.Close)
	var events, requests atomic.Int64
	sink := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		requests.Add(1)
		// The batch's metadata says how many envelopes it holds (two an
		// event): read from its end, so that the sink — the bench's
		// upstream, another process there — costs little here.
		if i := bytes.LastIndex(body, []byte(`"batch_size":`)); i >= 0 {
			n, _ := strconv.Atoi(string(bytes.TrimRight(body[i+len(`"batch_size":`):][:bytes.IndexAny(body[i+len(`"batch_size":`):], ",}")], " ")))
			events.Add(int64(n / 2))
		}
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusMultiStatus)
		io.WriteString(w, `{"successes":[],"errors":[]}`)
	}))
	b.Cleanup(sink.Close)
	conf := "model_list:\n" +
		"  - model_name: text-embedding-3-small\n    litellm_params: {model: openai/text-embedding-3-small, api_base: " + up.URL + "/v1, api_key: sk-up}\n" +
		"callback_settings:\n  allow_hosts: [\"127.0.0.1\"]\n"
	url, plain := benchSluiceWith(b, conf)
	master := "sk-bench-master"
	team := post(b, url+"/team/new", master, `{"team_alias":"bench-callback"}`)["team_id"].(string)
	with := post(b, url+"/key/generate", master, `{"team_id":"`+team+`"}`)["key"].(string)
	post(b, url+"/team/"+team+"/callback", master, `{"callback_name":"langfuse","callback_type":"success",`+
		`"callback_vars":{"langfuse_public_key":"pk-lf-bench","langfuse_secret_key":"sk-lf-bench","langfuse_host":"`+sink.URL+`"}}`)
	body := `{"model":"text-embedding-3-small","input":"` + benchInput + `"}`
	// delivered waits until the sink holds want events.
	delivered := func(b *testing.B, want int64) {
		for deadline := time.Now().Add(time.Minute); events.Load() < want; time.Sleep(time.Millisecond) {
			if time.Now().After(deadline) {
				b.Fatalf("%d of %d events reached the sink", events.Load(), want)
			}
		}
	}
	b.Run("without", func(b *testing.B) {
		benchCalls(b, url+"/v1/embeddings", body, func(h http.Header) { bearer(h, plain) }, len(embeddingAnswer))
	})
	b.Run("with", func(b *testing.B) {
		n0, r0 := events.Load(), requests.Load()
		benchCalls(b, url+"/v1/embeddings", body, func(h http.Header) { bearer(h, with) }, len(embeddingAnswer), func(calls int) {
			delivered(b, n0+int64(calls))
		})
		// Events per sink request: how well the delivery batched (time-driven,
		// so far fewer under valgrind than at full speed).
		b.ReportMetric(float64(b.N+1)/float64(requests.Load()-r0), "events/request")
	})
}
