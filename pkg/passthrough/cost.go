package passthrough

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"time"

	"github.com/sluice-gateway/sluice/pkg/api"
	"github.com/sluice-gateway/sluice/pkg/logevent"
	"github.com/sluice-gateway/sluice/pkg/modelcall"
	"github.com/sluice-gateway/sluice/pkg/relaybuf"
)

// costHeaderKey is modelcall.CostHeader canonical, so that setting it does
// not canonicalise it anew on every call.
var costHeaderKey = http.CanonicalHeaderKey(modelcall.CostHeader)

// readsWhole reports whether an answer is read whole before it is written,
// so that its cost can go in its headers, as the model endpoints do
// (modelcall): a successful answer that does not stream, of known length up
// to the relay buffer. A stream's headers leave before its usage exists,
// and a larger answer is relayed as it arrives (the memory bound): neither
// has the header; their cost is in the log event.
func readsWhole(r *http.Request, resp *http.Response, c *call) bool {
	return !c.streamed && resp.StatusCode/100 == 2 && r.Method != http.MethodHead &&
		resp.ContentLength > 0 && resp.ContentLength <= relaybuf.Size
}

// answerWhole relays an answer readsWhole admits: it reads it into the
// relay buffer, meters it, prices the call with the log event's pricer, and
// writes the status, the headers with the cost, and the body in one write.
func (s *Service) answerWhole(w http.ResponseWriter, r *http.Request, ctx context.Context, watch *watchdog, resp *http.Response, c *call, mt string) error {
	watch.answering(s.opts.IdleTimeout)
	bp := s.buffers.Get()
	defer s.buffers.Put(bp)
	body := (*bp)[:resp.ContentLength]
	for read := 0; read < len(body); {
		n, rerr := resp.Body.Read(body[read:])
		if n > 0 {
			watch.read()
			if c.first.IsZero() {
				c.first = time.Now()
			}
			read += n
		}
		if rerr == io.EOF && read < len(body) {
			rerr = io.ErrUnexpectedEOF
		}
		if rerr != nil && rerr != io.EOF {
			// Nothing was written: the client gets the error, not a
			// truncated answer.
			return s.readError(r, ctx, rerr)
		}
		if rerr == io.EOF {
			break
		}
	}
	meterWhole(mt, body, &c.counts)

	h := w.Header()
	copyResponseHeader(h, resp.Header, c.secrets)
	// Only sluice's own cost: never an upstream's header of that name.
	delete(h, costHeaderKey)
	if cost, ok := s.quote(r.Context(), c); ok {
		h[costHeaderKey] = []string{strconv.FormatFloat(cost, 'g', -1, 64)}
	}
	c.status = resp.StatusCode
	w.WriteHeader(resp.StatusCode)
	if _, werr := w.Write(body); werr != nil {
		if r.Context().Err() != nil {
			return fmt.Errorf("passthrough: client gone: %w", context.Canceled)
		}
		return fmt.Errorf("write answer: %w", werr)
	}
	return nil
}

// quote is what the call costs, priced as its log event will be: from the
// event itself, built here once (finish completes and emits it). No pricer
// (nobody wants the event, or spend is off): no cost.
func (s *Service) quote(ctx context.Context, c *call) (float64, bool) {
	if !s.opts.Events.Wants(ctx, c.principal.TeamID, logevent.StatusSuccess) {
		return 0, false
	}
	return s.opts.Events.Quote(c.logEvent(ctx))
}

// logEvent is the call's log event with what prices it — its model and
// tokens — set from what the call has seen; built on first use, by the
// cost header's quote or by finish.
func (c *call) logEvent(ctx context.Context) *logevent.Event {
	if c.event == nil {
		c.event = new(callEvent)
		c.event.ev.Reset(ctx, c.principal, logevent.CallPassthrough)
	}
	ev := &c.event.ev
	u := c.counts.usage()
	ev.PromptTokens, ev.CompletionTokens, ev.TotalTokens = u.PromptTokens, u.CompletionTokens, u.TotalTokens
	ev.CachedTokens = u.PromptTokensDetails.CachedTokens // priced at the cached-input price
	ev.Model = c.model
	if ev.Model == "" {
		ev.Model = c.counts.model
	}
	return ev
}

// readError classifies a failure to read the upstream's answer.
func (s *Service) readError(r *http.Request, ctx context.Context, rerr error) error {
	switch cause := context.Cause(ctx); {
	case r.Context().Err() != nil:
		return fmt.Errorf("passthrough: client gone: %w", context.Canceled)
	case errors.Is(cause, errIdleTimeout):
		return api.UpstreamTimeout(rerr, "The provider sent nothing for %s.", s.opts.IdleTimeout)
	case errors.Is(cause, errCallTimeout):
		return api.UpstreamTimeout(rerr, "The provider's answer took longer than %s.", s.opts.Timeout)
	}
	return api.Upstream(rerr, "The provider's answer broke off: reading it failed.")
}
