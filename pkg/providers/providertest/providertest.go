// Package providertest holds what provider tests share, without importing
// the gateway (so a provider's own, internal tests can use it): a fake
// upstream that records what it receives, comparing a received request with
// the one expected (cmp.Diff over decoded JSON), writing a provider's
// server-sent events, and reading a translated stream back event by event.
package providertest

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/sluice-gateway/sluice/pkg/sse"
)

// Request is a request a fake upstream received.
type Request struct {
	Method string
	Path   string // as sent, still escaped (URL.EscapedPath)
	Query  string // the raw query
	Header http.Header
	Body   []byte
}

// JSON decodes the body, failing the test when it is not JSON.
func (r Request) JSON(t testing.TB) any {
	t.Helper()
	var v any
	if err := json.Unmarshal(r.Body, &v); err != nil {
		t.Fatalf("%s %s: the body is not JSON: %v\n%s", r.Method, r.Path, err, r.Body)
	}
	return v
}

// Upstream is a fake provider on 127.0.0.1: it records every request, then
// answers it with its handler.
type Upstream struct {
	*httptest.Server
	mu      sync.Mutex
	reqs    []Request
	handler http.HandlerFunc
}

// NewUpstream starts an upstream answering with handler (which may read
// r.Body again: it is the recorded bytes), closed when the test ends.
func NewUpstream(t testing.TB, handler http.HandlerFunc) *Upstream {
	u := &Upstream{handler: handler}
	u.Server = httptest.NewServer(http.HandlerFunc(u.serve))
	t.Cleanup(u.Close)
	return u
}

func (u *Upstream) serve(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	u.mu.Lock()
	u.reqs = append(u.reqs, Request{Method: r.Method, Path: r.URL.EscapedPath(), Query: r.URL.RawQuery, Header: r.Header.Clone(), Body: body})
	u.mu.Unlock()
	r.Body = io.NopCloser(bytes.NewReader(body))
	u.handler(w, r)
}

// Requests returns the requests received so far, in order.
func (u *Upstream) Requests() []Request {
	u.mu.Lock()
	defer u.mu.Unlock()
	return append([]Request(nil), u.reqs...)
}

// Last returns the last request received, failing the test when none was.
func (u *Upstream) Last(t testing.TB) Request {
	t.Helper()
	reqs := u.Requests()
	if len(reqs) == 0 {
		t.Fatal("the upstream received no request")
	}
	return reqs[len(reqs)-1]
}

// Count is the number of requests received.
func (u *Upstream) Count() int {
	u.mu.Lock()
	defer u.mu.Unlock()
	return len(u.reqs)
}

// Want is the request a test expects an upstream to receive. Empty fields
// are not checked.
type Want struct {
	Method string
	Path   string
	Query  string // the raw query
	// Header lists headers that must have exactly these values; a header
	// mapped to "" must be absent.
	Header map[string]string
	// Body is the JSON body expected, compared as decoded JSON.
	Body string
}

// AssertRequest fails the test for every way got differs from want, with
// a cmp.Diff of the bodies.
func AssertRequest(t testing.TB, got Request, want Want) {
	t.Helper()
	if want.Method != "" && got.Method != want.Method {
		t.Errorf("method %s, want %s", got.Method, want.Method)
	}
	if want.Path != "" && got.Path != want.Path {
		t.Errorf("path %s, want %s", got.Path, want.Path)
	}
	if want.Query != "" && got.Query != want.Query {
		t.Errorf("query %q, want %q", got.Query, want.Query)
	}
	for k, v := range want.Header {
		if g := got.Header.Get(k); g != v || (v == "" && len(got.Header.Values(k)) > 0) {
			t.Errorf("header %s: %q, want %q", k, g, v)
		}
	}
	if want.Body != "" {
		if diff := DiffJSON(want.Body, got.Body); diff != "" {
			t.Errorf("body (-want +got):\n%s", diff)
		}
	}
}

// DiffJSON compares two JSON documents as decoded values (member order and
// spacing aside) and returns cmp.Diff's report, "" when they are equal. A
// document that is not JSON is compared as text.
func DiffJSON(want string, got []byte) string {
	var w, g any
	if json.Unmarshal([]byte(want), &w) != nil {
		return "want is not JSON: " + want
	}
	if err := json.Unmarshal(got, &g); err != nil {
		return cmp.Diff(want, string(got))
	}
	return cmp.Diff(w, g)
}

// Event is one server-sent event a fake upstream writes.
type Event struct {
	Type string // "" for none
	Data string
}

// WriteSSE answers with status 200, Content-Type text/event-stream and the
// events, flushing after each (so a test sees them arrive one by one).
func WriteSSE(w http.ResponseWriter, events ...Event) {
	w.Header().Set("Content-Type", "text/event-stream")
	w.WriteHeader(http.StatusOK)
	for _, e := range events {
		w.Write(sse.AppendEvent(nil, e.Type, []byte(e.Data)))
		w.(http.Flusher).Flush()
	}
}

// WriteJSON answers with status and the JSON body.
func WriteJSON(w http.ResponseWriter, status int, body string) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	io.WriteString(w, body)
}

// Reads reads r to its end read by read and returns what each read gave
// (a translated stream hands out one provider event's output per read), and
// the error that ended it (nil at io.EOF).
func Reads(r io.Reader) ([]string, error) {
	var out []string
	buf := make([]byte, 1<<20)
	for {
		n, err := r.Read(buf)
		if n > 0 {
			out = append(out, string(buf[:n]))
		}
		if err == io.EOF {
			return out, nil
		}
		if err != nil {
			return out, err
		}
	}
}

// Data returns the data of each event of an SSE document (the payloads of
// an OpenAI stream: chunk JSON, then "[DONE]"), failing the test when the
// document does not parse.
func Data(t testing.TB, stream []byte) []string {
	t.Helper()
	var out []string
	rd := sse.NewReader(bytes.NewReader(stream), sse.Limits{})
	for {
		ev, err := rd.Next()
		if err == io.EOF {
			return out
		}
		if err != nil {
			t.Fatalf("the stream does not parse: %v\n%s", err, stream)
		}
		out = append(out, string(ev.Data))
	}
}

// DiffChunks compares the data of an OpenAI stream with the chunks
// expected, each compared as JSON ("[DONE]" as text), and returns a report
// of the differences ("" when none). The chunks' id and created are not
// compared when want gives them as "*".
func DiffChunks(want []string, got []string) string {
	want = slices.Clone(want)
	var b strings.Builder
	if len(want) != len(got) {
		fmt.Fprintf(&b, "%d events, want %d:\n%s\n", len(got), len(want), strings.Join(got, "\n"))
	}
	for i := range min(len(want), len(got)) {
		if want[i] == "[DONE]" || got[i] == "[DONE]" {
			if want[i] != got[i] {
				fmt.Fprintf(&b, "event %d: %s, want %s\n", i, got[i], want[i])
			}
			continue
		}
		g := []byte(got[i])
		var w map[string]any
		if json.Unmarshal([]byte(want[i]), &w) == nil {
			var gm map[string]any
			if json.Unmarshal(g, &gm) == nil {
				for _, k := range []string{"id", "created"} {
					if w[k] == "*" {
						w[k] = gm[k]
					}
				}
				ws, _ := json.Marshal(w)
				want[i] = string(ws)
			}
		}
		if d := DiffJSON(want[i], g); d != "" {
			fmt.Fprintf(&b, "event %d (-want +got):\n%s", i, d)
		}
	}
	return b.String()
}
