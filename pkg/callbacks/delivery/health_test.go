package delivery

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/sluice-gateway/sluice/pkg/callbacks"
	"github.com/sluice-gateway/sluice/pkg/logevent"
	"github.com/sluice-gateway/sluice/pkg/store"
	"github.com/sluice-gateway/sluice/pkg/store/local"
)

// writeCounting counts the transactions and single writes made through it.
type writeCounting struct {
	store.Records
	writes atomic.Int64
}

func (r *writeCounting) Transact(ctx context.Context, writes []store.Write) error {
	r.writes.Add(1)
	return r.Records.Transact(ctx, writes)
}

func (r *writeCounting) Add(ctx context.Context, key store.Key, deltas map[string]int64, cond store.Cond) (map[string]int64, error) {
	r.writes.Add(1)
	return r.Records.Add(ctx, key, deltas, cond)
}

func (r *writeCounting) Put(ctx context.Context, rec store.Record, cond store.Cond) error {
	r.writes.Add(1)
	return r.Records.Put(ctx, rec, cond)
}

// TestHealthIsGroupCommitted: concurrent handlers' outcomes are all
// counted, in far fewer writes than handlers.
func TestHealthIsGroupCommitted(t *testing.T) {
	h := newHarness(t, local.QueueOptions{})
	in := newIngestion(t)
	in.fail = func(int) (int, time.Duration, bool) { return http.StatusMultiStatus, 5 * time.Millisecond, true }
	h.add(t, "team-a", callbacks.Langfuse, callbacks.TypeSuccess, in.vars())
	records := &writeCounting{Records: h.backend.Records}
	d, err := New(Deps{Catalog: h.catalog, Records: records, Blobs: h.backend.Blobs, DeadLetters: h.backend.DeliveryDeadLetters,
		Open: NewOpener(OpenerDeps{Client: h.guard.Client(), Accounts: h.accounts})}, Options{})
	if err != nil {
		t.Fatal(err)
	}
	const messages = 200
	var wg sync.WaitGroup
	for i := range messages {
		wg.Go(func() {
			if err := d.Handle(context.Background(), message(t, fmtID(i), 1, event(fmtID(i), "team-a", logevent.StatusSuccess))); err != nil {
				t.Error(err)
			}
		})
	}
	wg.Wait()
	got, err := callbacks.ReadHealth(context.Background(), h.backend.Records, "team-a")
	if err != nil {
		t.Fatal(err)
	}
	if hl := got["langfuse#success"]; hl.Delivered != messages || hl.Retrying != 0 || hl.DeadLettered != 0 || hl.LastDeliveredAt == nil || hl.LastErrorAt != nil {
		t.Errorf("health after %d deliveries: %+v", messages, hl)
	}
	if n := records.writes.Load(); n == 0 || n > messages/4 {
		t.Errorf("%d writes for %d concurrent handlers: not group-committed", n, messages)
	}
	t.Logf("%d writes for %d concurrent handlers", records.writes.Load(), messages)
}

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
