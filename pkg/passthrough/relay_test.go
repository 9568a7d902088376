package passthrough

import (
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
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
	// A body of unknown length streams (a small declared one is read
	// whole first: TestSmallBodiesAreReadBeforeTheCall).
	body := io.MultiReader(strings.NewReader(`{"stream":true}`))
	resp, err := h.srv.Client().Post(h.srv.URL+"/anthropic/v1/messages", "application/json", body)
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

// TestSmallBodiesAreReadBeforeTheCall: a body declared at most smallBody
// long is read whole before the upstream is called (sent with the headers
// in one write); a longer one streams, the upstream reading its start
// before the client has sent the rest.
func TestSmallBodiesAreReadBeforeTheCall(t *testing.T) {
	for _, tc := range []struct {
		name     string
		size     int
		buffered bool
	}{
		{"small", 64, true},
		{"longer than smallBody", smallBody + 1, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			called := make(chan struct{})
			up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				close(called)
				if n, err := io.Copy(io.Discard, r.Body); n != int64(tc.size) || err != nil {
					t.Errorf("the upstream received %d bytes (%v), want %d", n, err, tc.size)
				}
			}))
			t.Cleanup(up.Close)
			h := newHarness(t, allPrefixes(up.URL), nil, nil)
			pr, pw := io.Pipe()
			req, err := http.NewRequest("POST", h.srv.URL+"/anthropic/v1/messages", pr)
			if err != nil {
				t.Fatal(err)
			}
			req.ContentLength = int64(tc.size)
			answered := make(chan int, 1)
			go func() {
				resp, err := h.srv.Client().Do(req)
				if err != nil {
					t.Error(err)
					answered <- 0
					return
				}
				io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
				answered <- resp.StatusCode
			}()
			pw.Write([]byte(strings.Repeat("x", tc.size-1)))
			if tc.buffered {
				select {
				case <-called:
					t.Error("the upstream was called before the body had arrived whole")
				case <-time.After(200 * time.Millisecond):
				}
			} else {
				select {
				case <-called:
				case <-time.After(10 * time.Second):
					t.Error("the upstream was not called before the body's last byte: it was buffered")
				}
			}
			pw.Write([]byte("x"))
			pw.Close()
			if status := <-answered; status != http.StatusOK {
				t.Errorf("answer %d, want 200", status)
			}
		})
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
