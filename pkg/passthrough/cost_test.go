package passthrough

import (
	"context"
	"math"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/sluice-gateway/sluice/pkg/logevent"
	"github.com/sluice-gateway/sluice/pkg/relaybuf"
)

// tokenPricer prices every model at one price per input and per output
// token (pkg/spend.Pricer's contract).
type tokenPricer struct{ in, out float64 }

func (p tokenPricer) Quote(ev *logevent.Event) (float64, bool) {
	return float64(ev.PromptTokens)*p.in + float64(ev.CompletionTokens)*p.out, true
}

func (p tokenPricer) Price(_ context.Context, ev *logevent.Event) {
	ev.ResponseCost, _ = p.Quote(ev)
}

func pricedHarness(t *testing.T, up *upstreamRecorder) *harness {
	return newHarness(t, allPrefixes(up.srv.URL), nil, func(o *Options) { o.Events.SetPricer(tokenPricer{in: 1e-6, out: 2e-6}) })
}

// anthropicAnswer is a Messages answer of 12 input and 10 output tokens,
// padded with pad bytes of text.
func anthropicAnswer(pad int) string {
	return `{"id":"msg_1","type":"message","role":"assistant","model":"claude-sonnet-4-5","content":[{"type":"text","text":"` +
		strings.Repeat("x", pad) + `"}],"stop_reason":"end_turn","usage":{"input_tokens":12,"output_tokens":10}}`
}

const answerCost = 12*1e-6 + 10*2e-6

// The cost header is set on answers read whole — successful, not streamed,
// of known length up to the relay buffer — and equals the log event's
// response_cost; every other answer is relayed as it arrives, without it,
// and its log event has the cost. An upstream's own header of that name is
// never relayed on an answer sluice prices.
func TestCostHeaderOnlyOnSmallWholeAnswers(t *testing.T) {
	for _, c := range []struct {
		name, contentType, body string
		status                  int
		chunked                 bool
		header                  bool
		cost                    float64
	}{
		{name: "small json", contentType: contentJSON, body: anthropicAnswer(10), status: 200, header: true, cost: answerCost},
		{name: "json at the buffer", contentType: contentJSON, body: anthropicAnswer(relaybuf.Size - len(anthropicAnswer(0))), status: 200, header: true, cost: answerCost},
		{name: "json over the buffer", contentType: contentJSON, body: anthropicAnswer(relaybuf.Size + 1), status: 200, cost: answerCost},
		{name: "json of unknown length", contentType: contentJSON, body: anthropicAnswer(10), status: 200, chunked: true, cost: answerCost},
		{name: "sse", contentType: contentSSE, body: anthropicSSE, status: 200, cost: 30*1e-6 + 15*2e-6},
		{name: "error", contentType: contentJSON, body: `{"type":"error","error":{"type":"invalid_request_error","message":"bad"}}`, status: 400},
	} {
		t.Run(c.name, func(t *testing.T) {
			up := newUpstream(t, func(w http.ResponseWriter, r *http.Request, body []byte) {
				w.Header().Set("Content-Type", c.contentType)
				if c.header {
					w.Header().Set("X-Litellm-Response-Cost", "99") // replaced by sluice's
				}
				if !c.chunked {
					w.Header().Set("Content-Length", strconv.Itoa(len(c.body)))
				}
				w.WriteHeader(c.status)
				if c.chunked {
					w.(http.Flusher).Flush() // no length: the headers leave first
				}
				w.Write([]byte(c.body))
			})
			h := pricedHarness(t, up)
			resp, body := h.do(t, "POST", "/anthropic/v1/messages", strings.NewReader(`{"model":"claude-sonnet-4-5"}`))
			if resp.StatusCode != c.status || string(body) != c.body {
				t.Fatalf("answer %d of %d bytes, want %d and the upstream's %d bytes", resp.StatusCode, len(body), c.status, len(c.body))
			}
			ev := eventually(t, h.bus)
			if math.Abs(ev.ResponseCost-c.cost) > 1e-12 {
				t.Errorf("log event's response_cost %v, want %v", ev.ResponseCost, c.cost)
			}
			got := resp.Header.Values("X-Litellm-Response-Cost")
			switch {
			case c.header && (len(got) != 1 || got[0] != strconv.FormatFloat(ev.ResponseCost, 'g', -1, 64)):
				t.Errorf("x-litellm-response-cost %q, want the log event's %v", got, ev.ResponseCost)
			case !c.header && len(got) != 0:
				t.Errorf("x-litellm-response-cost %q on an answer sluice does not price before relaying it", got)
			}
		})
	}
}

