package logging

import (
	"bytes"
	"context"
	"encoding/json"
	"log/slog"
	"strings"
	"testing"

	"github.com/sluice-gateway/sluice/pkg/api"
)

func TestJSONRecordsCarryLambdaNamesAndRequestID(t *testing.T) {
	var buf bytes.Buffer
	log := New(&buf, "json", "info")
	ctx := api.WithRequestID(context.Background(), "req_abc")
	ctx = WithAttrs(ctx, slog.String("aws_request_id", "lambda-1"))
	log.InfoContext(ctx, "hello", "n", 1)
	log.DebugContext(ctx, "hidden")
	var rec map[string]any
	if err := json.Unmarshal(bytes.TrimSpace(buf.Bytes()), &rec); err != nil {
		t.Fatalf("not one JSON record: %q", buf.String())
	}
	for k, want := range map[string]any{"message": "hello", "level": "INFO", "request_id": "req_abc", "aws_request_id": "lambda-1", "n": 1.0} {
		if rec[k] != want {
			t.Errorf("%s = %v, want %v (record %v)", k, rec[k], want, rec)
		}
	}
	if _, ok := rec["timestamp"]; !ok {
		t.Error("no timestamp field")
	}
}

func TestTextFormatAndLevel(t *testing.T) {
	var buf bytes.Buffer
	log := New(&buf, "text", "warn")
	log.Info("quiet")
	log.Warn("loud")
	if out := buf.String(); strings.Contains(out, "quiet") || !strings.Contains(out, "msg=loud") {
		t.Errorf("output = %q", out)
	}
	buf.Reset()
	// auto on something that is not a terminal is JSON.
	New(&buf, "auto", "").Info("x")
	if !strings.HasPrefix(buf.String(), "{") {
		t.Errorf("auto on a buffer = %q, want JSON", buf.String())
	}
}

func TestWithAttrsDoesNotLeakBetweenContexts(t *testing.T) {
	base := WithAttrs(context.Background(), slog.String("a", "1"))
	one := WithAttrs(base, slog.String("b", "2"))
	two := WithAttrs(base, slog.String("c", "3"))
	var buf bytes.Buffer
	log := New(&buf, "json", "info")
	log.InfoContext(two, "x")
	if strings.Contains(buf.String(), `"b"`) {
		t.Errorf("attributes of a sibling context leaked: %s", buf.String())
	}
	_ = one
}
