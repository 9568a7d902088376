package auth

import (
	"context"
	"fmt"
	"math"
	"time"

	"github.com/sluice-gateway/sluice/pkg/api"
	"github.com/sluice-gateway/sluice/pkg/store"
)

// limitWindow is the window of rpm and tpm limits.
const limitWindow = time.Minute

type limit struct {
	scope string // e.g. "key:<token>:rpm"
	what  string // for the message: "key", "team"
	max   int64
}

// limits returns the key's and team's limits of kind ("rpm" or "tpm"). Most
// keys have none, so the common case allocates nothing.
func (p Principal) limits(kind string) []limit {
	var out []limit
	if p.Key != nil {
		if v := pick(kind, p.Key.RPMLimit, p.Key.TPMLimit); v > 0 {
			out = append(out, limit{scope: "key:" + p.Key.Token + ":" + kind, what: "key", max: v})
		}
	}
	if p.Team != nil {
		if v := pick(kind, p.Team.RPMLimit, p.Team.TPMLimit); v > 0 {
			out = append(out, limit{scope: "team:" + p.Team.TeamID + ":" + kind, what: "team", max: v})
		}
	}
	return out
}

// pick returns the rpm or tpm limit, 0 when unset.
func pick(kind string, rpm, tpm *int64) int64 {
	v := tpm
	if kind == "rpm" {
		v = rpm
	}
	if v == nil {
		return 0
	}
	return *v
}

// Admit counts one request against the key's and team's rpm limits and
// checks that their tpm windows have room; a full window is a 429. Limits
// are shared by every process through the limiter.
func (s *Service) Admit(ctx context.Context, p Principal) error {
	for _, l := range p.limits("rpm") {
		if err := s.take(ctx, l, 1, api.TypeRequests, "requests per minute"); err != nil {
			return err
		}
	}
	// A tpm window already full refuses the call: checked with a read (a
	// take of nothing that wants one token of room), not a write — a
	// metered call's store operations are most of what it costs beyond
	// Lambda and API Gateway. RecordTokens adds the tokens once the usage
	// is known.
	for _, l := range p.limits("tpm") {
		if err := s.take(ctx, l, 0, api.TypeTokens, "tokens per minute"); err != nil {
			return err
		}
	}
	return nil
}

// take takes n units from l's window; n = 0 only checks that the window has
// room for one more unit.
func (s *Service) take(ctx context.Context, l limit, n int64, typ, unit string) error {
	limit := l.max
	if n == 0 {
		limit--
	}
	d, err := s.limiter.Take(ctx, l.scope, limitWindow, limit, n)
	if err != nil {
		return fmt.Errorf("rate limit %s: %w", l.scope, err)
	}
	if !d.Allowed {
		return api.RateLimited(typ, d.RetryAfter, "Rate limit reached: this %s allows %d %s. Retry after %s.",
			l.what, l.max, unit, d.RetryAfter.Round(time.Second))
	}
	return nil
}

// RecordTokens counts a finished call's tokens against the tpm limits (the
// call was already admitted, so the count may pass the limit: the next call
// is refused until the window turns).
func (s *Service) RecordTokens(ctx context.Context, p Principal, tokens int64) error {
	if tokens <= 0 {
		return nil
	}
	for _, l := range p.limits("tpm") {
		if _, err := s.limiter.Take(ctx, l.scope, limitWindow, math.MaxInt64, tokens); err != nil {
			return fmt.Errorf("record tokens %s: %w", l.scope, err)
		}
	}
	return nil
}

// Limiter returns the limiter the service counts with (the router shares it
// for deployment limits).
func (s *Service) Limiter() store.Limiter { return s.limiter }
