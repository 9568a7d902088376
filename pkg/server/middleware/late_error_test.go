package middleware

import (
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"testing"
)

// TestLateErrorCutsTheAnswer: a handler that fails after its answer began
// (a provider that breaks mid-stream) leaves the client a broken answer,
// never a short one that reads as whole.
func TestLateErrorCutsTheAnswer(t *testing.T) {
	h := New(Deps{}).Wrap(Rule{Method: "GET", Pattern: "/stream", Access: Public}, func(w http.ResponseWriter, r *http.Request) error {
		w.Header().Set("Content-Type", "text/event-stream")
		w.Write([]byte("data: first\n\n"))
		http.NewResponseController(w).Flush()
		return errors.New("the provider closed the stream")
	}, false)
	srv := httptest.NewServer(h)
	defer srv.Close()
	resp, err := http.Get(srv.URL + "/stream")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err == nil {
		t.Errorf("the answer ended cleanly after %q: a client would take it for whole", body)
	}
	if string(body) != "data: first\n\n" {
		t.Errorf("read %q before the cut, want the first event", body)
	}
}
