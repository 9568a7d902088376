package providers

import (
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/sluice-gateway/sluice/pkg/models"
)

func TestDo(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/ok":
			w.Header().Set("Content-Type", "application/json")
			io.WriteString(w, `{"a":1}`)
		case "/chunked":
			w.Header().Set("Content-Type", "application/json; charset=utf-8")
			w.(http.Flusher).Flush()
			io.WriteString(w, `{"a":2}`)
		case "/html":
			w.Header().Set("Content-Type", "text/html")
			io.WriteString(w, `<html>`)
		case "/denied":
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(403)
			io.WriteString(w, `{"message":"The security token included in the request is invalid."}`)
		}
	}))
	defer srv.Close()
	do := func(path string) (*Response, error) {
		req, _ := http.NewRequest("POST", srv.URL+path, nil)
		return Do(srv.Client(), "p", req)
	}
	if r, err := do("/ok"); err != nil || string(r.Body) != `{"a":1}` || r.Status != 200 {
		t.Errorf("ok: %+v %v", r, err)
	}
	if r, err := do("/chunked"); err != nil || string(r.Body) != `{"a":2}` {
		t.Errorf("chunked: %+v %v", r, err)
	}
	var pe *models.ProviderError
	if _, err := do("/html"); !errors.As(err, &pe) || !strings.Contains(pe.Message, "not JSON") {
		t.Errorf("html: %v", err)
	}
	if _, err := do("/denied"); !errors.As(err, &pe) || pe.Status != 403 || !strings.Contains(pe.Message, "security token") {
		t.Errorf("denied: %v", err)
	}
	srv.Close()
	if _, err := do("/ok"); err == nil || errors.As(err, &pe) {
		t.Errorf("closed server: %v, want a transport error", err)
	}
}

func TestRelay(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/ok":
			w.Header().Set("Content-Type", "application/json")
			io.WriteString(w, `{"a":1}`)
		case "/html":
			w.Header().Set("Content-Type", "text/html")
			io.WriteString(w, `<html>`)
		case "/limited":
			w.Header().Set("Retry-After", "3")
			w.WriteHeader(429)
			io.WriteString(w, `{"error":{"message":"Rate limit reached","type":"requests","code":"rate_limit_exceeded"}}`)
		}
	}))
	defer srv.Close()
	relay := func(path string) (*models.Answer, error) {
		req, _ := http.NewRequest("POST", srv.URL+path, nil)
		return Relay(srv.Client(), "p", req)
	}
	ans, err := relay("/ok")
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(ans.Body)
	ans.Body.Close()
	if string(b) != `{"a":1}` || ans.ContentLength != 7 {
		t.Errorf("ok: %q %d", b, ans.ContentLength)
	}
	var pe *models.ProviderError
	if _, err := relay("/html"); !errors.As(err, &pe) || !strings.Contains(pe.Message, "not JSON") {
		t.Errorf("html: %v", err)
	}
	if _, err := relay("/limited"); !errors.As(err, &pe) || pe.Status != 429 || pe.RetryAfter.Seconds() != 3 {
		t.Errorf("limited: %v", err)
	}
}

func TestRelayStream(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/sse":
			w.Header().Set("Content-Type", "text/event-stream; charset=utf-8")
			io.WriteString(w, "data: {}\n\ndata: [DONE]\n\n")
		case "/json":
			w.Header().Set("Content-Type", "application/json")
			io.WriteString(w, `{"choices":[]}`)
		case "/busy":
			w.Header().Set("Content-Type", "application/json")
			w.Header().Set("Retry-After", "3")
			w.WriteHeader(429)
			io.WriteString(w, `{"error":{"message":"Rate limit reached","type":"requests","code":"rate_limit_exceeded"}}`)
		}
	}))
	defer srv.Close()
	relay := func(path string) (*models.Answer, error) {
		req, _ := http.NewRequest("POST", srv.URL+path, nil)
		return RelayStream(srv.Client(), "p", req)
	}
	ans, err := relay("/sse")
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(ans.Body)
	ans.Body.Close()
	if string(b) != "data: {}\n\ndata: [DONE]\n\n" || ans.ContentLength != -1 {
		t.Errorf("relayed %q (length %d)", b, ans.ContentLength)
	}
	var pe *models.ProviderError
	if _, err := relay("/json"); !errors.As(err, &pe) || !strings.Contains(pe.Message, "not an event stream") {
		t.Errorf("a JSON answer to a stream: %v", err)
	}
	if _, err := relay("/busy"); !errors.As(err, &pe) || pe.Status != 429 || pe.RetryAfter.Seconds() != 3 {
		t.Errorf("busy: %v", err)
	}
}

// TestSendNeverFollowsARedirect: the direct path (NewHTTPClient's client)
// and the client's own answer a redirect alike, with the redirect itself.
func TestSendNeverFollowsARedirect(t *testing.T) {
	var followed bool
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/elsewhere" {
			followed = true
			return
		}
		http.Redirect(w, r, "/elsewhere", http.StatusTemporaryRedirect)
	}))
	t.Cleanup(srv.Close)
	direct := NewHTTPClient()
	withTimeout := NewHTTPClient()
	withTimeout.Timeout = time.Minute // not the direct path
	for name, c := range map[string]*http.Client{"direct": direct, "client": withTimeout} {
		req, _ := http.NewRequest(http.MethodPost, srv.URL+"/v1/x", strings.NewReader("{}"))
		resp, err := Send(c, req)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusTemporaryRedirect || followed {
			t.Errorf("%s: status %d, followed %v; want the 307 itself", name, resp.StatusCode, followed)
		}
	}
}

// TestSendHonoursTheClientsTimeout: a client with a timeout is used as it
// is, not bypassed.
func TestSendHonoursTheClientsTimeout(t *testing.T) {
	release := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { <-release }))
	t.Cleanup(srv.Close)
	t.Cleanup(func() { close(release) })
	c := NewHTTPClient()
	c.Timeout = 50 * time.Millisecond
	req, _ := http.NewRequest(http.MethodPost, srv.URL, strings.NewReader("{}"))
	_, err := Send(c, req)
	var uerr interface{ Timeout() bool }
	if !errors.As(err, &uerr) || !uerr.Timeout() {
		t.Fatalf("Send = %v, want the client's timeout", err)
	}
}

// TestSendFailureNamesTheCall: a transport failure on the direct path reads
// as the client's would (method and URL, the cause kept).
func TestSendFailureNamesTheCall(t *testing.T) {
	srv := httptest.NewServer(http.NotFoundHandler())
	addr := srv.URL
	srv.Close()
	req, _ := http.NewRequest(http.MethodPost, addr+"/v1/embeddings", strings.NewReader("{}"))
	_, err := Send(NewHTTPClient(), req)
	var uerr *url.Error
	if !errors.As(err, &uerr) || uerr.Op != "Post" || uerr.URL != addr+"/v1/embeddings" {
		t.Fatalf("Send = %#v, want a *url.Error for Post %s/v1/embeddings", err, addr)
	}
}
