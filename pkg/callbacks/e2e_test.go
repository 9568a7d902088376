package callbacks_test

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/sluice-gateway/sluice/pkg/callbacks"
	"github.com/sluice-gateway/sluice/pkg/gateway/gatewaytest"
	"github.com/sluice-gateway/sluice/pkg/logevent"
	"github.com/sluice-gateway/sluice/pkg/store"
)

const answer = `{"object":"list","data":[{"object":"embedding","index":0,"embedding":[0.1,0.2]}],"model":"text-embedding-3-small","usage":{"prompt_tokens":2,"total_tokens":2}}`

// TestEventsReachTheDeliveryQueue: a call of a team with a callback is
// published and arrives on the Deliveries queue (locally the in-process
// bus; on AWS the SNS topic's SQS subscription); a call of a team without
// one is not published.
func TestEventsReachTheDeliveryQueue(t *testing.T) {
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		w.Header().Set("Content-Type", "application/json")
		io.WriteString(w, answer)
	}))
	defer up.Close()
	cfg := "model_list:\n  - model_name: small\n    litellm_params: {model: openai/text-embedding-3-small, api_base: " + up.URL + ", api_key: k}\n"
	gatewaytest.Run(t, gatewaytest.Options{Config: cfg}, func(t *testing.T, g *gatewaytest.Gateway) {
		ctx := context.Background()
		quiet, quietKey := g.TeamKey()
		listened, listenedKey := g.TeamKey()
		rec := store.Record{Key: callbacks.RecordKey(listened, callbacks.Langfuse, callbacks.TypeSuccess), Body: []byte(`{}`)}
		if err := g.Backend.Records.Put(ctx, rec, store.Cond{}); err != nil {
			t.Fatal(err)
		}
		for _, key := range []string{quietKey, listenedKey} {
			if resp := g.Do("POST", "/v1/embeddings", key, `{"model":"small","input":"hello"}`); resp.Status != 200 {
				t.Fatalf("embeddings: %d %s", resp.Status, resp.Body)
			}
		}
		ev := receive(t, g.Backend.Deliveries, listened, quiet)
		if ev.CallType != logevent.CallEmbedding || ev.Status != logevent.StatusSuccess || ev.ModelGroup != "small" || ev.TotalTokens != 2 || string(ev.Messages) != `"hello"` {
			t.Errorf("event %+v", ev)
		}
	})
}

// receive reads the delivery queue until the event of team want arrives,
// failing on an event of team never.
func receive(t *testing.T, q store.Queue, want, never string) logevent.Event {
	t.Helper()
	ctx := context.Background()
	deadline := time.Now().Add(20 * time.Second)
	for time.Now().Before(deadline) {
		msgs, err := q.Receive(ctx, 10, time.Second)
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range msgs {
			e, err := store.DecodeEvent(m)
			if err != nil {
				t.Fatal(err)
			}
			q.Ack(ctx, m)
			var ev logevent.Event
			if err := json.Unmarshal(e.Body, &ev); err != nil {
				t.Fatalf("event body %s: %v", e.Body, err)
			}
			switch team := e.Attributes[logevent.AttrTeam]; team {
			case never:
				t.Fatalf("an event of a team nobody listens to was published: %+v", ev)
			case want:
				if ev.Metadata.UserAPIKeyTeamID != want || e.Attributes[logevent.AttrStatus] != ev.Status {
					t.Errorf("attributes %v, event %+v", e.Attributes, ev.Metadata)
				}
				return ev
			}
		}
	}
	t.Fatal("the event never arrived")
	return logevent.Event{}
}
