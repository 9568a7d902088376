package providers

import (
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"

	"github.com/sluice-gateway/sluice/pkg/models"
)

// DoInto reads an answer of known length into the caller's buffer when it
// has room, into a new one when it has not, and a chunked answer whole.
func TestDoIntoReusesBuffer(t *testing.T) {
	answer := `{"embedding":[` + strings.Repeat("0.125,", 2000) + `1]}`
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		if r.URL.Path != "/chunked" {
			w.Header().Set("Content-Length", strconv.Itoa(len(answer)))
		}
		w.Write([]byte(answer))
	}))
	defer srv.Close()
	for _, tc := range []struct {
		name, path string
		room       int
		reused     bool
	}{
		{"room", "/", len(answer) + 10, true},
		{"exact room", "/", len(answer), true},
		{"no room", "/", len(answer) - 1, false},
		{"no buffer", "/", 0, false},
		{"chunked", "/chunked", 2 * len(answer), false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			buf := make([]byte, 3, tc.room+3)[3:] // a buffer holding bytes before its start
			req, _ := http.NewRequest(http.MethodPost, srv.URL+tc.path, nil)
			resp, err := DoInto(srv.Client(), "test", req, models.ReadProviderError, buf)
			if err != nil {
				t.Fatal(err)
			}
			if string(resp.Body) != answer {
				t.Fatalf("body %.40q…, want the answer", resp.Body)
			}
			if reused := cap(buf) > 0 && &resp.Body[:1][0] == &buf[:1][0]; reused != tc.reused {
				t.Errorf("read into the buffer: %v, want %v", reused, tc.reused)
			}
		})
	}
}
