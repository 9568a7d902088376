package gateway

import (
	"log/slog"
	"sync/atomic"
	"time"

	"github.com/sluice-gateway/sluice/pkg/api"
)

// budgetRetryAfter is what a request refused for want of body budget is
// told to wait: bodies held whole live as long as their calls, seconds.
const budgetRetryAfter = time.Second

// bodyBudget bounds the bytes of request bodies the process's handlers hold
// whole in memory at once: model calls' bodies, the passthrough bodies read
// before they are sent, JSON being decoded. Each request body charges it
// what its reader holds (api.BodyBudget), so that slow clients, however
// many, cannot make the process hold more than limit; beyond it, a read
// fails with 503 and Retry-After.
type bodyBudget struct {
	limit int64
	used  atomic.Int64

	// Refusals are load shed by design, and any key can cause them: they
	// are logged at WARN, one line per refusalLogEvery with their count,
	// never a line per refusal.
	refused atomic.Int64 // since the last line
	logged  atomic.Int64 // when the last line was written (unix nanos)
}

// refusalLogEvery is the most often a line about budget refusals is logged.
const refusalLogEvery = 10 * time.Second

func newBodyBudget(limit int64) *bodyBudget { return &bodyBudget{limit: limit} }

// noteRefusal counts a refusal, and logs the count at most once per
// refusalLogEvery.
func (b *bodyBudget) noteRefusal() {
	b.refused.Add(1)
	now := time.Now().UnixNano()
	last := b.logged.Load()
	if now-last < int64(refusalLogEvery) || !b.logged.CompareAndSwap(last, now) {
		return
	}
	slog.Warn("request bodies refused with 503: the gateway holds as many request bodies in memory as SLUICE_MAX_BUFFERED_BODY_BYTES allows",
		"refused", b.refused.Swap(0), "budget_bytes", b.limit, "every", refusalLogEvery.String())
}

// take charges n bytes, or reports that the budget cannot hold them now.
func (b *bodyBudget) take(n int64) bool {
	for {
		used := b.used.Load()
		if used+n > b.limit {
			return false
		}
		if b.used.CompareAndSwap(used, used+n) {
			return true
		}
	}
}

func (b *bodyBudget) give(n int64) { b.used.Add(-n) }

// Charge charges the process's body budget n bytes more for this body
// (api.BodyBudget); refundAll gives them back when its request ends.
func (b *progressBody) Charge(n int64) error {
	if b.bodies == nil || n <= 0 {
		return nil
	}
	if b.charged.Load()+n > b.bodies.limit {
		return api.TooLarge("The request body is larger than this gateway holds in memory for one request (%d bytes).", b.bodies.limit)
	}
	if !b.bodies.take(n) {
		b.bodies.noteRefusal()
		e := api.Unavailable("The gateway is holding as many request bodies in memory as it may; retry shortly.")
		e.RetryAfter = budgetRetryAfter
		e.Quiet = true
		return e
	}
	b.charged.Add(n)
	return nil
}

// refundAll gives back what the body still holds: its request has ended.
func (b *progressBody) refundAll() {
	if b.bodies != nil {
		b.bodies.give(b.charged.Swap(0))
	}
}
