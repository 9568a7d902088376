package server_test

import (
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/sluice-gateway/sluice/pkg/gateway/gatewaytest"
)

// TestAnAnswerCutAfterItBeganLooksCut: a stream that breaks after its first
// bytes (here the provider drops the connection) reaches the client as a
// broken stream, never as a clean end of a truncated answer.
func TestAnAnswerCutAfterItBeganLooksCut(t *testing.T) {
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		w.Write([]byte("event: message_start\ndata: {\"type\":\"message_start\"}\n\n"))
		w.(http.Flusher).Flush()
		conn, _, err := http.NewResponseController(w).Hijack()
		if err != nil {
			t.Error(err)
			return
		}
		conn.Close()
	}))
	t.Cleanup(up.Close)
	cfg := "passthrough:\n  anthropic: {api_base: " + up.URL + ", api_key: sk-ant-provider}\n"
	gatewaytest.Run(t, gatewaytest.Options{Config: cfg}, func(t *testing.T, g *gatewaytest.Gateway) {
		_, key := g.TeamKey()
		req, _ := http.NewRequest("POST", g.URL+"/anthropic/v1/messages", strings.NewReader(`{"stream":true}`))
		req.Header.Set("x-api-key", key)
		resp, err := g.Client.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		got, err := io.ReadAll(resp.Body)
		if resp.StatusCode != 200 || !strings.Contains(string(got), "message_start") || !errors.Is(err, io.ErrUnexpectedEOF) {
			t.Errorf("%d %q, %v; want the first event, then a broken stream", resp.StatusCode, got, err)
		}
	})
}
