package delivery

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strings"
	"syscall"
	"testing"

	"github.com/sluice-gateway/sluice/pkg/callbacks"
)

// TestTeamSafe: the error a team reads names the destination's answer or
// the kind of failure, bounded, on one line — never the Go error's text.
func TestTeamSafe(t *testing.T) {
	for _, tc := range []struct {
		name string
		err  error
		want string
	}{
		{"status with an excerpt", fmt.Errorf("Langfuse ingestion: %w", &callbacks.StatusError{Destination: "Langfuse", Status: 503, Message: "busy\r\n\tnow"}),
			"Langfuse answered 503: busy now"},
		{"permanent status", callbacks.Permanent(&callbacks.StatusError{Destination: "LangSmith", Status: 401}), "LangSmith answered 401"},
		{"long body", &callbacks.StatusError{Destination: "GCS", Status: 500, Message: strings.Repeat("é", 300)},
			"GCS answered 500: " + strings.Repeat("é", 100) + "…"},
		{"refused address", fmt.Errorf("Post %q: %w: 10.0.0.1 is not public", "http://10.0.0.1/x", callbacks.ErrRefusedAddress),
			"the destination's address is not allowed: it is not public and not in callback_settings.allow_hosts"},
		{"abandoned", fmt.Errorf("%w: %w", errAbandoned, context.DeadlineExceeded), "the destination did not answer in time"},
		{"dns", fmt.Errorf("Post: %w", &net.DNSError{Err: "no such host", Name: "lf.example"}), "the destination's host name could not be resolved"},
		{"refused connection", fmt.Errorf("Post: %w", &net.OpError{Op: "dial", Err: syscall.ECONNREFUSED}), "the destination refused the connection"},
		{"permanent other", callbacks.Permanent(errors.New("json: cannot unmarshal string into Go value of type langfuse.body")),
			"the event or the callback's settings were refused; the gateway's logs have the details"},
		{"other", errors.New("*url.Error: secret-ish"), "the delivery failed; the gateway's logs have the details"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := teamSafe(tc.err); got != tc.want {
				t.Errorf("teamSafe = %q, want %q", got, tc.want)
			}
		})
	}
}
