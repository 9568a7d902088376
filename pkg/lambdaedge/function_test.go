package lambdaedge

import (
	"bytes"
	"context"
	"encoding/json"
	"log/slog"
	"net/http"
	"testing"

	"github.com/aws/aws-lambda-go/lambdacontext"

	"github.com/sluice-gateway/sluice/pkg/logging"
)

// TestHTTPFunction: the same handler answers in the format its mode says,
// through aws-lambda-go's handler path.
func TestHTTPFunction(t *testing.T) {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /v1/models", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.Write([]byte(`{"object":"list","data":[]}`))
	})
	for _, stream := range []bool{false, true} {
		out, err := invoke(t, HTTPFunction(mux, stream), restEvent("GET", "/v1/models"))
		if err != nil {
			t.Fatal(err)
		}
		if got := bytes.Contains(out, make([]byte, 8)); got != stream {
			t.Errorf("stream %v: answer %q", stream, out)
		}
		resp := answer(t, HTTPFunction(mux, stream), stream, restEvent("GET", "/v1/models"))
		if resp.Status != http.StatusOK || string(resp.Body) != `{"object":"list","data":[]}` {
			t.Errorf("stream %v: %d %s", stream, resp.Status, resp.Body)
		}
	}
}

// TestInvocationLogAttributes: records logged during an invocation carry
// Lambda's and API Gateway's request ids next to level, timestamp, message.
func TestInvocationLogAttributes(t *testing.T) {
	var buf bytes.Buffer
	log := logging.New(&buf, "json", "info")
	ctx := lambdacontext.NewContext(context.Background(), &lambdacontext.LambdaContext{AwsRequestID: "aws-1"})
	log.InfoContext(invocationContext(ctx, "apigw-1"), "hello", slog.Int("n", 1))
	var rec map[string]any
	if err := json.Unmarshal(buf.Bytes(), &rec); err != nil {
		t.Fatalf("%s: %v", buf.Bytes(), err)
	}
	for k, want := range map[string]any{"level": "INFO", "message": "hello", "aws_request_id": "aws-1", "apigw_request_id": "apigw-1"} {
		if rec[k] != want {
			t.Errorf("%s = %v, want %v (record %s)", k, rec[k], want, buf.Bytes())
		}
	}
	if _, ok := rec["timestamp"]; !ok {
		t.Errorf("no timestamp: %s", buf.Bytes())
	}
}

func TestNewLoggerLevel(t *testing.T) {
	for _, tc := range []struct {
		env   map[string]string
		debug bool
		info  bool
	}{
		{map[string]string{}, false, true},
		{map[string]string{"AWS_LAMBDA_LOG_LEVEL": "TRACE"}, true, true},
		{map[string]string{"AWS_LAMBDA_LOG_LEVEL": "ERROR"}, false, false},
		{map[string]string{"AWS_LAMBDA_LOG_LEVEL": "ERROR", "SLUICE_LOG_LEVEL": "debug"}, true, true},
	} {
		l := NewLogger(func(k string) string { return tc.env[k] })
		ctx := context.Background()
		if l.Enabled(ctx, slog.LevelDebug) != tc.debug || l.Enabled(ctx, slog.LevelInfo) != tc.info {
			t.Errorf("%v: debug %v info %v", tc.env, l.Enabled(ctx, slog.LevelDebug), l.Enabled(ctx, slog.LevelInfo))
		}
	}
}