// A small answer read whole that breaks off before its declared length is
// an error the client sees as such (502), not a truncated answer with a
// cost.
func TestASmallAnswerThatBreaksOffIsAnError(t *testing.T) {
	up := newUpstream(t, func(w http.ResponseWriter, r *http.Request, body []byte) {
		w.Header().Set("Content-Type", contentJSON)
		w.Header().Set("Content-Length", "1000")
		w.WriteHeader(200)
		w.Write([]byte(`{"id":"msg_1",`))
		w.(http.Flusher).Flush()
		conn, _, err := http.NewResponseController(w).Hijack()
		if err == nil {
			conn.Close()
		}
	})
	h := pricedHarness(t, up)
	resp, body := h.do(t, "POST", "/anthropic/v1/messages", strings.NewReader(`{}`))
	if resp.StatusCode != http.StatusBadGateway || resp.Header.Get("X-Litellm-Response-Cost") != "" {
		t.Fatalf("answer %d %q with cost %q, want a 502 error without a cost", resp.StatusCode, body, resp.Header.Get("X-Litellm-Response-Cost"))
	}
	errorCode(t, body)
	if ev := eventually(t, h.bus); ev.Status != logevent.StatusFailure || ev.Passthrough.StatusCode != http.StatusBadGateway {
		t.Errorf("log event status %q, passthrough status %d: want a failure of 502", ev.Status, ev.Passthrough.StatusCode)
	}
}

// An answer's cache reads reach its log event, so that they are priced at
// the cached-input price (Anthropic counts them apart from input_tokens).
func TestCacheReadsAreInTheLogEvent(t *testing.T) {
	answer := `{"id":"msg_1","type":"message","role":"assistant","content":[{"type":"text","text":"hi"}],"stop_reason":"end_turn",` +
		`"usage":{"input_tokens":12,"cache_creation_input_tokens":5,"cache_read_input_tokens":100,"output_tokens":10}}`
	up := newUpstream(t, func(w http.ResponseWriter, r *http.Request, body []byte) {
		w.Header().Set("Content-Type", contentJSON)
		w.Write([]byte(answer))
	})
	h := pricedHarness(t, up)
	if resp, body := h.do(t, "POST", "/anthropic/v1/messages", strings.NewReader(`{"model":"claude-sonnet-4-5"}`)); resp.StatusCode != 200 {
		t.Fatalf("answer %d %s", resp.StatusCode, body)
	}
	ev := eventually(t, h.bus)
	if ev.PromptTokens != 117 || ev.CachedTokens != 100 || ev.CompletionTokens != 10 {
		t.Errorf("log event prompt %d (cached %d), completion %d: want 117 (100 cached) and 10", ev.PromptTokens, ev.CachedTokens, ev.CompletionTokens)
	}
}

// eventually is the last log event, once there is one: the client may read
// the whole answer before the handler has emitted it.
func eventually(t *testing.T, bus *eventBus) logevent.Event {
	t.Helper()
	for deadline := time.Now().Add(5 * time.Second); len(bus.all()) == 0 && time.Now().Before(deadline); {
		time.Sleep(5 * time.Millisecond)
	}
	return bus.last(t)
}
