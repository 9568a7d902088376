package lambdaedge

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-lambda-go/lambda"

	"github.com/sluice-gateway/sluice/pkg/store"
)

// sqsRecord is an SQS record as Lambda's event source mapping delivers it.
func sqsRecord(id, body string, attrs map[string]string) events.SQSMessage {
	m := events.SQSMessage{
		MessageId:     id,
		ReceiptHandle: "AQEB" + id,
		Body:          body,
		Attributes: map[string]string{
			"ApproximateReceiveCount":          "2",
			"SentTimestamp":                    "1732579200000",
			"SenderId":                         "AIDAIENQZJOLO23YVJ4VO",
			"ApproximateFirstReceiveTimestamp": "1732579200100",
		},
		MessageAttributes: map[string]events.SQSMessageAttribute{},
		EventSource:       "aws:sqs",
		EventSourceARN:    "arn:aws:sqs:us-east-1:123456789012:sluice-work",
		AWSRegion:         "us-east-1",
	}
	for k, v := range attrs {
		m.MessageAttributes[k] = events.SQSMessageAttribute{StringValue: &v, DataType: "String"}
	}
	return m
}

func TestSQSPartialBatchFailures(t *testing.T) {
	var mu sync.Mutex
	seen := map[string]store.Message{}
	handle := func(ctx context.Context, m store.Message) error {
		mu.Lock()
		seen[m.ID] = m
		mu.Unlock()
		switch string(m.Body) {
		case "fail":
			return errors.New("upstream said no")
		case "panic":
			panic("worker bug")
		}
		return nil
	}
	ev := events.SQSEvent{Records: []events.SQSMessage{
		sqsRecord("m-ok", "plan batch_1", nil),
		sqsRecord("m-fail", "fail", nil),
		sqsRecord("m-panic", "panic", nil),
		sqsRecord("m-binary", base64.StdEncoding.EncodeToString([]byte{0, 0xff}), map[string]string{"sluice-encoding": "base64"}),
		sqsRecord("m-empty", " ", map[string]string{"sluice-encoding": "empty"}),
		sqsRecord("m-badbase64", "!!!", map[string]string{"sluice-encoding": "base64"}),
		sqsRecord("m-unknown-encoding", "x", map[string]string{"sluice-encoding": "zstd"}),
	}}
	out, err := invoke(t, SQSFunction(handle, 3), ev)
	if err != nil {
		t.Fatalf("the batch failed as a whole: %v", err)
	}
	var resp events.SQSEventResponse
	if err := json.Unmarshal(out, &resp); err != nil {
		t.Fatalf("%s: %v", out, err)
	}
	var failed []string
	for _, f := range resp.BatchItemFailures {
		failed = append(failed, f.ItemIdentifier)
	}
	sort.Strings(failed)
	if want := []string{"m-badbase64", "m-fail", "m-panic", "m-unknown-encoding"}; !slices.Equal(failed, want) {
		t.Errorf("failed %v, want %v", failed, want)
	}
	if m := seen["m-binary"]; string(m.Body) != "\x00\xff" {
		t.Errorf("binary body %q", m.Body)
	}
	if m, ok := seen["m-empty"]; !ok || len(m.Body) != 0 {
		t.Errorf("empty body %q (seen %v)", m.Body, ok)
	}
	if m := seen["m-ok"]; m.Receives != 2 || m.Receipt != "AQEBm-ok" {
		t.Errorf("message %+v", m)
	}
	if _, ok := seen["m-badbase64"]; ok {
		t.Error("an undecodable message reached the handler")
	}
}

func TestSQSAllSucceed(t *testing.T) {
	out, err := invoke(t, lambda.NewHandler(SQS(func(context.Context, store.Message) error { return nil }, 0)),
		events.SQSEvent{Records: []events.SQSMessage{sqsRecord("a", "1", nil), sqsRecord("b", "2", nil)}})
	if err != nil {
		t.Fatal(err)
	}
	// An empty list (not null) is the documented "whole batch succeeded".
	if string(out) != `{"batchItemFailures":[]}` {
		t.Errorf("answer %s", out)
	}
}

