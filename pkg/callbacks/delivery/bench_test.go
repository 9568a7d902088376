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

// accepting is a destination that takes every event at once.
type accepting struct{}

func (accepting) Send(_ context.Context, events []*logevent.Event) []error {
	return make([]error, len(events))
}

// BenchmarkHandleEventsInMemory measures what the delivery itself costs an
// event handed over in memory (the local process's path: plan, lanes,
// progress), without a destination's encoding or request: rounds of 200
// events, as a handoff under load gives it, reported per event.
func BenchmarkHandleEventsInMemory(b *testing.B) {
	h := newHarness(b, local.QueueOptions{})
	h.add(b, "team-a", callbacks.Langfuse, callbacks.TypeSuccess, map[string]string{
		callbacks.VarLangfusePublicKey: "pk", callbacks.VarLangfuseSecretKey: "sk", callbacks.VarLangfuseHost: "https://127.0.0.1"})
	d, err := New(Deps{Catalog: h.catalog, Records: h.backend.Records, Blobs: h.backend.Blobs, DeadLetters: h.backend.DeliveryDeadLetters,
		Open: func(context.Context, callbacks.Callback, map[string]string) (Destination, error) {
			return accepting{}, nil
		}}, Options{})
	if err != nil {
		b.Fatal(err)
	}
	const round = 200
	evs := make([]*logevent.Event, round)
	for k := range evs {
		evs[k] = event(fmtID(k), "team-a", logevent.StatusSuccess)
	}
	m := store.Message{ID: "m", Receives: 1}
	var rounds int
	for b.Loop() {
		if err := d.HandleEvents(context.Background(), m, evs); err != nil {
			b.Fatal(err)
		}
		rounds++
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(rounds*round), "ns/event")
}
