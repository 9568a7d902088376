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

// scopeLimits is one scope's rpm and tpm limits (0: none): both
// counters live in one limiter item per window, so a call takes one write
// a scope at admission, however many of its limits are set.
type scopeLimits struct {
	scope    string // "key:<token>" or "team:<id>"
	what     string // for the message: "key", "team"
	rpm, tpm int64
}

// limits returns the key's and team's limits; scopes without any are left
// out. Most keys have none, so the common case allocates nothing (a scope's
// name is built only for a scope with limits).
func (p Principal) limits() []scopeLimits {
	var out []scopeLimits
	if k := p.Key; k != nil {
		if rpm, tpm := deref(k.RPMLimit), deref(k.TPMLimit); rpm > 0 || tpm > 0 {
			out = append(out, scopeLimits{scope: "key:" + k.Token, what: "key", rpm: rpm, tpm: tpm})
		}
	}
	if t := p.Team; t != nil {
		if rpm, tpm := deref(t.RPMLimit), deref(t.TPMLimit); rpm > 0 || tpm > 0 {
			out = append(out, scopeLimits{scope: "team:" + t.TeamID, what: "team", rpm: rpm, tpm: tpm})
		}
	}
	return out
}

func deref(v *int64) int64 {
	if v == nil {
		return 0
	}
	return *v
}

// Limit counters: a window's requests and tokens.
const (
	CounterRequests = "rpm"
	CounterTokens   = "tpm"
)

// AdmitTakes is what admitting one request takes from a scope with rpm and
// tpm limits (0: none): the request, counted against rpm, and room for one
// more token checked against tpm — a check, not a take: the call's tokens
// are added once its usage is known. Both in one take, one write.
func AdmitTakes(rpm, tpm int64) []store.Take {
	takes := make([]store.Take, 0, 2)
	if rpm > 0 {
		takes = append(takes, store.Take{Counter: CounterRequests, Limit: rpm, N: 1})
	}
	if tpm > 0 {
		takes = append(takes, store.Take{Counter: CounterTokens, Limit: tpm - 1})
	}
	return takes
}

// TokensTake adds a finished call's tokens to a scope's tpm counter (the
// call was already admitted, so the count may pass the limit: the next
// call is refused until the window turns).
func TokensTake(tokens int64) store.Take {
	return store.Take{Counter: CounterTokens, Limit: math.MaxInt64, N: tokens}
}

// Admit counts one request against the key's and team's rpm limits and
// checks that their tpm windows have room: one limiter take a scope. A
// full window is a 429. Limits are shared by every process through the
// limiter.
func (s *Service) Admit(ctx context.Context, p Principal) error {
	for _, l := range p.limits() {
		d, err := s.limiter.Take(ctx, l.scope, limitWindow, AdmitTakes(l.rpm, l.tpm)...)
		if err != nil {
			return fmt.Errorf("rate limit %s: %w", l.scope, err)
		}
		if d.Allowed {
			continue
		}
		typ, unit, max := api.TypeRequests, "requests per minute", l.rpm
		if d.Refused == CounterTokens {
			typ, unit, max = api.TypeTokens, "tokens per minute", l.tpm
		}
		return api.RateLimited(typ, d.RetryAfter, "Rate limit reached: this %s allows %d %s. Retry after %s.",
			l.what, max, unit, d.RetryAfter.Round(time.Second))
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
	for _, l := range p.limits() {
		if l.tpm <= 0 {
			continue
		}
		if _, err := s.limiter.Take(ctx, l.scope, limitWindow, TokensTake(tokens)); err != nil {
			return fmt.Errorf("record tokens %s: %w", l.scope, err)
		}
	}
	return nil
}

// Limiter returns the limiter the service counts with (the router shares it
// for deployment limits).
func (s *Service) Limiter() store.Limiter { return s.limiter }
