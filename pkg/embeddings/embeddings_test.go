package embeddings

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/binary"
	"encoding/json"
	"io"
	"math"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/sluice-gateway/sluice/pkg/api"
	"github.com/sluice-gateway/sluice/pkg/auth"
	"github.com/sluice-gateway/sluice/pkg/jsonscan"
	"github.com/sluice-gateway/sluice/pkg/logevent"
	"github.com/sluice-gateway/sluice/pkg/modelcall"
	"github.com/sluice-gateway/sluice/pkg/models"
	"github.com/sluice-gateway/sluice/pkg/oai"
	"github.com/sluice-gateway/sluice/pkg/store"
)

// fakeRouter answers every call with one scripted outcome.
type fakeRouter struct {
	body     string
	encoding string
	err      error
	waited   time.Duration
	// estimated: the answer's usage is sluice's estimate.
	estimated bool
	finished  int64
	got       *oai.EmbeddingRequest
}

func (f *fakeRouter) Embed(ctx context.Context, p auth.Principal, req *oai.EmbeddingRequest) (*models.Reply, error) {
	f.got = req
	rep := &models.Reply{Target: models.Target{ModelGroup: req.Model, DeploymentID: "d1", Provider: "openai", Model: "text-embedding-3-small", APIBase: "https://api.openai.com/v1"}, Attempts: 1}
	api.AddWait(ctx, f.waited)
	if f.err != nil {
		return rep, f.err
	}
	rep.Answer = &models.Answer{Body: io.NopCloser(strings.NewReader(f.body)), ContentLength: int64(len(f.body)), Encoding: f.encoding, UsageEstimated: f.estimated}
	return rep, nil
}

func (f *fakeRouter) Finish(ctx context.Context, p auth.Principal, rep *models.Reply, tokens int64) {
	f.finished += tokens
}

// recordingBus keeps what the emitter publishes.
type recordingBus struct {
	mu     sync.Mutex
	events []logevent.Event
}

func (b *recordingBus) Publish(ctx context.Context, events ...store.Event) error {
	b.mu.Lock()
	defer b.mu.Unlock()
	for _, e := range events {
		var ev logevent.Event
		if err := json.Unmarshal(e.Body, &ev); err != nil {
			return err
		}
		b.events = append(b.events, ev)
	}
	return nil
}

var listening = logevent.ListeningFunc(func(context.Context, string, string) (bool, error) { return true, nil })

var teamKey = auth.Principal{TeamID: "team-1", Key: &auth.KeyInfo{Token: "tok", KeyAlias: "search-prod"}, Team: &auth.Team{TeamID: "team-1", TeamAlias: "search"}}

// handler is the route as the server mounts it: the operation in the
// call layer's HTTP shell.
func handler(router *fakeRouter, events *logevent.Emitter) func(http.ResponseWriter, *http.Request) error {
	return modelcall.Handler(New(router, modelcall.New(events, router)).Create, 1<<20)
}

func serve(t *testing.T, router *fakeRouter, body string) (*httptest.ResponseRecorder, []logevent.Event) {
	t.Helper()
	bus := &recordingBus{}
	h := handler(router, logevent.NewEmitter(bus, nil, listening, 0))
	r := httptest.NewRequest("POST", "/v1/embeddings", strings.NewReader(body))
	r = r.WithContext(auth.WithPrincipal(api.WithStart(api.WithRequestID(r.Context(), "req_1"), time.Now()), teamKey))
	w := httptest.NewRecorder()
	if err := h(w, r); err != nil {
		api.WriteError(w, r, err)
	}
	return w, bus.events
}

