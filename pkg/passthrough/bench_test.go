package passthrough_test

import (
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sluice-gateway/sluice/pkg/gateway/gatewaytest"
)

// The benchmarks compare three ways to reach one local upstream: directly, through
// a bare httputil.ReverseProxy (the baseline), and through the whole sluice
// gateway (auth from its cache, path checks, credential swap, usage tee). The
// proxies' own cost is each one's time minus the direct time.

const benchMessage = `{"id":"msg_1","type":"message","role":"assistant","model":"claude-sonnet-4-5","content":[{"type":"text","text":"Hello! How can I help you today?"}],"stop_reason":"end_turn","stop_sequence":null,"usage":{"input_tokens":12,"output_tokens":10}}`

// benchSSE is a 40-event Anthropic stream.
var benchSSE = func() string {
	var b strings.Builder
	b.WriteString("event: message_start\ndata: {\"type\":\"message_start\",\"message\":{\"id\":\"msg_1\",\"model\":\"claude-sonnet-4-5\",\"usage\":{\"input_tokens\":12,\"output_tokens\":1}}}\n\n")
	for range 40 {
		b.WriteString("event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":0,\"delta\":{\"type\":\"text_delta\",\"text\":\" token\"}}\n\n")
	}
	b.WriteString("event: message_delta\ndata: {\"type\":\"message_delta\",\"delta\":{\"stop_reason\":\"end_turn\"},\"usage\":{\"output_tokens\":40}}\n\nevent: message_stop\ndata: {\"type\":\"message_stop\"}\n\n")
	return b.String()
}()

type benchTargets struct {
	direct, proxy, sluice string
	key                   string
	client                *http.Client
}

func newBenchTargets(b *testing.B) *benchTargets {
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		if strings.HasSuffix(r.URL.Path, "/stream") {
			w.Header().Set("Content-Type", "text/event-stream")
			// Two writes with a flush between: the first byte leaves early.
			w.Write([]byte(benchSSE[:200]))
			w.(http.Flusher).Flush()
			w.Write([]byte(benchSSE[200:]))
			return
		}
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("Content-Length", fmt.Sprint(len(benchMessage)))
		w.Write([]byte(benchMessage))
	}))
	b.Cleanup(up.Close)

	target, _ := url.Parse(up.URL)
	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.MaxIdleConns, tr.MaxIdleConnsPerHost = 1024, 1024
	proxy := httptest.NewServer(&httputil.ReverseProxy{
		Rewrite:   func(r *httputil.ProxyRequest) { r.SetURL(target) },
		Transport: tr,
	})
	b.Cleanup(proxy.Close)

	g := gatewaytest.Start(b, gatewaytest.Backends()[0], gatewaytest.Options{
		Config: "passthrough:\n  anthropic: {api_base: " + up.URL + ", api_key: sk-ant-bench}\n",
	})
	_, key := g.TeamKey()

	ctr := http.DefaultTransport.(*http.Transport).Clone()
	ctr.MaxIdleConns, ctr.MaxIdleConnsPerHost = 1024, 1024
	return &benchTargets{direct: up.URL, proxy: proxy.URL, sluice: g.URL + "/anthropic", key: key, client: &http.Client{Transport: ctr}}
}

// call sends one Messages request and reads the whole answer; it returns the
// time to the first body byte and to the end.
func (bt *benchTargets) call(base, path string) (ttfb, total time.Duration, err error) {
	start := time.Now()
	req, _ := http.NewRequest("POST", base+path, strings.NewReader(`{"model":"claude-sonnet-4-5","max_tokens":64,"messages":[{"role":"user","content":"Hello"}]}`))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Anthropic-Version", "2023-06-01")
	req.Header.Set("X-Api-Key", bt.key)
	resp, err := bt.client.Do(req)
	if err != nil {
		return 0, 0, err
	}
	defer resp.Body.Close()
	var one [1]byte
	if _, err := io.ReadFull(resp.Body, one[:]); err != nil {
		return 0, 0, err
	}
	ttfb = time.Since(start)
	if _, err := io.Copy(io.Discard, resp.Body); err != nil {
		return 0, 0, err
	}
	if resp.StatusCode != 200 {
		return 0, 0, fmt.Errorf("status %d", resp.StatusCode)
	}
	return ttfb, time.Since(start), nil
}