func TestSQSConcurrency(t *testing.T) {
	var running, peak atomic.Int32
	handle := func(ctx context.Context, m store.Message) error {
		n := running.Add(1)
		defer running.Add(-1)
		for {
			p := peak.Load()
			if n <= p || peak.CompareAndSwap(p, n) {
				break
			}
		}
		time.Sleep(20 * time.Millisecond)
		return nil
	}
	var recs []events.SQSMessage
	for _, id := range []string{"1", "2", "3", "4", "5", "6"} {
		recs = append(recs, sqsRecord(id, id, nil))
	}
	if _, err := SQS(handle, 2)(context.Background(), events.SQSEvent{Records: recs}); err != nil {
		t.Fatal(err)
	}
	if p := peak.Load(); p != 2 {
		t.Errorf("peak concurrency %d, want 2", p)
	}
}

// TestSQSSampleEvents: every SQS sample under events/ is a well-formed event
// whose records all decode.
func TestSQSSampleEvents(t *testing.T) {
	paths, _ := filepath.Glob("../../events/*/*.json")
	n := 0
	for _, p := range paths {
		data, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		var ev events.SQSEvent
		if json.Unmarshal(data, &ev) != nil || len(ev.Records) == 0 || ev.Records[0].EventSource != "aws:sqs" {
			continue
		}
		n++
		for _, rec := range ev.Records {
			if rec.MessageId == "" || rec.ReceiptHandle == "" {
				t.Errorf("%s: record without messageId or receiptHandle", p)
			}
			if _, err := Message(rec); err != nil {
				t.Errorf("%s: %v", p, err)
			}
		}
	}
	if n == 0 {
		t.Skip("no SQS sample events yet")
	}
}

// TestSQSRealisticEvent runs an event as Lambda's SQS event source mapping
// delivers it (testdata/sqs-batch.json): a plan, a chunk whose work fails,
// and a binary body the AWS queue adapter base64-encoded.
func TestSQSRealisticEvent(t *testing.T) {
	payload, err := os.ReadFile("testdata/sqs-batch.json")
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var bodies []string
	handle := func(ctx context.Context, m store.Message) error {
		mu.Lock()
		bodies = append(bodies, string(m.Body))
		mu.Unlock()
		if m.Receives > 3 {
			return errors.New("chunk 3: provider answered 429 again")
		}
		return nil
	}
	out, err := lambda.NewHandler(SQS(handle, 0)).Invoke(context.Background(), payload)
	if err != nil {
		t.Fatal(err)
	}
	if string(out) != `{"batchItemFailures":[{"itemIdentifier":"2e1424d4-f796-459a-8184-9c92662be6da"}]}` {
		t.Errorf("answer %s", out)
	}
	if !slices.Contains(bodies, "\x00\x01binary\xff") || len(bodies) != 3 {
		t.Errorf("bodies %q", bodies)
	}
}

// FuzzMessage: any SQS record decodes or fails cleanly, and what the AWS
// queue adapter's encodings carry comes back byte for byte.
func FuzzMessage(f *testing.F) {
	f.Add("plain body", "", "3")
	f.Add(base64.StdEncoding.EncodeToString([]byte{0, 0xff}), "base64", "1")
	f.Add(" ", "empty", "x")
	f.Add("%%%", "base64", "")
	f.Fuzz(func(t *testing.T, body, encoding, receives string) {
		attrs := map[string]string{}
		if encoding != "" {
			attrs["sluice-encoding"] = encoding
		}
		rec := sqsRecord("id-1", body, attrs)
		rec.Attributes["ApproximateReceiveCount"] = receives
		m, err := Message(rec)
		if err != nil {
			return
		}
		switch encoding {
		case "":
			if string(m.Body) != body {
				t.Fatalf("body %q became %q", body, m.Body)
			}
		case "empty":
			if len(m.Body) != 0 {
				t.Fatalf("empty body became %q", m.Body)
			}
		case "base64":
			// The decoder skips line breaks, so compare without them.
			if base64.StdEncoding.EncodeToString(m.Body) != strings.NewReplacer("\r", "", "\n", "").Replace(body) {
				t.Fatalf("base64 %q became %q", body, m.Body)
			}
		default:
			t.Fatalf("unknown encoding %q accepted", encoding)
		}
		if m.ID != "id-1" || m.Receipt != "AQEBid-1" {
			t.Fatalf("message %+v", m)
		}
	})
}
