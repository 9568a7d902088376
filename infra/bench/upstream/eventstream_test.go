package main

import (
	"bytes"
	"encoding/base64"
	"encoding/binary"
	"encoding/json"
	"errors"
	"hash/crc32"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws/protocol/eventstream"
)

func TestEventFrameLayout(t *testing.T) {
	payload := []byte(`{"contentBlockIndex":0,"delta":{"text":"hi"}}`)
	frame, err := eventFrame("contentBlockDelta", payload)
	if err != nil {
		t.Fatal(err)
	}
	total := binary.BigEndian.Uint32(frame[0:4])
	headersLen := binary.BigEndian.Uint32(frame[4:8])
	if int(total) != len(frame) {
		t.Fatalf("total length %d, frame is %d bytes", total, len(frame))
	}
	if got, want := binary.BigEndian.Uint32(frame[8:12]), crc32.ChecksumIEEE(frame[0:8]); got != want {
		t.Fatalf("prelude CRC %08x, want %08x", got, want)
	}
	if got, want := binary.BigEndian.Uint32(frame[len(frame)-4:]), crc32.ChecksumIEEE(frame[:len(frame)-4]); got != want {
		t.Fatalf("message CRC %08x, want %08x", got, want)
	}
	if got := frame[12+headersLen : len(frame)-4]; !bytes.Equal(got, payload) {
		t.Fatalf("payload %q, want %q", got, payload)
	}
	// The SDK's decoder checks both CRCs again and parses the headers.
	msg, err := eventstream.NewDecoder().Decode(bytes.NewReader(frame), nil)
	if err != nil {
		t.Fatalf("SDK decoder rejects the frame: %v", err)
	}
	for name, want := range map[string]string{":event-type": "contentBlockDelta", ":content-type": "application/json", ":message-type": "event"} {
		if v := msg.Headers.Get(name); v == nil || v.String() != want {
			t.Errorf("header %s = %v, want %s", name, v, want)
		}
	}
}

// decodeEvents reads every event-stream message of a response body.
func decodeEvents(t *testing.T, body io.Reader) []eventstream.Message {
	t.Helper()
	var out []eventstream.Message
	dec := eventstream.NewDecoder()
	for {
		msg, err := dec.Decode(body, nil)
		if errors.Is(err, io.EOF) {
			return out
		}
		if err != nil {
			t.Fatalf("decode event %d: %v", len(out), err)
		}
		out = append(out, msg.Clone())
	}
}

func TestBedrockConverseStream(t *testing.T) {
	ts := newTestServer(t, options{streamChunks: 4})
	resp := post(t, ts.URL+"/model/anthropic.claude-3-5-sonnet-20240620-v1:0/converse-stream",
		`{"messages":[{"role":"user","content":[{"text":"hello"}]}],"inferenceConfig":{"maxTokens":3}}`)
	if ct := resp.Header.Get("Content-Type"); ct != eventStreamContentType {
		t.Fatalf("content type %q", ct)
	}
	var types []string
	var text strings.Builder
	var meta struct {
		Usage struct{ InputTokens, OutputTokens, TotalTokens int }
	}
	for _, m := range decodeEvents(t, resp.Body) {
		typ := m.Headers.Get(":event-type").String()
		types = append(types, typ)
		switch typ {
		case "contentBlockDelta":
			var d struct{ Delta struct{ Text string } }
			mustUnmarshal(t, m.Payload, &d)
			text.WriteString(d.Delta.Text)
		case "metadata":
			mustUnmarshal(t, m.Payload, &meta)
		}
	}
	want := "messageStart contentBlockDelta contentBlockDelta contentBlockDelta contentBlockStop messageStop metadata"
	if got := strings.Join(types, " "); got != want {
		t.Fatalf("events\n got %s\nwant %s", got, want)
	}
	if text.String() != "The gateway receives " {
		t.Errorf("text %q", text.String())
	}
	if meta.Usage.OutputTokens != 3 || meta.Usage.TotalTokens != meta.Usage.InputTokens+3 {
		t.Errorf("usage %+v", meta.Usage)
	}
}

func TestBedrockInvokeStreamAnthropic(t *testing.T) {
	ts := newTestServer(t, options{streamChunks: 4})
	resp := post(t, ts.URL+"/model/anthropic.claude-3-5-sonnet-20240620-v1:0/invoke-with-response-stream",
		`{"anthropic_version":"bedrock-2023-05-31","max_tokens":2,"messages":[{"role":"user","content":"hi"}]}`)
	var types []string
	for _, m := range decodeEvents(t, resp.Body) {
		if typ := m.Headers.Get(":event-type").String(); typ != "chunk" {
			t.Fatalf("event type %q, want chunk", typ)
		}
		var c struct{ Bytes string }
		mustUnmarshal(t, m.Payload, &c)
		inner, err := base64.StdEncoding.DecodeString(c.Bytes)
		if err != nil {
			t.Fatal(err)
		}
		var ev struct{ Type string }
		mustUnmarshal(t, inner, &ev)
		types = append(types, ev.Type)
	}
	want := "message_start content_block_start ping content_block_delta content_block_delta content_block_stop message_delta message_stop"
	if got := strings.Join(types, " "); got != want {
		t.Fatalf("events\n got %s\nwant %s", got, want)
	}
}

func mustUnmarshal(t *testing.T, b []byte, v any) {
	t.Helper()
	if err := json.Unmarshal(b, v); err != nil {
		t.Fatalf("unmarshal %s: %v", b, err)
	}
}

func post(t *testing.T, url, body string) *http.Response {
	t.Helper()
	resp, err := http.Post(url, "application/json", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { resp.Body.Close() })
	if resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(resp.Body)
		t.Fatalf("POST %s: %d %s", url, resp.StatusCode, b)
	}
	return resp
}
