package anthropic

import (
	"bytes"
	"fmt"
	"io"
	"runtime"
	"testing"
)

// longStream is an Anthropic stream of one text block with n deltas.
func longStream(n int) []byte {
	events := []ev{
		evt("message_start", `{"type":"message_start","message":{"id":"msg_01","type":"message","role":"assistant","model":"claude-sonnet-4-5-20250929","content":[],"stop_reason":null,"stop_sequence":null,"usage":{"input_tokens":12,"output_tokens":1}}}`),
		evt("content_block_start", `{"type":"content_block_start","index":0,"content_block":{"type":"text","text":""}}`),
	}
	for i := range n {
		events = append(events, evt("content_block_delta", fmt.Sprintf(`{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"word %d "}}`, i)))
	}
	return sseDoc(append(events,
		evt("content_block_stop", `{"type":"content_block_stop","index":0}`),
		evt("message_delta", fmt.Sprintf(`{"type":"message_delta","delta":{"stop_reason":"end_turn","stop_sequence":null},"usage":{"output_tokens":%d}}`, n)),
		evt("message_stop", `{"type":"message_stop"}`),
	)...)
}

// TestLongStreamTranslatesInFlatMemory: translating 20,000 deltas holds no
// more memory than translating 10,000 — nothing the translator keeps grows
// with the stream — and allocates no more either.
func TestLongStreamTranslatesInFlatMemory(t *testing.T) {
	translate := func(n int) (held int64, alloc uint64) {
		doc := longStream(n)
		call := &Call{provider: Name, model: "claude-sonnet-4-5"}
		var before, after runtime.MemStats
		runtime.GC()
		runtime.ReadMemStats(&before)
		ans := call.Stream(io.NopCloser(bytes.NewReader(doc)))
		buf := make([]byte, 32<<10)
		var out int
		for {
			k, err := ans.Body.Read(buf)
			out += k
			if err == io.EOF {
				break
			}
			if err != nil {
				t.Fatal(err)
			}
		}
		runtime.GC()
		runtime.ReadMemStats(&after)
		runtime.KeepAlive(ans)
		runtime.KeepAlive(doc)
		if out < n*10 {
			t.Fatalf("%d events gave %d bytes", n, out)
		}
		return int64(after.HeapAlloc) - int64(before.HeapAlloc), after.TotalAlloc - before.TotalAlloc
	}
	h10, a10 := translate(10_000)
	h20, a20 := translate(20_000)
	if h20 > h10+64<<10 {
		t.Errorf("holding %d bytes after 10,000 events, %d after 20,000", h10, h20)
	}
	if a20 > a10+256<<10 {
		t.Errorf("10,000 events allocated %d bytes, 20,000 allocated %d", a10, a20)
	}
	t.Logf("10,000 events: %d B held, %d KiB allocated; 20,000: %d B held, %d KiB allocated", h10, a10>>10, h20, a20>>10)
}