func TestRelayPassesTheAnswerThrough(t *testing.T) {
	answer := string(response(2, 16, "base64", 9))
	router := &fakeRouter{body: answer, encoding: "base64", waited: 20 * time.Millisecond}
	w, events := serve(t, router, `{"model":"small","input":["a","b"],"encoding_format":"base64","user":"end-user"}`)
	if w.Code != 200 || w.Body.String() != answer {
		t.Fatalf("%d %s", w.Code, w.Body)
	}
	if w.Header().Get("Content-Length") != strconv.Itoa(len(answer)) || w.Header().Get("Content-Type") != "application/json" {
		t.Errorf("headers %v", w.Header())
	}
	overhead, err := strconv.ParseFloat(w.Header().Get(api.OverheadHeader), 64)
	if err != nil || overhead < 0 || overhead > 1000 {
		t.Errorf("overhead %q", w.Header().Get(api.OverheadHeader))
	}
	if router.finished != 9 {
		t.Errorf("tokens recorded %d", router.finished)
	}
	if len(events) != 1 {
		t.Fatalf("%d events", len(events))
	}
	ev := events[0]
	want := logevent.Event{
		ID: "req_1", TraceID: "req_1", CallType: "aembedding", Status: "success", CustomLLMProvider: "openai",
		PromptTokens: 9, TotalTokens: 9, Model: "text-embedding-3-small", ModelID: "d1", ModelGroup: "small",
		APIBase: "https://api.openai.com/v1", EndUser: "end-user", Messages: json.RawMessage(`["a","b"]`),
		ModelParameters: json.RawMessage(`{"encoding_format":"base64","user":"end-user"}`),
		Metadata: logevent.Metadata{UserAPIKeyHash: "tok", UserAPIKeyAlias: "search-prod", UserAPIKeyTeamID: "team-1",
			UserAPIKeyTeamAlias: "search", RequestID: "req_1"},
		RequestTags: []string{},
	}
	if diff := cmp.Diff(want, ev, cmpopts.IgnoreFields(logevent.Event{}, "Response", "StartTime", "EndTime", "CompletionStartTime", "ResponseTime")); diff != "" {
		t.Errorf("event (-want +got):\n%s", diff)
	}
	var sum summary
	if err := strictJSON(ev.Response, &sum); err != nil {
		t.Fatalf("response summary %s: %v", ev.Response, err)
	}
	wantSum := summary{Object: "list", Model: "text-embedding-3-small", DataCount: 2, Dimensions: 16, EncodingFormat: "base64",
		Usage: oai.Usage{PromptTokens: 9, TotalTokens: 9}}
	if diff := cmp.Diff(wantSum, sum); diff != "" {
		t.Errorf("response summary (-want +got):\n%s", diff)
	}
	if bytes.Contains(ev.Response, []byte(answer[60:90])) {
		t.Error("the event carries the vectors")
	}
	if ev.EndTime < ev.StartTime || ev.CompletionStartTime < ev.StartTime {
		t.Errorf("times %v %v %v", ev.StartTime, ev.CompletionStartTime, ev.EndTime)
	}
}

func TestConvertsWhenTheProviderAnswersInTheOtherEncoding(t *testing.T) {
	vec := []float32{1, -0.5, 0.25, float32(math.Pi)}
	floatAnswer := `{"object":"list","data":[{"object":"embedding","index":1,"embedding":[0.5]},{"object":"embedding","index":0,"embedding":[1,-0.5,0.25,3.1415927]}],"model":"m","usage":{"prompt_tokens":3,"total_tokens":3}}`
	w, events := serve(t, &fakeRouter{body: floatAnswer, encoding: "float"}, `{"model":"small","input":["a","b"],"encoding_format":"base64"}`)
	if w.Code != 200 {
		t.Fatalf("%d %s", w.Code, w.Body)
	}
	var got struct {
		Data []struct {
			Index     int    `json:"index"`
			Embedding string `json:"embedding"`
			Object    string `json:"object"`
		} `json:"data"`
		Model string    `json:"model"`
		Usage oai.Usage `json:"usage"`
	}
	if err := json.Unmarshal(w.Body.Bytes(), &got); err != nil {
		t.Fatal(err)
	}
	if len(got.Data) != 2 || got.Data[0].Index != 0 || got.Data[1].Index != 1 || got.Model != "m" || got.Usage.PromptTokens != 3 || got.Data[0].Object != "embedding" {
		t.Fatalf("%s", w.Body)
	}
	raw, err := base64.StdEncoding.DecodeString(got.Data[0].Embedding)
	if err != nil || len(raw) != 16 {
		t.Fatal(err, len(raw))
	}
	for i, want := range vec {
		if f := math.Float32frombits(binary.LittleEndian.Uint32(raw[4*i:])); f != want {
			t.Errorf("value %d: %v, want %v", i, f, want)
		}
	}
	if events[0].TotalTokens != 3 {
		t.Errorf("usage after conversion %+v", events[0])
	}

	// And back: base64 from the provider, floats for the client.
	b64 := `{"object":"list","data":[{"object":"embedding","index":0,"embedding":"` + got.Data[0].Embedding + `"}],"model":"m","usage":{"prompt_tokens":1,"total_tokens":1}}`
	w, _ = serve(t, &fakeRouter{body: b64, encoding: "base64"}, `{"model":"small","input":"a"}`)
	var floats struct {
		Data []struct {
			Embedding []float32 `json:"embedding"`
		} `json:"data"`
	}
	if err := json.Unmarshal(w.Body.Bytes(), &floats); err != nil || len(floats.Data) != 1 {
		t.Fatalf("%s %v", w.Body, err)
	}
	for i, want := range vec {
		if floats.Data[0].Embedding[i] != want {
			t.Errorf("value %d: %v, want %v", i, floats.Data[0].Embedding[i], want)
		}
	}
}