// BenchmarkRelay measures throughput at saturation (all cores busy): ns/op
// of direct, proxy and sluice; the proxies' CPU per request is their ns/op
// minus direct's, times GOMAXPROCS.
func BenchmarkRelay(b *testing.B) {
	bt := newBenchTargets(b)
	for _, kind := range []struct{ name, path string }{{"json", "/v1/messages"}, {"sse", "/v1/messages/stream"}} {
		for _, t := range []struct{ name, base string }{{"direct", bt.direct}, {"proxy", bt.proxy}, {"sluice", bt.sluice}} {
			b.Run(kind.name+"/"+t.name, func(b *testing.B) {
				b.SetParallelism(32) // 32 × GOMAXPROCS clients: saturation
				b.ReportAllocs()
				b.RunParallel(func(pb *testing.PB) {
					for pb.Next() {
						if _, _, err := bt.call(t.base, kind.path); err != nil {
							b.Error(err)
							return
						}
					}
				})
			})
		}
	}
}

// BenchmarkAddedLatency runs interleaved rounds at concurrency 1 and 64 and
// reports, as medians over rounds, the latency each proxy adds to a direct
// call (p50, p99), and the time to first byte it adds on a stream.
func BenchmarkAddedLatency(b *testing.B) {
	bt := newBenchTargets(b)
	const rounds, perRound = 7, 300
	for _, conc := range []int{1, 64} {
		b.Run(fmt.Sprintf("c%d", conc), func(b *testing.B) {
			type stats struct{ p50, p99, ttfb []float64 }
			res := map[string]*stats{"direct": {}, "proxy": {}, "sluice": {}}
			for b.Loop() {
				for range rounds {
					for _, t := range []struct{ name, base string }{{"direct", bt.direct}, {"proxy", bt.proxy}, {"sluice", bt.sluice}} {
						lat, ttfb := measure(b, bt, t.base, conc, perRound)
						s := res[t.name]
						s.p50 = append(s.p50, pct(lat, 0.50))
						s.p99 = append(s.p99, pct(lat, 0.99))
						s.ttfb = append(s.ttfb, pct(ttfb, 0.50))
					}
				}
			}
			for _, name := range []string{"proxy", "sluice"} {
				b.ReportMetric(median(res[name].p50)-median(res["direct"].p50), name+"-added-p50-µs")
				b.ReportMetric(median(res[name].p99)-median(res["direct"].p99), name+"-added-p99-µs")
				b.ReportMetric(median(res[name].ttfb)-median(res["direct"].ttfb), name+"-added-ttfb-µs")
			}
		})
	}
}

// measure runs n calls at concurrency conc (half JSON, half streams) and
// returns their latencies and the streams' times to first byte, in µs.
func measure(b *testing.B, bt *benchTargets, base string, conc, n int) (lat, ttfb []float64) {
	var mu sync.Mutex
	var wg sync.WaitGroup
	work := make(chan int, n)
	for i := range n {
		work <- i
	}
	close(work)
	for range conc {
		wg.Go(func() {
			for i := range work {
				path := "/v1/messages"
				if i%2 == 1 {
					path = "/v1/messages/stream"
				}
				first, total, err := bt.call(base, path)
				if err != nil {
					b.Error(err)
					return
				}
				mu.Lock()
				lat = append(lat, float64(total.Microseconds()))
				if i%2 == 1 {
					ttfb = append(ttfb, float64(first.Microseconds()))
				}
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	return lat, ttfb
}

func pct(v []float64, p float64) float64 {
	if len(v) == 0 {
		return 0
	}
	s := slices.Clone(v)
	slices.Sort(s)
	return s[min(len(s)-1, int(p*float64(len(s))))]
}

func median(v []float64) float64 { return pct(v, 0.5) }
