// Package providers holds what every provider package shares: the tuned HTTP
// client sluice calls providers with, and the calls themselves — a JSON POST
// built (NewRequest), sent and its answer read whole for translating (Do) or
// handed over unread for relaying (Relay), a non-2xx answer read as a
// *models.ProviderError — and the check of a configured api_base (Base).
package providers

import (
	"net"
	"net/http"
	"time"
)

// NewHTTPClient returns the one HTTP client a process uses for provider
// calls. Per-call deadlines come from the request context (a deployment's
// timeout, a Lambda's deadline), so the client itself has no overall timeout:
// streamed answers may run long.
func NewHTTPClient() *http.Client {
	dialer := &net.Dialer{Timeout: 10 * time.Second, KeepAlive: 30 * time.Second}
	return &http.Client{
		Transport: &http.Transport{
			Proxy:                 http.ProxyFromEnvironment,
			DialContext:           dialer.DialContext,
			ForceAttemptHTTP2:     true,
			MaxIdleConns:          512,
			MaxIdleConnsPerHost:   256, // a gateway talks to few hosts, a lot
			IdleConnTimeout:       90 * time.Second,
			TLSHandshakeTimeout:   10 * time.Second,
			ExpectContinueTimeout: time.Second,
			ResponseHeaderTimeout: 0, // bounded by the request context instead
			// Bodies are relayed as they are; never ask for compression the
			// client did not ask for.
			DisableCompression: true,
		},
		// Providers do not redirect API calls; following one could leak the
		// injected credential to another host.
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
	}
}
