package lambdafn_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-lambda-go/lambdacontext"

	"github.com/sluice-gateway/sluice/pkg/gateway/gatewaytest"
	"github.com/sluice-gateway/sluice/pkg/gateway/lambdafn"
	"github.com/sluice-gateway/sluice/pkg/metrics"
)

// lockedBuffer is a function's stdout, written from the handler's goroutines.
type lockedBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *lockedBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *lockedBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// TestChatFunctionPrintsEMF runs the chat-completions function on its
// streamed sample event and checks every line it prints against the EMF
// specification, and that the lines carry the call's measurements.
func TestChatFunctionPrintsEMF(t *testing.T) {
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		w.Header().Set("Content-Type", "text/event-stream")
		io.WriteString(w, `data: {"id":"c1","object":"chat.completion.chunk","created":1,"model":"gpt-4o-mini","choices":[{"index":0,"delta":{"role":"assistant","content":"Rayleigh."},"finish_reason":"stop"}]}`+"\n\n")
		io.WriteString(w, `data: {"id":"c1","object":"chat.completion.chunk","created":1,"model":"gpt-4o-mini","choices":[],"usage":{"prompt_tokens":21,"completion_tokens":3,"total_tokens":24}}`+"\n\n")
		io.WriteString(w, "data: [DONE]\n\n")
	}))
	t.Cleanup(up.Close)
	stdout := &lockedBuffer{}
	g := gatewaytest.Start(t, gatewaytest.Backends()[0], gatewaytest.Options{
		Config: "model_list:\n  - model_name: gpt-4o-mini\n    litellm_params: {model: openai/gpt-4o-mini, api_base: " + up.URL + "/v1, api_key: k}\n",
		Metrics: func(o *metrics.Options) {
			o.EMF, o.Namespace, o.Function = stdout, "sluice/test-stack", "sluice-test-chat-completions"
		},
	})
	raw, err := os.ReadFile(filepath.Join("..", "..", "..", "events", "chat-completions", "create-stream.json"))
	if err != nil {
		t.Fatal(err)
	}
	var ev events.APIGatewayProxyRequest
	if err := json.Unmarshal(raw, &ev); err != nil {
		t.Fatal(err)
	}
	ev.Headers["Authorization"] = "Bearer " + g.MasterKey
	ev.MultiValueHeaders["Authorization"] = []string{"Bearer " + g.MasterKey}
	event, _ := json.Marshal(ev)
	h, err := lambdafn.Handler(g.Services, "chat-completions")
	if err != nil {
		t.Fatal(err)
	}
	ctx := lambdacontext.NewContext(context.Background(), &lambdacontext.LambdaContext{AwsRequestID: "emf-1"})
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	if _, err := h.Invoke(ctx, event); err != nil {
		t.Fatal(err)
	}

	seen := map[string]float64{}
	sc := bufio.NewScanner(bytes.NewReader([]byte(stdout.String())))
	lines := 0
	for sc.Scan() {
		lines++
		for name, v := range validEMF(t, sc.Bytes()) {
			seen[name] += v
		}
	}
	if lines == 0 {
		t.Fatal("the function printed no EMF line")

	}
	for name, want := range map[string]float64{"Requests": 1, "Errors": 0, "ModelCalls": 1, "InputTokens": 21, "OutputTokens": 3, "StoreErrors": 0} {
		if got, ok := seen[name]; !ok || got != want {
			t.Errorf("%s = %v (present %v), want %v", name, got, ok, want)
		}
	}
	// The event's publish is a store operation of the invocation, in its
	// one store line.
	for _, name := range []string{"RequestDuration", "Overhead", "ModelCallDuration", "TimeToFirstToken", "SpendUSD", "StoreBusDuration"} {
		if _, ok := seen[name]; !ok {
			t.Errorf("no %s in the EMF lines", name)
		}
	}
}

