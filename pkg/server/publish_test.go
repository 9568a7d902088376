package server_test

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/sluice-gateway/sluice/pkg/gateway/gatewaytest"
	"github.com/sluice-gateway/sluice/pkg/store"
)

// heldBus holds every publish until released.
type heldBus struct {
	store.Bus
	started chan struct{}
	release chan struct{}
}

func (b *heldBus) Publish(ctx context.Context, events ...store.Event) error {
	b.started <- struct{}{}
	<-b.release
	return b.Bus.Publish(ctx, events...)
}

// TestThePublishOverlapsWithTheAnswer: a model call's log event is
// published while its answer goes out: the client reads the whole answer
// (and an error answer) while the publish is still held.
func TestThePublishOverlapsWithTheAnswer(t *testing.T) {
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		w.Header().Set("Content-Type", "application/json")
		io.WriteString(w, `{"object":"list","data":[{"object":"embedding","index":0,"embedding":[0.5]}],"model":"m","usage":{"prompt_tokens":1,"total_tokens":1}}`)
	}))
	defer up.Close()
	cfg := "model_list:\n  - model_name: small\n    litellm_params: {model: openai/text-embedding-3-small, api_base: " + up.URL + ", api_key: k}\n" +
		"litellm_settings:\n  callbacks: [langsmith]\nenvironment_variables: {LANGSMITH_API_KEY: ls-key}\n"
	bus := &heldBus{started: make(chan struct{}, 1), release: make(chan struct{})}
	opts := gatewaytest.Options{Config: cfg, Backend: func(b *store.Backend) { bus.Bus = b.Bus; b.Bus = bus }}
	g := gatewaytest.Start(t, gatewaytest.Backends()[0], opts)
	// Registered after the gateway, so it runs before its server closes: a
	// held handler must not keep the server from closing when the test fails.
	t.Cleanup(func() {
		for {
			select {
			case bus.release <- struct{}{}:
			case <-time.After(100 * time.Millisecond):
				return
			}
		}
	})
	_, key := g.TeamKey()
	for _, body := range []string{`{"model":"small","input":"hi"}`, `{"model":"small","input":""}`} {
		req, _ := http.NewRequest("POST", g.URL+"/v1/embeddings", strings.NewReader(body))
		req.Header.Set("Authorization", "Bearer "+key)
		read := make(chan string, 1)
		go func() {
			resp, err := g.Client.Do(req)
			if err != nil {
				read <- err.Error()
				return
			}
			defer resp.Body.Close()
			b, _ := io.ReadAll(resp.Body)
			read <- string(b)
		}()
		<-bus.started
		select {
		case b := <-read:
			if !strings.Contains(b, `"embedding"`) && !strings.Contains(b, `"error"`) {
				t.Errorf("answer %s", b)
			}
		case <-time.After(5 * time.Second):
			t.Fatal("the answer waited for the log event's publish")
		}
		bus.release <- struct{}{}
	}
}
