package gateway

import (
	"bufio"
	"encoding/json"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/sluice-gateway/sluice/pkg/api"
)

// readsBody answers 200 with the size of the body it read, or the error.
var readsBody = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
	n, err := io.Copy(io.Discard, r.Body)
	if err != nil {
		api.WriteError(w, r, err)
		return
	}
	api.WriteJSON(w, http.StatusOK, map[string]int64{"read": n})
})

// rawExchange is one request written by hand on its own connection.
type rawExchange struct {
	t    *testing.T
	conn net.Conn
	br   *bufio.Reader
}

func dialRaw(t *testing.T, addr, head string) *rawExchange {
	t.Helper()
	conn, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	// However the server behaves, the test does not hang.
	conn.SetDeadline(time.Now().Add(10 * time.Second))
	if _, err := io.WriteString(conn, head); err != nil {
		t.Fatal(err)
	}
	return &rawExchange{t: t, conn: conn, br: bufio.NewReader(conn)}
}

// answer reads the response and its body.
func (x *rawExchange) answer() (*http.Response, []byte) {
	x.t.Helper()
	resp, err := http.ReadResponse(x.br, nil)
	if err != nil {
		x.t.Fatalf("no answer: %v", err)
	}
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		x.t.Fatalf("answer body: %v", err)
	}
	return resp, body
}

// closed reports whether the server closed the connection after its answer.
func (x *rawExchange) closed() bool {
	x.t.Helper()
	_, err := x.br.ReadByte()
	return errors.Is(err, io.EOF)
}

func errorOf(t *testing.T, body []byte) api.Detail {
	t.Helper()
	var b api.Body
	if err := json.Unmarshal(body, &b); err != nil || b.Error.Code == nil {
		t.Fatalf("not an OpenAI error body: %s", body)
	}
	return b.Error
}

func guarded(t *testing.T, h http.Handler, idle time.Duration, minRate int64) string {
	srv := httptest.NewServer(guardBodies(h, idle, minRate, nil))
	t.Cleanup(srv.Close)
	return srv.Listener.Addr().String()
}

func TestStalledBodyTimesOut(t *testing.T) {
	addr := guarded(t, readsBody, 200*time.Millisecond, 0)
	start := time.Now()
	x := dialRaw(t, addr, "POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 100\r\n\r\n0123456789")
	resp, body := x.answer()
	if resp.StatusCode != http.StatusRequestTimeout || *errorOf(t, body).Code != "request_timeout" ||
		!strings.Contains(errorOf(t, body).Message, "no byte arrived for 200ms") {
		t.Errorf("stalled body: %d %s", resp.StatusCode, body)
	}
	if elapsed := time.Since(start); elapsed < 200*time.Millisecond {
		t.Errorf("answered after %s, before the idle limit", elapsed)
	}
	if !x.closed() {
		t.Error("the connection stayed open after a body that timed out")
	}
}

func TestBodyBelowTheMinimumRateTimesOut(t *testing.T) {
	// Each byte comes well within the idle limit, but the body averages
	// far below the rate: it is cut once it has waited the idle limit.
	addr := guarded(t, readsBody, 300*time.Millisecond, 1<<10)
	x := dialRaw(t, addr, "POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 100000\r\n\r\n")
	stop := make(chan struct{})
	defer close(stop)
	go func() {
		tick := time.NewTicker(20 * time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-stop:
				return
			case <-tick.C:
				if _, err := x.conn.Write([]byte("x")); err != nil {
					return
				}
			}
		}
	}()
	resp, body := x.answer()
	if resp.StatusCode != http.StatusRequestTimeout || !strings.Contains(errorOf(t, body).Message, "at least 1024 bytes per second") {
		t.Errorf("slow body: %d %s", resp.StatusCode, body)
	}
}

func TestSteadyBodyAboveTheRatePasses(t *testing.T) {
	addr := guarded(t, readsBody, time.Second, 1<<10)
	x := dialRaw(t, addr, "POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 8192\r\n\r\n")
	chunk := strings.Repeat("x", 1024)
	for range 8 {
		time.Sleep(50 * time.Millisecond) // a slow link: 20 KiB/s, pauses of 50 ms
		io.WriteString(x.conn, chunk)
	}
	resp, body := x.answer()
	if resp.StatusCode != 200 || string(body) != "{\"read\":8192}\n" {
		t.Errorf("steady body: %d %s", resp.StatusCode, body)
	}
}

func TestAnswerBeforeTheBodyClosesTheConnection(t *testing.T) {
	refuses := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		api.WriteError(w, r, api.Unauthorized("No API key provided."))
	})
	addr := guarded(t, refuses, time.Hour, 0)
	x := dialRaw(t, addr, "POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 100\r\n\r\n")
	resp, body := x.answer()
	if resp.StatusCode != 401 || !resp.Close || *errorOf(t, body).Code != "invalid_api_key" {
		t.Errorf("refusal: %d close=%v %s", resp.StatusCode, resp.Close, body)
	}
	if !x.closed() {
		t.Error("the connection stayed open, waiting for a body nobody will read")
	}
}

