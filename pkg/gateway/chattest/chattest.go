// Package chattest runs chat completions end to end for the provider
// tests: a gateway (pkg/gateway/gatewaytest, on both storage backends) with a
// given config, a team key, and the official openai-go client pointed at
// it, streaming or not; the call's log event; and the raw HTTP answer for
// what a client library would hide.
//
// A provider's test starts its fake upstream (providertest.NewUpstream),
// writes a config whose deployments point at it, and runs:
//
//	chattest.Run(t, chattest.Options{Config: cfg}, func(t *testing.T, h *chattest.Harness) {
//		got, err := h.Client.Chat.Completions.New(ctx, params)
//		...
//		s, err := h.Stream(ctx, params) // chunks, the accumulated answer, the stream's error
//		ev := h.Event(t)                // the call's log event
//	})
//
// Provider packages import it from their external tests (package x_test):
// it imports the gateway, which imports them.
package chattest

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"testing"
	"time"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"

	"github.com/sluice-gateway/sluice/pkg/gateway/gatewaytest"
	"github.com/sluice-gateway/sluice/pkg/logevent"
	"github.com/sluice-gateway/sluice/pkg/store"
)

// EventsConfig is the config section that makes every call's log event
// reach the gateway's delivery queue (a gateway-wide callback, with the
// credentials it requires; nothing delivers from that queue in these
// tests), where Event reads it. Options.Config gets it appended unless it
// has a litellm_settings section of its own.
const EventsConfig = "litellm_settings:\n  callbacks: [langfuse]\n" +
	"environment_variables: {LANGFUSE_PUBLIC_KEY: pk-lf-test, LANGFUSE_SECRET_KEY: sk-lf-test, LANGFUSE_HOST: 'http://127.0.0.1:9'}\n"

// Options configure the gateway of a Run.
type Options struct {
	// Config is the YAML config (model_list pointing at the test's
	// upstreams).
	Config string
	// Env is what os.environ/ references in Config resolve against.
	Env map[string]string
}

// Harness is one running gateway with a team key and a client for it.
type Harness struct {
	Gateway *gatewaytest.Gateway
	// Key is a fresh team's key; Client uses it (no retries).
	Key    string
	Client openai.Client

	events *Events
}

// Run runs f once per storage backend, each with its own gateway and key.
func Run(t *testing.T, opts Options, f func(t *testing.T, h *Harness)) {
	cfg := opts.Config
	if !bytes.Contains([]byte(cfg), []byte("litellm_settings:")) {
		cfg += EventsConfig
	}
	gatewaytest.Run(t, gatewaytest.Options{Config: cfg, Env: opts.Env}, func(t *testing.T, g *gatewaytest.Gateway) {
		_, key := g.TeamKey()
		f(t, &Harness{Gateway: g, Key: key, Client: Client(g, key), events: NewEvents(g.Backend.Deliveries)})
	})
}

// Client returns an openai-go client of g with key, without retries.
func Client(g *gatewaytest.Gateway, key string) openai.Client {
	return openai.NewClient(option.WithBaseURL(g.URL+"/v1/"), option.WithAPIKey(key),
		option.WithHTTPClient(g.Client), option.WithMaxRetries(0))
}

// Streamed is what a streamed call gave the client.
type Streamed struct {
	// Chunks are the chunks in order (the usage chunk included when asked).
	Chunks []openai.ChatCompletionChunk
	// Completion is the answer the chunks add up to (openai-go's
	// accumulator).
	Completion openai.ChatCompletion
}

// Stream makes a streamed chat call and reads it to its end. The error is
// the stream's (an error event, a cut): the chunks before it are returned.
func (h *Harness) Stream(ctx context.Context, params openai.ChatCompletionNewParams) (Streamed, error) {
	s := h.Client.Chat.Completions.NewStreaming(ctx, params)
	defer s.Close()
	var (
		out Streamed
		acc openai.ChatCompletionAccumulator
	)
	for s.Next() {
		c := s.Current()
		out.Chunks = append(out.Chunks, c)
		acc.AddChunk(c)
	}
	out.Completion = acc.ChatCompletion
	return out, s.Err()
}

// Response is a raw HTTP answer.
type Response struct {
	Status int
	Header http.Header
	Body   []byte
	// ReadErr is why the body ended early: a stream cut after its final
	// error event (the gateway closes the connection without the last
	// chunk, so no client takes a cut stream for a whole one).
	ReadErr error
}

// Post sends body (JSON text) to path with the harness's key and returns
// the whole answer, as sent: what a client library does not show
// (headers, the exact events of a stream, the error body). A body cut
// short is returned as far as it came, with ReadErr.
func (h *Harness) Post(t testing.TB, path, body string) Response {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, h.Gateway.URL+path, bytes.NewReader([]byte(body)))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+h.Key)
	req.Header.Set("Content-Type", "application/json")
	resp, err := h.Gateway.Client.Do(req)
	if err != nil {
		t.Fatalf("POST %s: %v", path, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return Response{Status: resp.StatusCode, Header: resp.Header, Body: b, ReadErr: err}
}

// Event returns the next log event the gateway emitted (the config must
// have a callback: see EventsConfig), failing the test when none arrives
// within 20 s.
func (h *Harness) Event(t testing.TB) logevent.Event {
	t.Helper()
	return h.events.Next(t)
}

// Events reads the log events that reach a delivery queue, in the order
// they arrive. One message may carry several: the emitter groups the events
// emitted together. Delivery is at least once (SQS may hand a message out
// twice): an event already returned is not returned again.
type Events struct {
	q       store.Queue
	pending []*logevent.Event
	seen    map[string]bool
}

// NewEvents reads the log events of the delivery queue q.
func NewEvents(q store.Queue) *Events { return &Events{q: q, seen: map[string]bool{}} }

// Next returns the next log event, failing the test when none arrives
// within 20 s.
func (r *Events) Next(t testing.TB) logevent.Event {
	t.Helper()
	for {
		ev := r.next(t)
		if !r.seen[ev.ID] {
			r.seen[ev.ID] = true
			return ev
		}
	}
}

func (r *Events) next(t testing.TB) logevent.Event {
	t.Helper()
	ctx := context.Background()
	deadline := time.Now().Add(20 * time.Second)
	for len(r.pending) == 0 {
		if time.Now().After(deadline) {
			t.Fatal("no log event arrived")
		}
		msgs, err := r.q.Receive(ctx, 1, time.Second)
		if err != nil {
			t.Fatal(err)
		}
		if len(msgs) == 0 {
			continue
		}
		r.q.Ack(ctx, msgs[0])
		e, err := store.DecodeEvent(msgs[0])
		if err != nil {
			t.Fatal(err)
		}
		if r.pending, err = logevent.DecodeEvents(e.Body); err != nil {
			t.Fatal(err)
		}
	}
	ev := r.pending[0]
	r.pending = r.pending[1:]
	return *ev
}