func TestUnreadableAnswerToConvert(t *testing.T) {
	w, events := serve(t, &fakeRouter{body: `{"data":[{"embedding":"%%%"}]}`, encoding: "base64"}, `{"model":"small","input":"a"}`)
	if w.Code != 502 || !strings.Contains(w.Body.String(), "upstream_error") {
		t.Errorf("%d %s", w.Code, w.Body)
	}
	if len(events) != 1 || events[0].Status != "failure" {
		t.Errorf("events %+v", events)
	}
}

func TestFailuresAreLogged(t *testing.T) {
	for _, tc := range []struct {
		name   string
		router *fakeRouter
		body   string
		status int
	}{
		{"bad input", &fakeRouter{}, `{"model":"small","input":""}`, 400},
		{"router refuses", &fakeRouter{err: api.Forbidden("no")}, `{"model":"small","input":"a"}`, 403},
		{"provider fails", &fakeRouter{err: api.Upstream(nil, "boom")}, `{"model":"small","input":"a"}`, 502},
	} {
		t.Run(tc.name, func(t *testing.T) {
			w, events := serve(t, tc.router, tc.body)
			if w.Code != tc.status || w.Header().Get(api.OverheadHeader) == "" {
				t.Errorf("%d %v", w.Code, w.Header())
			}
			if len(events) != 1 {
				t.Fatalf("%d events", len(events))
			}
			ev := events[0]
			if ev.Status != "failure" || ev.ErrorInformation == nil || ev.ErrorInformation.ErrorCode != strconv.Itoa(tc.status) || ev.ErrorStr == "" || ev.Metadata.UserAPIKeyTeamID != "team-1" {
				t.Errorf("event %+v %+v", ev, ev.ErrorInformation)
			}
		})
	}
}

// failingWriter is a client that goes away after the headers.
type failingWriter struct{ http.ResponseWriter }

func (failingWriter) Write([]byte) (int, error) { return 0, io.ErrClosedPipe }

func TestClientGoneMidAnswer(t *testing.T) {
	bus := &recordingBus{}
	h := handler(&fakeRouter{body: string(response(1, 8, "float", 2)), encoding: "float"}, logevent.NewEmitter(bus, nil, listening, 0))
	r := httptest.NewRequest("POST", "/v1/embeddings", strings.NewReader(`{"model":"m","input":"a"}`))
	err := h(failingWriter{httptest.NewRecorder()}, r)
	if err == nil || len(bus.events) != 1 || bus.events[0].Status != "failure" {
		t.Errorf("err %v events %+v", err, bus.events)
	}
}

func BenchmarkRelay(b *testing.B) {
	answer := string(response(1, 1536, "float", 8))
	h := handler(&fakeRouter{body: answer, encoding: "float"}, nil)
	body := `{"model":"text-embedding-3-small","input":"The food was delicious and the waiter was friendly."}`
	ctx := auth.WithPrincipal(context.Background(), teamKey)
	b.ReportAllocs()
	for b.Loop() {
		r := httptest.NewRequest("POST", "/v1/embeddings", strings.NewReader(body)).WithContext(ctx)
		w := httptest.NewRecorder()
		if err := h(w, r); err != nil || w.Body.Len() != len(answer) {
			b.Fatal(err)
		}
	}
}

// summary is the log event's summary of an embeddings answer as a struct:
// what summarize writes must read back into it, and nothing else.
type summary struct {
	Object         string    `json:"object"`
	Model          string    `json:"model,omitempty"`
	DataCount      int       `json:"data_count"`
	Dimensions     int       `json:"dimensions,omitempty"`
	EncodingFormat string    `json:"encoding_format"`
	Usage          oai.Usage `json:"usage"`
}

func strictJSON(b []byte, v any) error {
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	return dec.Decode(v)
}

// The summary is what encoding/json writes for its struct.
func TestSummaryIsEncodingJSONs(t *testing.T) {
	var scan Scanner
	if _, err := scan.Write([]byte(`{"object":"list","data":[{"object":"embedding","index":0,"embedding":[0.1,0.2,0.3]}],"model":"m","usage":{"prompt_tokens":3,"total_tokens":3}}`)); err != nil {
		t.Fatal(err)
	}
	u, _ := scan.Usage()
	got := summarize(&scan, "float", u)
	want, err := json.Marshal(summary{Object: "list", Model: scan.Model(), DataCount: scan.Count(), Dimensions: scan.Dimensions(), EncodingFormat: "float", Usage: u})
	if err != nil {
		t.Fatal(err)
	}
	if string(got) != string(want) {
		t.Errorf("summarize %s, encoding/json %s", got, want)
	}
}

