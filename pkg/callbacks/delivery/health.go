package delivery

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"strings"
	"sync"
	"syscall"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/sluice-gateway/sluice/pkg/callbacks"
	"github.com/sluice-gateway/sluice/pkg/store"
)

// The delivery health of team callbacks (callbacks.Delivery): each
// handler tallies its outcomes per team and callback, and the tallies of
// the handlers that finish while a flush is under way go out together in
// the next one (group commit, no linger), one transaction a flush: an idle
// worker writes once per message, a busy one far less often.
//
// Per delivery (one event for one callback):
//   - delivered: delivered +1, last delivered now;
//   - left for redelivery: retrying +1 on the receive that first leaves it
//     (receive 1), unchanged on later ones; last error;
//   - dead-lettered: dead_lettered +1; last error;
//   - on a later receive, an outcome other than "left again" takes it out
//     of retrying (−1).
//
// A re-driven dead letter (msg.Callback set) takes its deliveries out of
// dead_lettered on its first receive: they count again as whatever they
// become, so a re-drive that succeeds moves an event from dead-lettered
// to delivered, and one that fails again leaves the count as it was.
//
// The counts are best effort: a flush that fails is logged and dropped,
// never a reason to deliver again, and a handler that dies between its
// deliveries and its flush leaves retrying off by its events (shown never
// below zero).

// maxErrorExcerpt bounds the part of a destination's answer a team sees.
const maxErrorExcerpt = 200

type healthKey struct{ team, callback string }

// health is the group-committed writer of delivery health.
type health struct {
	records store.Records

	mu       sync.Mutex
	pending  *healthFlush
	flushing bool
}

type healthFlush struct {
	deltas map[healthKey]*callbacks.HealthDelta
	done   chan struct{}
}

// noteHealth tallies the outcomes of one handler's deliveries (those in dead
// were dead-lettered; the others that failed are left for redelivery) and
// waits until they are written, or ctx ends.
func (d *Deliverer) noteHealth(ctx context.Context, receives int, redriven bool, work, dead []*delivery) {
	buried := make(map[*delivery]bool, len(dead))
	for _, w := range dead {
		buried[w] = true
	}
	now := d.now().UTC()
	tally := map[healthKey]*callbacks.HealthDelta{}
	for _, w := range work {
		if w.cb.Gateway {
			continue // a gateway-wide callback belongs to no team
		}
		k := healthKey{team: w.ev.Metadata.UserAPIKeyTeamID, callback: w.id}
		t := tally[k]
		if t == nil {
			t = &callbacks.HealthDelta{}
			tally[k] = t
		}
		if redriven && receives == 1 {
			t.DeadLettered--
		}
		wasRetrying := receives > 1
		switch {
		case w.err == nil:
			t.Delivered++
			t.LastDeliveredAt = now
		case buried[w]:
			t.DeadLettered++
		case !wasRetrying:
			t.Retrying++
		}
		if w.err != nil {
			t.LastError, t.LastErrorAt = teamSafe(w.err), now
		}
		if wasRetrying && (w.err == nil || buried[w]) {
			t.Retrying--
		}
	}
	if len(tally) > 0 {
		d.health.add(ctx, tally)
	}
}

// add merges a tally into the pending flush and waits for it.
func (h *health) add(ctx context.Context, tally map[healthKey]*callbacks.HealthDelta) {
	h.mu.Lock()
	f := h.pending
	if f == nil {
		f = &healthFlush{deltas: map[healthKey]*callbacks.HealthDelta{}, done: make(chan struct{})}
		h.pending = f
	}
	for k, t := range tally {
		merge(f.deltas, k, t)
	}
	lead := !h.flushing
	h.flushing = true
	h.mu.Unlock()
	if lead {
		go h.run(context.WithoutCancel(ctx))
	}
	select {
	case <-f.done:
	case <-ctx.Done():
	}
}

// run writes pending flushes until none is left.
func (h *health) run(ctx context.Context) {
	for {
		h.mu.Lock()
		f := h.pending
		h.pending = nil
		if f == nil {
			h.flushing = false
			h.mu.Unlock()
			return
		}
		h.mu.Unlock()
		updates := make([]callbacks.HealthUpdate, 0, len(f.deltas))
		for k, t := range f.deltas {
			updates = append(updates, callbacks.HealthUpdate{TeamID: k.team, CallbackID: k.callback, Delta: *t})
		}
		fctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		if err := callbacks.WriteHealth(fctx, h.records, updates...); err != nil {
			slog.WarnContext(fctx, "callback delivery health not recorded", "callbacks", len(updates), "error", err)
		}
		cancel()
		close(f.done)
	}
}

func merge(into map[healthKey]*callbacks.HealthDelta, k healthKey, t *callbacks.HealthDelta) {
	m := into[k]
	if m == nil {
		c := *t
		into[k] = &c
		return
	}
	m.Delivered += t.Delivered
	m.Retrying += t.Retrying
	m.DeadLettered += t.DeadLettered
	if t.LastErrorAt.After(m.LastErrorAt) || t.LastErrorAt.Equal(m.LastErrorAt) && t.LastError != "" {
		m.LastError, m.LastErrorAt = t.LastError, t.LastErrorAt
	}
	if t.LastDeliveredAt.After(m.LastDeliveredAt) {
		m.LastDeliveredAt = t.LastDeliveredAt
	}
}

// teamSafe says what went wrong in words a team may read: the
// destination's status and a bounded excerpt of its answer, or the kind of
// failure — never a Go error's text, which can name types, addresses of
// the gateway's network or the request's URL.
func teamSafe(err error) string {
	var se *callbacks.StatusError
	var dns *net.DNSError
	var op *net.OpError
	switch {
	case errors.As(err, &se):
		msg := fmt.Sprintf("%s answered %d", se.Destination, se.Status)
		if ex := excerpt(se.Message); ex != "" {
			msg += ": " + ex
		}
		return msg
	case errors.Is(err, callbacks.ErrRefusedAddress):
		return "the destination's address is not allowed: it is not public and not in callback_settings.allow_hosts"
	case errors.Is(err, errAbandoned), errors.Is(err, context.DeadlineExceeded):
		return "the destination did not answer in time"
	case errors.As(err, &dns):
		return "the destination's host name could not be resolved"
	case errors.Is(err, syscall.ECONNREFUSED):
		return "the destination refused the connection"
	case errors.As(err, &op):
		return "the connection to the destination failed"
	case callbacks.IsPermanent(err):
		return "the event or the callback's settings were refused; the gateway's logs have the details"
	}
	return "the delivery failed; the gateway's logs have the details"
}

// excerpt is the start of s, printable, on one line, at most
// maxErrorExcerpt bytes.
func excerpt(s string) string {
	s = strings.Map(func(r rune) rune {
		if unicode.IsControl(r) || r == utf8.RuneError {
			return ' '
		}
		return r
	}, s)
	s = strings.Join(strings.Fields(s), " ")
	if len(s) <= maxErrorExcerpt {
		return s
	}
	cut := maxErrorExcerpt
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut] + "…"
}
