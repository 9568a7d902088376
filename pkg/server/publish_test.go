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
	"github.com/sluice-gateway/sluice/pkg/server"
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

// publishing starts a gateway whose log events are all published (a
// gateway-wide callback) on a bus that holds each publish, and serves its
// routes as opts says, reporting each time a handler returns.
func publishing(t *testing.T, opts server.Options) (g *gatewaytest.Gateway, bus *heldBus, url string, returned chan struct{}) {
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		w.Header().Set("Content-Type", "application/json")
		io.WriteString(w, `{"object":"list","data":[{"object":"embedding","index":0,"embedding":[0.5]}],"model":"m","usage":{"prompt_tokens":1,"total_tokens":1}}`)
	}))
	t.Cleanup(up.Close)
	cfg := "model_list:\n  - model_name: small\n    litellm_params: {model: openai/text-embedding-3-small, api_base: " + up.URL + ", api_key: k}\n" +
		"litellm_settings:\n  callbacks: [langsmith]\nenvironment_variables: {LANGSMITH_API_KEY: ls-key}\n"
	bus = &heldBus{started: make(chan struct{}, 1), release: make(chan struct{})}
	g = gatewaytest.Start(t, gatewaytest.Backends()[0], gatewaytest.Options{Config: cfg, Backend: func(b *store.Backend) { bus.Bus = b.Bus; b.Bus = bus }})
	h, err := server.Handler(g.Services, opts)
	if err != nil {
		t.Fatal(err)
	}
	returned = make(chan struct{}, 10)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h.ServeHTTP(w, r)
		returned <- struct{}{}
	}))
	t.Cleanup(srv.Close)
	// Registered last, so it runs first: a held handler must not keep the
	// servers from closing when the test fails.
	t.Cleanup(func() {
		for {
			select {
			case bus.release <- struct{}{}:
			case <-time.After(100 * time.Millisecond):
				return
			}
		}
	})
	return g, bus, srv.URL, returned
}

// call posts body to the embeddings route in the background and returns
// its answer's body.
func call(url, key, body string) <-chan string {
	read := make(chan string, 1)
	go func() {
		req, _ := http.NewRequest("POST", url+"/v1/embeddings", strings.NewReader(body))
		req.Header.Set("Authorization", "Bearer "+key)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			read <- err.Error()
			return
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		read <- string(b)
	}()
	return read
}

// TestThePublishOverlapsWithTheAnswer: in a Lambda function (the handler
// awaits its publishes) a model call's answer — a success or an error —
// reaches the client while its log event's publish is still held, and the
// handler returns only once the publish is done.
func TestThePublishOverlapsWithTheAnswer(t *testing.T) {
	g, bus, url, returned := publishing(t, server.Options{AwaitPublishes: true})
	_, key := g.TeamKey()
	for _, body := range []string{`{"model":"small","input":"hi"}`, `{"model":"small","input":""}`} {
		read := call(url, key, body)
		<-bus.started
		select {
		case b := <-read:
			if !strings.Contains(b, `"embedding"`) && !strings.Contains(b, `"error"`) {
				t.Errorf("answer %s", b)
			}
		case <-time.After(5 * time.Second):
			t.Fatal("the answer waited for the log event's publish")
		}
		select {
		case <-returned:
			t.Fatal("the handler returned before its publish finished")
		case <-time.After(50 * time.Millisecond):
		}
		bus.release <- struct{}{}
		<-returned
	}
}

// TestTheLocalProcessDoesNotWaitForPublishes: the local process's handler
// returns while its publish is held (the next request on the connection is
// not held up by a disk commit); the emitter's Drain, which shutdown calls,
// waits for it.
func TestTheLocalProcessDoesNotWaitForPublishes(t *testing.T) {
	g, bus, url, returned := publishing(t, server.Options{})
	_, key := g.TeamKey()
	read := call(url, key, `{"model":"small","input":"hi"}`)
	<-bus.started
	select {
	case <-returned:
	case <-time.After(5 * time.Second):
		t.Fatal("the local handler waited for its publish")
	}
	if b := <-read; !strings.Contains(b, `"embedding"`) {
		t.Errorf("answer %s", b)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	if err := g.Services.Events.Drain(ctx); err == nil {
		t.Fatal("Drain returned while a publish was held")
	}
	bus.release <- struct{}{}
	if err := g.Services.Events.Drain(context.Background()); err != nil {
		t.Fatal(err)
	}
}
