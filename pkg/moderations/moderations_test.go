package moderations

import (
	"context"
	"encoding/json"
	"io"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/sluice-gateway/sluice/pkg/api"
	"github.com/sluice-gateway/sluice/pkg/auth"
	"github.com/sluice-gateway/sluice/pkg/config"
	"github.com/sluice-gateway/sluice/pkg/logevent"
	"github.com/sluice-gateway/sluice/pkg/modelcall"
	"github.com/sluice-gateway/sluice/pkg/models"
	"github.com/sluice-gateway/sluice/pkg/oai"
	"github.com/sluice-gateway/sluice/pkg/store"
)

func TestDefaultModel(t *testing.T) {
	for _, tc := range []struct{ yaml, want string }{
		{"model_list:\n  - {model_name: mod, litellm_params: {model: openai/text-moderation-latest}, model_info: {mode: moderation}}\n  - {model_name: omni-moderation-latest, litellm_params: {model: openai/omni-moderation-latest}}\n", "omni-moderation-latest"},
		{"model_list:\n  - {model_name: emb, litellm_params: {model: openai/x}, model_info: {mode: embedding}}\n  - {model_name: mod, litellm_params: {model: openai/text-moderation-latest}, model_info: {mode: moderation}}\n  - {model_name: mod2, litellm_params: {model: openai/y}, model_info: {mode: moderation}}\n", "mod"},
		{"model_list:\n  - {model_name: emb, litellm_params: {model: openai/x}}\n", ""},
		{"", ""},
	} {
		cfg, err := config.Parse([]byte(tc.yaml), func(string) string { return "" })
		if err != nil {
			t.Fatal(err)
		}
		if got := defaultModel(cfg); got != tc.want {
			t.Errorf("%s: %q, want %q", tc.yaml, got, tc.want)
		}
	}
}

type fakeRouter struct {
	body string
	got  *oai.ModerationRequest
}

func (f *fakeRouter) Moderate(ctx context.Context, p auth.Principal, req *oai.ModerationRequest) (*models.Reply, error) {
	f.got = req
	return &models.Reply{
		Target: models.Target{ModelGroup: req.Model, Provider: "openai", Model: "omni-moderation-latest"},
		Answer: &models.Answer{Body: io.NopCloser(strings.NewReader(f.body)), ContentLength: -1},
	}, nil
}

type recordingBus struct {
	mu     sync.Mutex
	events []logevent.Event
}

func (b *recordingBus) Publish(ctx context.Context, events ...store.Event) error {
	b.mu.Lock()
	defer b.mu.Unlock()
	for _, e := range events {
		var ev logevent.Event
		json.Unmarshal(e.Body, &ev)
		b.events = append(b.events, ev)
	}
	return nil
}

func TestCreate(t *testing.T) {
	const answer = `{"id":"modr-1","model":"omni-moderation-latest","results":[{"flagged":true,"categories":{"violence":true},"category_scores":{"violence":0.93},"category_applied_input_types":{"violence":["text"]}}]}`
	cfg, _ := config.Parse([]byte("model_list:\n  - {model_name: guard, litellm_params: {model: openai/omni-moderation-latest}, model_info: {mode: moderation}}\n"), func(string) string { return "" })
	run := func(router Router, body string) (*httptest.ResponseRecorder, []logevent.Event) {
		bus := &recordingBus{}
		s := New(router, modelcall.New(logevent.NewEmitter(bus, nil, logevent.ListeningFunc(func(context.Context, string, string) (bool, error) { return true, nil }), 0), nil), cfg)
		r := httptest.NewRequest("POST", "/v1/moderations", strings.NewReader(body))
		r = r.WithContext(auth.WithPrincipal(r.Context(), auth.Principal{TeamID: "t1", Key: &auth.KeyInfo{Token: "tok"}}))
		w := httptest.NewRecorder()
		if err := modelcall.Handler(s.Create, 0)(w, r); err != nil {
			api.WriteError(w, r, err)
		}
		return w, bus.events
	}
	router := &fakeRouter{body: answer}
	w, events := run(router, `{"input":"I will hurt you"}`)
	if w.Code != 200 || w.Body.String() != answer || w.Header().Get(api.OverheadHeader) == "" {
		t.Fatalf("%d %v %s", w.Code, w.Header(), w.Body)
	}
	if router.got.Model != "guard" {
		t.Errorf("default model %q", router.got.Model)
	}
	if len(events) != 1 {
		t.Fatalf("%d events", len(events))
	}
	want := logevent.Event{
		CallType: "amoderation", Status: "success", CustomLLMProvider: "openai",
		Model: "omni-moderation-latest", ModelGroup: "guard", Messages: json.RawMessage(`"I will hurt you"`),
		Response: json.RawMessage(answer), Metadata: logevent.Metadata{UserAPIKeyHash: "tok", UserAPIKeyTeamID: "t1"},
		RequestTags: []string{},
	}
	if diff := cmp.Diff(want, events[0], cmpopts.IgnoreFields(logevent.Event{}, "StartTime", "EndTime", "CompletionStartTime", "ResponseTime")); diff != "" {
		t.Errorf("event (-want +got):\n%s", diff)
	}

	w, events = run(router, `{"input":[]}`)
	if w.Code != 400 || len(events) != 1 || events[0].Status != "failure" {
		t.Errorf("%d %s %+v", w.Code, w.Body, events)
	}

	empty, _ := config.Parse(nil, func(string) string { return "" })
	s := New(router, modelcall.New(nil, nil), empty)
	_, err := s.Create(context.Background(), auth.Principal{}, []byte(`{"input":"x"}`))
	if e := api.AsError(err); e.Status != 400 || e.Param != "model" || !strings.Contains(e.Message, "No moderation model is configured") {
		t.Errorf("%v", err)
	}
}