// emfValue is a metric member's value: a number, or the sum of an array
// of 1 to 100 numbers (EMF's form for several observations).
func emfValue(v any) (float64, bool) {
	switch v := v.(type) {
	case float64:
		return v, true
	case []any:
		if len(v) == 0 || len(v) > 100 {
			return 0, false
		}
		sum := 0.0
		for _, e := range v {
			f, ok := e.(float64)
			if !ok {
				return 0, false
			}
			sum += f
		}
		return sum, true
	}
	return 0, false
}

// emfUnits are CloudWatch's units (MetricDatum.Unit).
var emfUnits = []string{"Seconds", "Microseconds", "Milliseconds", "Bytes", "Kilobytes", "Megabytes", "Gigabytes", "Terabytes",
	"Bits", "Kilobits", "Megabits", "Gigabits", "Terabits", "Percent", "Count", "Bytes/Second", "Kilobytes/Second",
	"Megabytes/Second", "Gigabytes/Second", "Terabytes/Second", "Bits/Second", "Kilobits/Second", "Megabits/Second",
	"Gigabits/Second", "Terabits/Second", "Count/Second", "None"}

// validEMF checks line against the EMF specification and returns its
// metrics' values: a JSON object whose _aws member has a millisecond
// Timestamp and CloudWatchMetrics directives, each with a Namespace, at
// most 30 dimension keys a set (each a root member holding a string) and
// at most 100 metrics (each a root member holding a number), with units
// CloudWatch knows.
func validEMF(t *testing.T, line []byte) map[string]float64 {
	t.Helper()
	var root map[string]any
	if err := json.Unmarshal(line, &root); err != nil {
		t.Fatalf("not a JSON object: %s", line)
	}
	var meta struct {
		Timestamp         *float64 `json:"Timestamp"`
		CloudWatchMetrics []struct {
			Namespace  *string    `json:"Namespace"`
			Dimensions [][]string `json:"Dimensions"`
			Metrics    []struct {
				Name string `json:"Name"`
				Unit string `json:"Unit"`
			} `json:"Metrics"`
		} `json:"CloudWatchMetrics"`
	}
	aws, _ := json.Marshal(root["_aws"])
	if err := json.Unmarshal(aws, &meta); err != nil || meta.Timestamp == nil || len(meta.CloudWatchMetrics) == 0 {
		t.Fatalf("no valid _aws metadata (Timestamp, CloudWatchMetrics): %s", line)
	}
	if age := time.Since(time.UnixMilli(int64(*meta.Timestamp))); age < 0 || age > time.Minute {
		t.Errorf("Timestamp %v is not now in milliseconds: %s", *meta.Timestamp, line)
	}
	values := map[string]float64{}
	for _, d := range meta.CloudWatchMetrics {
		if d.Namespace == nil || *d.Namespace != "sluice/test-stack" {
			t.Errorf("namespace %v, want sluice/test-stack: %s", d.Namespace, line)
		}
		if d.Dimensions == nil {
			t.Errorf("no Dimensions: %s", line)
		}
		for _, set := range d.Dimensions {
			if len(set) > 30 {
				t.Errorf("dimension set of %d keys: %s", len(set), line)
			}
			for _, k := range set {
				if v, ok := root[k].(string); !ok || v == "" {
					t.Errorf("dimension %s is not a non-empty string member: %s", k, line)
				}
			}
		}
		if len(d.Metrics) == 0 || len(d.Metrics) > 100 {
			t.Errorf("%d metrics: %s", len(d.Metrics), line)
		}
		for _, m := range d.Metrics {
			v, ok := emfValue(root[m.Name])
			if m.Name == "" || !ok {
				t.Errorf("metric %q has no numeric value (a number, or an array of 1 to 100): %s", m.Name, line)
			}
			if !slices.Contains(emfUnits, m.Unit) {
				t.Errorf("metric %s has unit %q: %s", m.Name, m.Unit, line)
			}
			values[m.Name] += v
		}
	}
	return values
}
