package callbacks_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sluice-gateway/sluice/pkg/callbacks"
	"github.com/sluice-gateway/sluice/pkg/gateway/gatewaytest"
	"github.com/sluice-gateway/sluice/pkg/server"
	"github.com/sluice-gateway/sluice/pkg/store"
)

// flakyLangfuse is a Langfuse ingestion endpoint that answers 503 (with a
// long, multi-line body) while failing reports true, and accepts every
// event otherwise.
func flakyLangfuse(t *testing.T, failing func() bool) *httptest.Server {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var req struct {
			Batch []struct {
				ID string `json:"id"`
			} `json:"batch"`
		}
		if err := json.NewDecoder(r.Body).Decode(&req); err != nil {
			t.Errorf("langfuse body: %v", err)
		}
		if failing() {
			w.WriteHeader(http.StatusServiceUnavailable)
			io.WriteString(w, "upstream overloaded\n"+strings.Repeat("x", 600))
			return
		}
		var ok []map[string]any
		for _, e := range req.Batch {
			ok = append(ok, map[string]any{"id": e.ID, "status": 201})
		}
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusMultiStatus)
		json.NewEncoder(w).Encode(map[string]any{"successes": ok, "errors": []any{}})
	}))
	t.Cleanup(srv.Close)
	return srv
}

// TestDeliveryHealthEndToEnd: GET /team/{team_id}/callback answers each
// callback's delivery health as the callback-delivery job (its handler,
// fed from the delivery queue, a failed message made visible again at
// once) finds it: a destination that fails past the handler's retries and
// then recovers shows one event retrying with its error, then delivered;
// one that always fails shows the event dead-lettered after the last
// receive, with a bounded error — and once it is fixed, re-driving the
// dead letter moves the event to delivered.
func TestDeliveryHealthEndToEnd(t *testing.T) {
	up := upstream(t)
	cfg := fmt.Sprintf(`model_list:
  - model_name: small
    litellm_params: {model: openai/text-embedding-3-small, api_base: %s/v1, api_key: k}
callback_settings:
  allow_hosts: ["127.0.0.1"]
`, up.URL)
	gatewaytest.Run(t, gatewaytest.Options{Config: cfg}, func(t *testing.T, g *gatewaytest.Gateway) {
		job, _ := server.LookupJob("callback-delivery")
		d := &deliveryRun{t: t, g: g, ctx: context.Background(), handle: job.Handle(g.Services)}
		const wantErr = "Langfuse answered 503: upstream overloaded " // then a bounded run of x

		// Fails past the handler's retries (3 sends), then recovers.
		var sends atomic.Int32
		recovering := flakyLangfuse(t, func() bool { return sends.Add(1) <= 3 })
		teamA, keyA := g.TeamKey()
		d.addLangfuse(teamA, keyA, recovering.URL)
		if h := d.health(teamA, keyA); h != (callbacks.Delivery{}) {
			t.Errorf("health before any delivery: %+v", h)
		}
		d.embed(keyA)
		if err := d.step(); err == nil {
			t.Fatal("first receive: delivered, want left for redelivery")
		}
		h := d.health(teamA, keyA)
		if h.Delivered != 0 || h.Retrying != 1 || h.DeadLettered != 0 || !strings.HasPrefix(h.LastError, wantErr) || h.LastErrorAt == nil || h.LastDeliveredAt != nil {
			t.Errorf("after a failed receive: %+v", h)
		}
		if len(h.LastError) > 300 {
			t.Errorf("last error not bounded: %d bytes", len(h.LastError))
		}
		if err := d.step(); err != nil {
			t.Fatalf("second receive: %v", err)
		}
		h = d.health(teamA, keyA)
		if h.Delivered != 1 || h.Retrying != 0 || h.DeadLettered != 0 || !strings.HasPrefix(h.LastError, wantErr) || h.LastDeliveredAt == nil ||
			h.LastDeliveredAt.Before(*h.LastErrorAt) {
			t.Errorf("after recovery: %+v", h)
		}

		// Always fails: dead-lettered on the last receive.
		var broken atomic.Bool
		broken.Store(true)
		failing := flakyLangfuse(t, broken.Load)
		teamB, keyB := g.TeamKey()
		d.addLangfuse(teamB, keyB, failing.URL)
		d.embed(keyB)
		receives := 1
		for ; d.step() != nil; receives++ {
			if h := d.health(teamB, keyB); h.Retrying != 1 || h.DeadLettered != 0 {
				t.Errorf("after failed receive %d: %+v", receives, h)
			}
		}
		if receives != 5 {
			t.Errorf("dead-lettered on receive %d, want 5", receives)
		}
		h = d.health(teamB, keyB)
		if h.Delivered != 0 || h.Retrying != 0 || h.DeadLettered != 1 || !strings.HasPrefix(h.LastError, wantErr) || h.LastErrorAt == nil || h.LastDeliveredAt != nil {
			t.Errorf("after dead-lettering: %+v", h)
		}
		if other := d.health(teamA, keyA); other.Delivered != 1 || other.DeadLettered != 0 {
			t.Errorf("team A's health changed by team B's deliveries: %+v", other)
		}

		// Fixed and re-driven: the event leaves dead-lettered for delivered.
		broken.Store(false)
		if n, err := store.Redrive(d.ctx, g.Backend.DeliveryDeadLetters, g.Backend.Deliveries); err != nil || n != 1 {
			t.Fatalf("redrive: %d, %v", n, err)
		}
		if err := d.step(); err != nil {
			t.Fatalf("re-driven delivery: %v", err)
		}
		h = d.health(teamB, keyB)
		if h.Delivered != 1 || h.Retrying != 0 || h.DeadLettered != 0 || h.LastDeliveredAt == nil {
			t.Errorf("after the re-drive: %+v", h)
		}
	})
}