// summarize's copies (the model literal, the usual encodings) write what
// the slow path — decode the model, encode each string — writes.
func TestSummaryCopiesAgreeWithEncoding(t *testing.T) {
	for _, model := range []string{`"m"`, `"text-embedding-3-small"`, ` "m" `, `""`, `null`, `1`, `"a\"b"`, `"\u00e9"`,
		`"é"`, "\"\u2028\"", `"<&>"`, `"\ud800"`, "\"\xff\"", `"a\/b"`} {
		for _, encoding := range []string{oai.EncodingFloat, oai.EncodingBase64, ""} {
			var scan Scanner
			scan.Write([]byte(`{"data":[{"embedding":[1,2]}],"model":` + model + `,"usage":{"prompt_tokens":3}}`))
			u, _ := scan.Usage()
			o := jsonscan.StartObject(nil)
			o.String("object", "list")
			o.StringOmitEmpty("model", scan.Model())
			o.Int("data_count", int64(scan.Count()))
			o.Int("dimensions", int64(scan.Dimensions()))
			o.String("encoding_format", encoding)
			o.Key("usage")
			o.B = u.AppendJSON(o.B)
			if got, want := summarize(&scan, encoding, u), o.End(); string(got) != string(want) {
				t.Errorf("model %s, encoding %q: summarize %s, slow path %s", model, encoding, got, want)
			}
		}
	}
}

// A meter's state is reused from call to call (the service's pool): each
// call's summary is its own answer's, nothing of the call before.
func TestEachCallsSummaryIsItsOwn(t *testing.T) {
	bus := &recordingBus{}
	router := &fakeRouter{encoding: "float"}
	h := handler(router, logevent.NewEmitter(bus, nil, listening, 0))
	answers := []string{
		string(response(2, 16, "float", 9)),
		`{"object":"list","data":[{"object":"embedding","index":0,"embedding":[1,2,3]}],"model":"m2"}`,
		string(response(1, 4, "float", 5)),
	}
	want := []summary{
		{Object: "list", Model: "text-embedding-3-small", DataCount: 2, Dimensions: 16, EncodingFormat: "float", Usage: oai.Usage{PromptTokens: 9, TotalTokens: 9}},
		{Object: "list", Model: "m2", DataCount: 1, Dimensions: 3, EncodingFormat: "float"},
		{Object: "list", Model: "text-embedding-3-small", DataCount: 1, Dimensions: 4, EncodingFormat: "float", Usage: oai.Usage{PromptTokens: 5, TotalTokens: 5}},
	}
	ctx := auth.WithPrincipal(context.Background(), teamKey)
	for i, answer := range answers {
		router.body = answer
		r := httptest.NewRequest("POST", "/v1/embeddings", strings.NewReader(`{"model":"small","input":"x"}`)).WithContext(ctx)
		w := httptest.NewRecorder()
		if err := h(w, r); err != nil || w.Body.String() != answer {
			t.Fatalf("call %d: %v %s", i, err, w.Body)
		}
		if len(bus.events) != i+1 {
			t.Fatalf("call %d: %d events", i, len(bus.events))
		}
		var sum summary
		if err := strictJSON(bus.events[i].Response, &sum); err != nil {
			t.Fatalf("call %d: summary %s: %v", i, bus.events[i].Response, err)
		}
		if diff := cmp.Diff(want[i], sum); diff != "" {
			t.Errorf("call %d: summary (-want +got):\n%s", i, diff)
		}
	}
}

// A meter is spent once it has ended: its state is back in the pool, and
// the meter no longer reaches it.
func TestMeterIsSpentAtEnd(t *testing.T) {
	s := New(&fakeRouter{}, modelcall.New(nil, nil))
	m := s.meter(oai.EncodingFloat)
	m.Write([]byte(`{"data":[{"embedding":[1,2]}],"model":"m","usage":{"prompt_tokens":2,"total_tokens":2}}`))
	var ev logevent.Event
	u, err := m.End(&ev)
	if err != nil || u.PromptTokens != 2 || len(ev.Response) == 0 {
		t.Fatalf("End: %+v %v %s", u, err, ev.Response)
	}
	if m.scanning != nil {
		t.Error("the meter still holds its state after End")
	}
}
