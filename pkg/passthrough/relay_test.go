package passthrough

import (
	"errors"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sluice-gateway/sluice/pkg/logevent"
)

// gatedBody is a client's request body whose reads after EOF wait until the
// answer's headers have reached the client: the order that, under load, let
// net/http close the body before the transport's last read of it.
type gatedBody struct {
	io.ReadCloser
	headersSeen <-chan struct{}
	closed      func()
	eof         bool
}

func (b *gatedBody) Read(p []byte) (int, error) {
	if b.eof {
		select {
		case <-b.headersSeen:
		case <-time.After(10 * time.Second):
		}
	}
	n, err := b.ReadCloser.Read(p)
	if err == io.EOF {
		b.eof = true
	}
	return n, err
}

func (b *gatedBody) Close() error {
	b.closed()
	return b.ReadCloser.Close()
}

// TestAnswerOutlivesTheRequestBody relays an answer that continues after
// net/http has closed the request body (it does once the answer begins): the
// body forwarded must end at its declared length, never read the closed body
// again, so the transport keeps the upstream connection and the whole answer
// arrives. This was TestHundredMegabyteStreamRelaysWithFlatMemory's failure
// under load ("relayed 424758 bytes: <nil>"), made deterministic.
func TestAnswerOutlivesTheRequestBody(t *testing.T) {
	headersSeen := make(chan struct{})
	bodyClosed := make(chan struct{})
	var once sync.Once
	up := newUpstream(t, func(w http.ResponseWriter, r *http.Request, body []byte) {
		w.Header().Set("Content-Type", contentSSE)
		w.Write([]byte("data: first\n\n"))
		w.(http.Flusher).Flush()
		// The rest once the transport is done with the request body.
		select {
		case <-bodyClosed:
		case <-time.After(10 * time.Second):
		}
		w.Write([]byte("data: last\n\n"))
	})
	h := newHarness(t, allPrefixes(up.srv.URL), nil, nil)
	h.wrapBody = func(b io.ReadCloser) io.ReadCloser {
		return &gatedBody{ReadCloser: b, headersSeen: headersSeen, closed: func() { once.Do(func() { close(bodyClosed) }) }}
	}
	resp, err := h.srv.Client().Post(h.srv.URL+"/anthropic/v1/messages", "application/json", strings.NewReader(`{"stream":true}`))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	close(headersSeen)
	got, err := io.ReadAll(resp.Body)
	if err != nil || string(got) != "data: first\n\ndata: last\n\n" {
		t.Fatalf("answer %q, %v; want both events and a clean end", got, err)
	}
}

// TestACutAnswerLooksCut: when the upstream's answer breaks after it began
// (the connection drops mid-stream), the client's read fails too; it never
// sees a clean end of a truncated answer.
func TestACutAnswerLooksCut(t *testing.T) {
	up := newUpstream(t, func(w http.ResponseWriter, r *http.Request, body []byte) {
		w.Header().Set("Content-Type", contentSSE)
		w.Write([]byte("data: first\n\n"))
		w.(http.Flusher).Flush()
		conn, _, err := http.NewResponseController(w).Hijack()
		if err != nil {
			t.Error(err)
			return
		}
		conn.Close() // no last chunk: a broken answer
	})
	h := newHarness(t, allPrefixes(up.srv.URL), nil, nil)
	resp, err := h.srv.Client().Get(h.srv.URL + "/anthropic/v1/stream")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	got, err := io.ReadAll(resp.Body)
	if !errors.Is(err, io.ErrUnexpectedEOF) || string(got) != "data: first\n\n" {
		t.Fatalf("read %q, %v; want the first event, then io.ErrUnexpectedEOF", got, err)
	}
	ev := h.bus.last(t)
	if ev.Status != logevent.StatusFailure || !strings.Contains(ev.ErrorStr, "broke off") {
		t.Errorf("event of the cut answer: %s %q", ev.Status, ev.ErrorStr)
	}
	// The team's event says what failed in its own words: no Go error text
	// or type name.
	if info := ev.ErrorInformation; info == nil || info.ErrorClass != "upstream_error" || info.ErrorCode != "502" ||
		strings.Contains(ev.ErrorStr, "EOF") || strings.Contains(info.ErrorMessage, "EOF") {
		t.Errorf("error information %+v, message %q", info, ev.ErrorStr)
	}
}
