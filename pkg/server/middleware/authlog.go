package middleware

import (
	"context"
	"log/slog"
	"net"
	"net/http"
	"sync"
	"time"

	"github.com/sluice-gateway/sluice/pkg/api"
	"github.com/sluice-gateway/sluice/pkg/auth"
)

// Failed authentications are logged at most authLogBurst times per
// authLogWindow: enough to see who is knocking, not enough for a flood of
// bad keys to flood the log.
const (
	authLogBurst  = 10
	authLogWindow = time.Second
	// keyHashShown is how much of a key's SHA-256 (hex) is logged: enough to
	// tell keys apart, far too little to look one up.
	keyHashShown = 8
)

// authFailureLog logs failed authentications (401s): at info, rate-limited,
// with the client's address and the first characters of the key's hash,
// never the key. A line after a quiet spell counts the lines left out.
type authFailureLog struct {
	now func() time.Time

	mu         sync.Mutex
	window     time.Time // start of the current window
	logged     int       // lines in the current window
	suppressed int       // lines left out since the last one logged
}

func newAuthFailureLog(now func() time.Time) *authFailureLog {
	if now == nil {
		now = time.Now
	}
	return &authFailureLog{now: now}
}

func (l *authFailureLog) record(ctx context.Context, r *http.Request, key string, err error) {
	e := api.AsError(err)
	if e.Status != http.StatusUnauthorized {
		return
	}
	l.mu.Lock()
	now := l.now()
	if now.Sub(l.window) >= authLogWindow {
		l.window, l.logged = now, 0
	}
	if l.logged >= authLogBurst {
		l.suppressed++
		l.mu.Unlock()
		return
	}
	l.logged++
	suppressed := l.suppressed
	l.suppressed = 0
	l.mu.Unlock()

	attrs := []any{"client", clientAddr(r), "method", r.Method, "path", r.URL.Path, "reason", e.Message}
	if key != "" {
		attrs = append(attrs, "key_hash_prefix", auth.Token(key)[:keyHashShown])
	}
	if suppressed > 0 {
		attrs = append(attrs, "suppressed", suppressed)
	}
	slog.InfoContext(ctx, "authentication failed", attrs...)
}

// clientAddr is the client's IP address: the peer locally, API Gateway's
// source IP in Lambda (never a forwarding header a client can write).
func clientAddr(r *http.Request) string {
	if host, _, err := net.SplitHostPort(r.RemoteAddr); err == nil {
		return host
	}
	return r.RemoteAddr
}
