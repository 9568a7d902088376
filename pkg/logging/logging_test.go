package logging

import (
	"bytes"
	"context"
	"encoding/json"
	"log/slog"
	"reflect"
	"strings"
	"testing"

	"github.com/sluice-gateway/sluice/pkg/api"
	"github.com/sluice-gateway/sluice/pkg/logging/logtest"
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

// TestMemberNamesAreUnique: attributes named like a built-in field, like an
// attribute of the logger, of the context or of the same record get a free
// name; an exact repeat is dropped; nothing is lost.
func TestMemberNamesAreUnique(t *testing.T) {
	var buf bytes.Buffer
	log := New(&buf, "json", "info").With("component", "api", "message", "bound")
	ctx := WithAttrs(api.WithRequestID(context.Background(), "req_1"), slog.String("component", "ctx"))
	log.InfoContext(ctx, "request refused",
		"message", "Method PUT is not allowed", "msg", "short", "level", "x", "timestamp", "y", "time", "z",
		"request_id", "req_1", "status", 405, "status", 406, "", "nameless",
		slog.Group("g", "a", 1, "a", 2), slog.Group("", "component", "inline"))
	if err := logtest.CheckJSONLines(buf.Bytes()); err != nil {
		t.Fatal(err)
	}
	var rec map[string]any
	if err := json.Unmarshal(buf.Bytes(), &rec); err != nil {
		t.Fatal(err)
	}
	want := map[string]any{
		"message": "request refused", "level": "INFO",
		"message_2": "bound", "message_3": "Method PUT is not allowed", "msg_2": "short",
		"level_2": "x", "timestamp_2": "y", "time_2": "z",
		"component": "api", "component_2": "inline", "component_3": "ctx",
		"request_id": "req_1", "status": 405.0, "status_2": 406.0,
		"g": map[string]any{"a": 1.0, "a_2": 2.0},
	}
	for k, v := range want {
		if !reflect.DeepEqual(rec[k], v) {
			t.Errorf("%s = %v, want %v", k, rec[k], v)
		}
	}
	if len(rec) != len(want)+1 { // + timestamp
		t.Errorf("record has %d members, want %d: %v", len(rec), len(want)+1, rec)
	}
}