func TestAnswerAfterTheBodyKeepsTheConnection(t *testing.T) {
	addr := guarded(t, readsBody, time.Hour, 1<<10)
	x := dialRaw(t, addr, "POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 3\r\n\r\nabc")
	resp, body := x.answer()
	if resp.StatusCode != 200 || resp.Close || string(body) != "{\"read\":3}\n" {
		t.Errorf("first: %d close=%v %s", resp.StatusCode, resp.Close, body)
	}
	// The same connection serves the next request.
	io.WriteString(x.conn, "POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 2\r\n\r\nde")
	if resp, body := x.answer(); resp.StatusCode != 200 || string(body) != "{\"read\":2}\n" {
		t.Errorf("second: %d %s", resp.StatusCode, body)
	}
}

// deadlineRecorder is a ResponseWriter that records the read deadlines set
// through its http.ResponseController.
type deadlineRecorder struct {
	httptest.ResponseRecorder
	deadlines []time.Time
}

func (d *deadlineRecorder) SetReadDeadline(t time.Time) error {
	d.deadlines = append(d.deadlines, t)
	return nil
}

// TestBodyReadsShareADeadline: quick reads of a body do not re-arm the
// connection's deadline each (a timer operation a read); the one set
// allows the idle limit and at most a sixty-fourth more.
func TestBodyReadsShareADeadline(t *testing.T) {
	const idle = 64 * time.Second
	rec := &deadlineRecorder{}
	b := &progressBody{ReadCloser: io.NopCloser(strings.NewReader(strings.Repeat("x", 100))), w: rec, idle: idle, minRate: 1 << 10}
	start := time.Now()
	p := make([]byte, 10)
	for {
		if _, err := b.Read(p); err != nil {
			break
		}
	}
	if len(rec.deadlines) != 1 {
		t.Fatalf("%d deadlines set for 11 quick reads, want 1", len(rec.deadlines))
	}
	if d := rec.deadlines[0].Sub(start); d < idle || d > idle+idle/deadlineSlack+time.Second {
		t.Errorf("deadline %s after the first read, want between %s and %s", d, idle, idle+idle/deadlineSlack)
	}
}

// TestBodyDeadlineMovesWithTheHandlersTime: time the handler spends between
// reads is not the client's; once it passes the slack, the next read's
// deadline is set again, that much later.
func TestBodyDeadlineMovesWithTheHandlersTime(t *testing.T) {
	const idle = 640 * time.Millisecond
	rec := &deadlineRecorder{}
	b := &progressBody{ReadCloser: io.NopCloser(strings.NewReader("xx")), w: rec, idle: idle, minRate: 1 << 10}
	p := make([]byte, 1)
	b.Read(p)
	time.Sleep(5 * idle / deadlineSlack) // forwarding what it read, say
	b.Read(p)
	if len(rec.deadlines) != 2 {
		t.Fatalf("%d deadlines set, want 2", len(rec.deadlines))
	}
	if moved := rec.deadlines[1].Sub(rec.deadlines[0]); moved < 4*idle/deadlineSlack {
		t.Errorf("the deadline moved %s, want about %s", moved, 5*idle/deadlineSlack)
	}
}

// An answer carries a Date header as net/http's would (the current second,
// in http.TimeFormat), made by the guard; a handler's own Date is kept.
func TestAnswerDate(t *testing.T) {
	own := "Mon, 02 Jan 2006 15:04:05 GMT"
	addr := guarded(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		if r.URL.Path == "/own" {
			w.Header().Set("Date", own)
		}
		w.Write([]byte("ok"))
	}), time.Hour, 0)
	for _, tc := range []struct{ path, want string }{{"/", ""}, {"/own", own}} {
		before := time.Now().Truncate(time.Second)
		x := dialRaw(t, addr, "POST "+tc.path+" HTTP/1.1\r\nHost: x\r\nContent-Length: 1\r\n\r\na")
		resp, _ := x.answer()
		dates := resp.Header.Values("Date")
		if len(dates) != 1 {
			t.Fatalf("%s: Date headers %q, want one", tc.path, dates)
		}
		if tc.want != "" {
			if dates[0] != tc.want {
				t.Errorf("%s: Date %q, want the handler's %q", tc.path, dates[0], tc.want)
			}
			continue
		}
		at, err := http.ParseTime(dates[0])
		if err != nil || dates[0] != at.UTC().Format(http.TimeFormat) {
			t.Fatalf("%s: Date %q is not in http.TimeFormat (%v)", tc.path, dates[0], err)
		}
		if at.Before(before) || at.After(time.Now()) {
			t.Errorf("%s: Date %v, want between %v and now", tc.path, at, before)
		}
	}
}

// serverDate makes one value a second: the same slice within the second,
// a new one the next, each what net/http would format.
func TestServerDatePerSecond(t *testing.T) {
	var d serverDate
	t0 := time.Date(2026, 11, 28, 10, 0, 0, 100, time.FixedZone("x", 3600))
	a, b := d.at(t0), d.at(t0.Add(800*time.Millisecond))
	if &a[0] != &b[0] {
		t.Error("a second's two answers made two values")
	}
	if want := t0.UTC().Format(http.TimeFormat); a[0] != want || len(a) != 1 || cap(a) != 1 {
		t.Errorf("at = %q (len %d cap %d), want [%q] with capacity 1", a, len(a), cap(a), want)
	}
	if c := d.at(t0.Add(time.Second)); c[0] != t0.Add(time.Second).UTC().Format(http.TimeFormat) {
		t.Errorf("next second: %q", c)
	}
}
