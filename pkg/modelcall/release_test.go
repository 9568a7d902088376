package modelcall

import (
	"context"
	"io"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/sluice-gateway/sluice/pkg/logevent"
	"github.com/sluice-gateway/sluice/pkg/oai"
)

// keeper is an Observer that keeps the events it sees, as the delivery
// pipeline does until it has counted and delivered them.
type keeper struct{ events []*logevent.Event }

func (k *keeper) ObserveEvent(_ context.Context, ev *logevent.Event) { k.events = append(k.events, ev) }

// An emitted event lives on until it is delivered, but what the call held
// of its request (the provider's answer, its meter, the caller's context)
// does not: the collector frees them while the event is still held.
func TestEmittedEventDoesNotKeepTheRequest(t *testing.T) {
	for _, tc := range []struct {
		name string
		end  func(t *testing.T, c *Call, body io.ReadCloser, m Meter)
	}{
		{"answered", func(t *testing.T, c *Call, body io.ReadCloser, m Meter) {
			if _, err := c.Answer(body, -1, m).WriteTo(io.Discard); err != nil {
				t.Fatal(err)
			}
		}},
		{"closed", func(t *testing.T, c *Call, body io.ReadCloser, m Meter) { c.Answer(body, -1, m).Close() }},
		{"failed", func(t *testing.T, c *Call, body io.ReadCloser, m Meter) { c.Fail(io.ErrUnexpectedEOF) }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			calls, _, _ := newCalls()
			k := &keeper{}
			calls.events.Observe(k)
			freed := make(chan string, 3)
			func() {
				ctx, cancel := context.WithCancel(context.Background())
				defer cancel()
				body := &closeCounter{Reader: strings.NewReader(`{}`)}
				m := &pointerMeter{}
				runtime.AddCleanup(body, func(s string) { freed <- s }, "body")
				runtime.AddCleanup(m, func(s string) { freed <- s }, "meter")
				ctx = context.WithValue(ctx, pointerMeter{}, m) // the context reaches the meter too
				tc.end(t, calls.Begin(ctx, teamKey, logevent.CallEmbedding), body, m)
			}()
			got := map[string]bool{}
			deadline := time.Now().Add(5 * time.Second)
			for len(got) < 2 && time.Now().Before(deadline) {
				runtime.GC()
				select {
				case s := <-freed:
					got[s] = true
				case <-time.After(10 * time.Millisecond):
				}
			}
			if len(k.events) != 1 {
				t.Fatalf("%d events emitted", len(k.events))
			}
			if !got["body"] || !got["meter"] {
				t.Errorf("freed %v while the event is held; want the body and the meter", got)
			}
			runtime.KeepAlive(k.events)
		})
	}
}

// pointerMeter is a Meter allocated on its own (a fixedMeter is a value).
type pointerMeter struct{ _ [16]byte }

func (*pointerMeter) Write(p []byte) (int, error)            { return len(p), nil }
func (*pointerMeter) End(*logevent.Event) (oai.Usage, error) { return oai.Usage{}, nil }
