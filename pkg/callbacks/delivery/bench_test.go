package delivery

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"

	"github.com/sluice-gateway/sluice/pkg/callbacks"
	"github.com/sluice-gateway/sluice/pkg/logevent"
	"github.com/sluice-gateway/sluice/pkg/store"
	"github.com/sluice-gateway/sluice/pkg/store/local"
)

// BenchmarkHandle measures the delivery path to a local Langfuse-style
// sink: messages of one or ten events, handled by concurrent workers as
// store.Consume and SQS run them. It reports events delivered per second.
// (The performance figures of record come from make bench.)
func BenchmarkHandle(b *testing.B) {
	for _, perMessage := range []int{1, 10} {
		b.Run(fmt.Sprintf("events_per_message=%d", perMessage), func(b *testing.B) {
			h := newHarness(b, local.QueueOptions{})
			var events atomic.Int64
			sink := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				io.Copy(io.Discard, r.Body)
				events.Add(1)
				w.WriteHeader(http.StatusMultiStatus)
				w.Write([]byte(`{"successes":[],"errors":[]}`))
			}))
			defer sink.Close()
			h.add(b, "team-a", callbacks.Langfuse, callbacks.TypeSuccess, map[string]string{
				callbacks.VarLangfusePublicKey: "pk", callbacks.VarLangfuseSecretKey: "sk", callbacks.VarLangfuseHost: sink.URL})
			d := h.deliverer(b, Options{}, "")
			msgs := make([]store.Message, 64)
			for i := range msgs {
				evs := make([]*logevent.Event, perMessage)
				for k := range evs {
					evs[k] = event(fmtID(i*perMessage+k), "team-a", logevent.StatusSuccess)
				}
				msgs[i] = message(b, fmtID(i), 1, evs...)
			}
			var next atomic.Int64
			b.SetParallelism(8)
			b.ResetTimer()
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					if err := d.Handle(context.Background(), msgs[next.Add(1)%int64(len(msgs))]); err != nil {
						b.Error(err)
					}
				}
			})
			b.ReportMetric(float64(b.N*perMessage)/b.Elapsed().Seconds(), "events/s")
			b.ReportMetric(float64(d.Stats().Requests.Load())/float64(b.N), "requests/msg")
		})
	}
}