// deliveryRun drives the callback-delivery job by hand over one gateway:
// TestDeliveryHealthEndToEnd's steps share it.
type deliveryRun struct {
	t      *testing.T
	g      *gatewaytest.Gateway
	ctx    context.Context
	handle server.MessageHandler
}

// step handles the next delivery message and reports the handler's
// answer.
func (d *deliveryRun) step() error {
	t, g, ctx := d.t, d.g, d.ctx
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for time.Now().Before(deadline) {
		msgs, err := g.Backend.Deliveries.Receive(ctx, 1, time.Second)
		if err != nil {
			t.Fatal(err)
		}
		if len(msgs) == 0 {
			continue
		}
		m := msgs[0]
		err = d.handle(ctx, m)
		if err == nil {
			g.Backend.Deliveries.Ack(ctx, m)
		} else {
			g.Backend.Deliveries.Extend(ctx, m, 0)
		}
		return err
	}
	t.Fatal("no delivery message within 30 s")
	return nil
}

// health is the team callback's delivery health, as the API answers it
// (its secret masked).
func (d *deliveryRun) health(team, key string) callbacks.Delivery {
	t := d.t
	t.Helper()
	resp := d.g.Do("GET", "/team/"+team+"/callback", key, nil)
	var out struct {
		Data struct {
			Callbacks []struct {
				Vars     map[string]string   `json:"callback_vars"`
				Delivery *callbacks.Delivery `json:"delivery"`
			} `json:"callbacks"`
		} `json:"data"`
	}
	if err := json.Unmarshal(resp.Body, &out); err != nil || resp.Status != 200 || len(out.Data.Callbacks) != 1 || out.Data.Callbacks[0].Delivery == nil {
		t.Fatalf("GET callbacks of %s: %d %s", team, resp.Status, resp.Body)
	}
	if v := out.Data.Callbacks[0].Vars["langfuse_secret_key"]; v == "sk-lf-secret" {
		t.Errorf("secret shown: %q", v)
	}
	return *out.Data.Callbacks[0].Delivery
}

func (d *deliveryRun) addLangfuse(team, key, host string) {
	d.t.Helper()
	resp := d.g.Do("POST", "/team/"+team+"/callback", key, map[string]any{"callback_name": "langfuse", "callback_type": "success",
		"callback_vars": map[string]string{"langfuse_public_key": "pk-lf", "langfuse_secret_key": "sk-lf-secret", "langfuse_host": host}})
	if resp.Status != 200 {
		d.t.Fatalf("add callback: %d %s", resp.Status, resp.Body)
	}
}

func (d *deliveryRun) embed(key string) {
	d.t.Helper()
	if resp := d.g.Do("POST", "/v1/embeddings", key, `{"model":"small","input":"hello"}`); resp.Status != 200 {
		d.t.Fatalf("embeddings: %d %s", resp.Status, resp.Body)
	}
}
