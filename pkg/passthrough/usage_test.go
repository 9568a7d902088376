package passthrough

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"net/http"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws/protocol/eventstream"
	"github.com/google/go-cmp/cmp"

	"github.com/sluice-gateway/sluice/pkg/oai"
	"github.com/sluice-gateway/sluice/pkg/providers/anthropic"
	"github.com/sluice-gateway/sluice/pkg/providers/bedrock"
	"github.com/sluice-gateway/sluice/pkg/relaybuf"
)

const anthropicSSE = "event: message_start\n" +
	`data: {"type":"message_start","message":{"id":"msg_1","type":"message","role":"assistant","model":"claude-sonnet-4-5-20250929","content":[],"stop_reason":null,"stop_sequence":null,"usage":{"input_tokens":25,"cache_creation_input_tokens":3,"cache_read_input_tokens":2,"output_tokens":1}}}` + "\n\n" +
	"event: content_block_start\n" +
	`data: {"type":"content_block_start","index":0,"content_block":{"type":"text","text":""}}` + "\n\n" +
	"event: ping\ndata: {\"type\": \"ping\"}\n\n" +
	"event: content_block_delta\n" +
	`data: {"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"a \"usage\": {\"output_tokens\": 9999} decoy and an \"error\""}}` + "\n\n" +
	"event: content_block_stop\n" +
	`data: {"type":"content_block_stop","index":0}` + "\n\n" +
	"event: message_delta\n" +
	`data: {"type":"message_delta","delta":{"stop_reason":"end_turn","stop_sequence":null},"usage":{"output_tokens":15}}` + "\n\n" +
	"event: message_stop\n" +
	`data: {"type":"message_stop"}` + "\n\n"

const geminiSSE = `data: {"candidates":[{"content":{"parts":[{"text":"Hel"}],"role":"model"}}],"usageMetadata":{"promptTokenCount":8,"candidatesTokenCount":2,"totalTokenCount":10},"modelVersion":"gemini-2.5-flash"}` + "\r\n\r\n" +
	`data: {"candidates":[{"content":{"parts":[{"text":"lo"}],"role":"model"},"finishReason":"STOP"}],"usageMetadata":{"promptTokenCount":8,"candidatesTokenCount":12,"thoughtsTokenCount":4,"totalTokenCount":24},"modelVersion":"gemini-2.5-flash"}` + "\r\n\r\n"

func frame(t testing.TB, headers map[string]string, payload []byte) []byte {
	t.Helper()
	var hs eventstream.Headers
	for k, v := range headers {
		hs.Set(k, eventstream.StringValue(v))
	}
	var buf bytes.Buffer
	if err := eventstream.NewEncoder().Encode(&buf, eventstream.Message{Headers: hs, Payload: payload}); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

func event(t testing.TB, typ, payload string) []byte {
	return frame(t, map[string]string{":event-type": typ, ":content-type": "application/json", ":message-type": "event"}, []byte(payload))
}

func chunk(t testing.TB, inner string) []byte {
	return event(t, "chunk", `{"bytes":"`+base64.StdEncoding.EncodeToString([]byte(inner))+`"}`)
}

func converseStream(t testing.TB) []byte {
	var b bytes.Buffer
	b.Write(event(t, "messageStart", `{"role":"assistant"}`))
	for range 5 {
		b.Write(event(t, "contentBlockDelta", `{"contentBlockIndex":0,"delta":{"text":"tok \"usage\""}}`))
	}
	b.Write(event(t, "contentBlockStop", `{"contentBlockIndex":0}`))
	b.Write(event(t, "messageStop", `{"stopReason":"end_turn"}`))
	b.Write(event(t, "metadata", `{"usage":{"inputTokens":20,"outputTokens":9,"totalTokens":29},"metrics":{"latencyMs":120}}`))
	return b.Bytes()
}

func invokeStream(t testing.TB) []byte {
	var b bytes.Buffer
	b.Write(chunk(t, `{"type":"message_start","message":{"model":"claude-3-5-sonnet-20241022","usage":{"input_tokens":12,"output_tokens":1}}}`))
	// A frame larger than the meter will hold is skipped, not fatal.
	b.Write(chunk(t, `{"type":"content_block_delta","delta":{"text":"`+strings.Repeat("x", maxFrame)+`"}}`))
	for range 3 {
		b.Write(chunk(t, `{"type":"content_block_delta","delta":{"text":"y"}}`))
	}
	b.Write(chunk(t, `{"type":"message_stop","amazon-bedrock-invocationMetrics":{"inputTokenCount":12,"outputTokenCount":30,"invocationLatency":500,"firstByteLatency":100}}`))
	return b.Bytes()
}

// feed runs data through a fresh meter in pieces of the given sizes
// (cycled); size 0 means all at once. length is the answer's declared
// length (-1: none).
func feed(mt string, data []byte, sizes []int, length int64) counts {
	// Bodies with an error in them are metered as the error answers they are.
	m := newMeter(mt, length, bytes.Contains(data, []byte(`"error"`)))
	for i := 0; len(data) > 0; i++ {
		n := len(data)
		if len(sizes) > 0 {
			n = min(max(sizes[i%len(sizes)], 1), len(data))
		}
		m.observe(data[:n])
		data = data[n:]
	}
	return m.finish(counts{})
}

func TestMeters(t *testing.T) {
	var bigText strings.Builder
	for bigText.Len() < 3*maxJSONWhole {
		bigText.WriteString(`lorem \"usage\":{\"input_tokens\":777} `)
	}
	bigAnthropic := `{"id":"msg_1","type":"message","role":"assistant","model":"claude-opus-4-1","content":[{"type":"text","text":"` +
		bigText.String() + `"}],"stop_reason":"end_turn","usage":{"input_tokens":1000,"output_tokens":2000}}`
	bigGemini := `[` + strings.Repeat(`{"candidates":[{"content":{"parts":[{"text":"`+strings.Repeat("z", 1000)+`"}]}}],"usageMetadata":{"promptTokenCount":5,"candidatesTokenCount":1,"totalTokenCount":6}},`, 400) +
		`{"candidates":[],"usageMetadata":{"promptTokenCount":5,"candidatesTokenCount":400,"totalTokenCount":405},"modelVersion":"gemini-2.5-pro"}]`

	for _, tc := range []struct {
		name, mt string
		data     []byte
		want     oai.Usage
		model    string
		failure  string
	}{
		{"anthropic stream", contentSSE, []byte(anthropicSSE), details(usage(30, 15, 45), 2, 0), "claude-sonnet-4-5-20250929", ""},
		{"gemini stream", contentSSE, []byte(geminiSSE), details(usage(8, 16, 24), 0, 4), "gemini-2.5-flash", ""},
		{"anthropic stream error", contentSSE, []byte("event: message_start\n" +
			`data: {"type":"message_start","message":{"model":"m","usage":{"input_tokens":7,"output_tokens":1}}}` + "\n\nevent: error\n" +
			`data: {"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}` + "\n\n"), usage(7, 1, 8), "m", "overloaded_error Overloaded"},
		{"anthropic message", contentJSON, []byte(`{"id":"m","model":"claude-haiku-4-5","content":[{"type":"text","text":"hi"}],"usage":{"input_tokens":10,"output_tokens":3}}`), usage(10, 3, 13), "claude-haiku-4-5", ""},
		{"count tokens", contentJSON, []byte(`{"input_tokens":42}`), oai.Usage{}, "", ""},
		{"converse", contentJSON, []byte(`{"output":{"message":{"role":"assistant","content":[{"text":"hi"}]}},"stopReason":"end_turn","usage":{"inputTokens":7,"outputTokens":4,"totalTokens":11,"cacheReadInputTokens":0}}`), usage(7, 4, 11), "", ""},
		{"gemini json", contentJSON, []byte(`{"candidates":[],"usageMetadata":{"promptTokenCount":3,"candidatesTokenCount":5,"totalTokenCount":8},"modelVersion":"gemini-2.0-flash"}`), usage(3, 5, 8), "gemini-2.0-flash", ""},
		{"gemini json array stream, large", contentJSON, []byte(bigGemini), usage(5, 400, 405), "gemini-2.5-pro", ""},
		{"anthropic message, large", contentJSON, []byte(bigAnthropic), usage(1000, 2000, 3000), "claude-opus-4-1", ""},
		{"anthropic error", contentJSON, []byte(`{"type":"error","error":{"type":"invalid_request_error","message":"max_tokens: required"}}`), oai.Usage{}, "", "invalid_request_error max_tokens: required"},
		{"google error", contentJSON, []byte(`{"error":{"code":400,"message":"API key not valid","status":"INVALID_ARGUMENT"}}`), oai.Usage{}, "", "INVALID_ARGUMENT API key not valid"},
		{"converse stream", contentEventStream, converseStream(t), usage(20, 9, 29), "", ""},
		{"invoke stream", contentEventStream, invokeStream(t), usage(12, 30, 42), "claude-3-5-sonnet-20241022", ""},
		{"event stream exception", contentEventStream, append(event(t, "messageStart", `{"role":"assistant"}`),
			frame(t, map[string]string{":message-type": "exception", ":exception-type": "throttlingException", ":content-type": "application/json"}, []byte(`{"message":"Too many tokens"}`))...),
			oai.Usage{}, "", "throttlingException Too many tokens"},
		{"not metered", "application/octet-stream", []byte("usage"), oai.Usage{}, "", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := rand.New(rand.NewPCG(1, 2))
			random := make([]int, 64)
			for i := range random {
				random[i] = 1 + r.IntN(9000)
			}
			for _, sizes := range [][]int{nil, {1}, {7}, {4096}, random} {
				if len(tc.data) > 1<<20 && len(sizes) == 1 && sizes[0] == 1 {
					continue
				}
				for _, length := range []int64{-1, int64(len(tc.data))} {
					c := feed(tc.mt, tc.data, sizes, length)
					if u := c.usage(); u != tc.want || c.model != tc.model || c.failure != tc.failure {
						t.Fatalf("sizes %v, length %d: usage %+v model %q failure %q; want %+v %q %q", sizes[:min(len(sizes), 3)], length, u, c.model, c.failure, tc.want, tc.model, tc.failure)
					}
				}
			}
		})
	}
}

func TestBedrockHeaders(t *testing.T) {
	var c counts
	c.addHeaders(http.Header{
		"X-Amzn-Bedrock-Input-Token-Count":  {"11"},
		"X-Amzn-Bedrock-Output-Token-Count": {"22"},
	})
	if u := c.usage(); u != (usage(11, 22, 33)) {
		t.Fatalf("usage %+v", u)
	}
}

func TestMetersHoldBoundedMemory(t *testing.T) {
	// An event carrying usage but over the bound is not kept (pkg/sse
	// holds the parser itself to its limits).
	line := `data: {"usage":"` + strings.Repeat("x", 4*maxSSELine) + "\"}\n\n"
	sse := newSSEMeter()
	for range 4 {
		sse.observe([]byte(line[:len(line)/2]))
		sse.observe([]byte(line[len(line)/2:]))
	}
	for kind, kept := range sse.keep {
		if cap(kept) > maxSSELine {
			t.Errorf("sse meter keeps %d bytes of kind %d", cap(kept), kind)
		}
	}
	js := newMeter(contentJSON, -1, false).(*jsonMeter)
	chunk := bytes.Repeat([]byte("y"), relaybuf.Size)
	for range 200 { // 6.4 MB
		js.observe(chunk)
	}
	if cap(js.tail) > 4*jsonTailKeep || len(js.head) > jsonPrefixKeep {
		t.Errorf("json meter holds head %d tail %d", len(js.head), cap(js.tail))
	}
}

// FuzzMeters feeds arbitrary upstream answers, cut at arbitrary places,
// to every meter: they never panic and never hold more than their bounds.
func FuzzMeters(f *testing.F) {
	f.Add([]byte(anthropicSSE), uint16(13))
	f.Add([]byte(geminiSSE), uint16(1))
	f.Add(converseStream(f), uint16(5))
	f.Add(invokeStream(f)[:200], uint16(64))
	f.Add([]byte(`[{"usageMetadata":{"promptTokenCount":1}}]`), uint16(3))
	f.Add([]byte{0, 0, 0, 20, 0, 0, 0, 0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12}, uint16(2))
	f.Fuzz(func(t *testing.T, data []byte, size uint16) {
		for _, mt := range []string{contentSSE, contentJSON, contentEventStream} {
			c := feed(mt, data, []int{int(size)}, int64(len(data)))
			if u := c.usage(); u.PromptTokens < 0 || u.CompletionTokens < 0 || u.TotalTokens < 0 {
				t.Fatalf("%s: negative usage %+v", mt, u)
			}
		}
		// A whole answer read directly (answerWhole) counts as its meter does.
		m := newMeter(contentJSON, int64(len(data)), false)
		m.observe(data)
		want := m.finish(counts{})
		var got counts
		meterWhole(contentJSON, data, &got)
		if got != want {
			t.Fatalf("meterWhole %+v, meter %+v", got, want)
		}
		es := &eventStreamMeter{dec: eventstream.NewDecoder()}
		es.observe(data)
		if len(es.buf) > maxFrame {
			t.Fatalf("event-stream buffer %d", len(es.buf))
		}
	})
}

func TestDecodeCountsAsEncodingJSON(t *testing.T) {
	for _, tc := range []struct {
		doc  string
		want usageJSON
		ok   bool
	}{
		{`{"input_tokens":12,"output_tokens":3,"other":{"x":[1]}}`, usageJSON{Usage: anthropic.Usage{InputTokens: 12, OutputTokens: 3}}, true},
		{`{"INPUT_TOKENS":5,"input_tokens":6}`, usageJSON{Usage: anthropic.Usage{InputTokens: 6}}, true},
		{`{"input_tokens":null,"inputTokens":-2}`, usageJSON{ConverseUsage: bedrock.ConverseUsage{InputTokens: -2}}, true},
		{`{"input_tokens":1.5,"output_tokens":4}`, usageJSON{Usage: anthropic.Usage{OutputTokens: 4}}, false},
		{`{"input_tokens":"7"}`, usageJSON{}, false},
		{`{"input_tokens":1,}`, usageJSON{}, false},
		{`"usage"`, usageJSON{}, false},
	} {
		var got, want usageJSON
		ok := got.decode([]byte(tc.doc))
		wantOK := json.Unmarshal([]byte(tc.doc), &want) == nil
		if ok != tc.ok || got != tc.want || ok != wantOK || got != want {
			t.Errorf("%s: %+v %v; want %+v %v (encoding/json %+v %v)", tc.doc, got, ok, tc.want, tc.ok, want, wantOK)
		}
	}
}

// FuzzDecodeCounts holds the vendors' usage decoders, as the meter uses them, to json.Unmarshal into
// their structs: the same verdict and the same counts, from counts already
// set.
func FuzzDecodeCounts(f *testing.F) {
	for _, s := range []string{`{"input_tokens":12,"output_tokens":3}`, `{"inputTokens":1,"INPUTTOKENS":2,"totalTokens":null}`,
		`{"promptTokenCount":4,"thoughtsTokenCount":1.0}`, `{"inputTokenCount":"3"}`, `{"x":[{}],"\u0069nput_tokens":9}`, `[]`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, doc []byte) {
		start := usageJSON{Usage: anthropic.Usage{InputTokens: 1}, ConverseUsage: bedrock.ConverseUsage{TotalTokens: 2}}
		got, want := start, start
		if ok, wantOK := got.decode(doc), json.Unmarshal(doc, &want) == nil; ok != wantOK || got != want {
			t.Fatalf("usage %q: %+v %v; encoding/json %+v %v", doc, got, ok, want, wantOK)
		}
		g, wg := geminiUsageJSON{TotalTokenCount: 3}, geminiUsageJSON{TotalTokenCount: 3}
		if ok, wantOK := g.Decode(doc), json.Unmarshal(doc, &wg) == nil; ok != wantOK || g != wg {
			t.Fatalf("gemini %q: %+v %v; encoding/json %+v %v", doc, g, ok, wg, wantOK)
		}
		var m, wm metricsJSON
		if ok, wantOK := m.Decode(doc), json.Unmarshal(doc, &wm) == nil; ok != wantOK || m != wm {
			t.Fatalf("metrics %q: %+v %v; encoding/json %+v %v", doc, m, ok, wm, wantOK)
		}
	})
}

// usage is a usage without details.
func usage(prompt, completion, total int64) oai.Usage {
	return oai.Usage{PromptTokens: prompt, CompletionTokens: completion, TotalTokens: total}
}

// details sets a usage's cached and reasoning tokens.
func details(u oai.Usage, cached, reasoning int64) oai.Usage {
	u.PromptTokensDetails.CachedTokens = cached
	u.CompletionTokensDetails.ReasoningTokens = reasoning
	return u
}

func TestLastIndex(t *testing.T) {
	for _, tc := range []struct{ s, k string }{
		{`{"usage":{"usage":1}}`, `"usage"`}, {`"usage"`, `"usage"`}, {`"usag`, `"usage"`}, {``, `"`},
		{`x"usage" "usagex"`, `"usage"`}, {`""""`, `""`}, {`abc`, `c`}, {`abc`, `a`}, {`abc`, `abcd`},
	} {
		if got, want := lastIndex([]byte(tc.s), []byte(tc.k)), bytes.LastIndex([]byte(tc.s), []byte(tc.k)); got != want {
			t.Errorf("lastIndex(%q, %q) = %d, want %d", tc.s, tc.k, got, want)
		}
	}
}

// FuzzLastIndex holds lastIndex to bytes.LastIndex.
func FuzzLastIndex(f *testing.F) {
	f.Add([]byte(`{"usage":{"input_tokens":1},"x":"\"usage\""}`), []byte(`"usage"`))
	f.Add([]byte(`aaaa`), []byte(`aa`))
	f.Fuzz(func(t *testing.T, s, k []byte) {
		if len(k) == 0 {
			return
		}
		if got, want := lastIndex(s, k), bytes.LastIndex(s, k); got != want {
			t.Fatalf("lastIndex(%q, %q) = %d, want %d", s, k, got, want)
		}
	})
}

// A whole JSON answer is read from its top-level members, as encoding/json
// reads it into the payload: a "usage" nested in the content (a tool's
// input, say) is not the answer's, before the top-level one or after it.
func TestJSONMeterReadsTopLevelMembers(t *testing.T) {
	for _, answer := range []string{
		`{"model":"claude-sonnet-4-5","content":[{"type":"tool_use","input":{"usage":{"input_tokens":999}}}],"usage":{"input_tokens":12,"output_tokens":5}}`,
		`{"usage":{"input_tokens":12,"output_tokens":5},"content":[{"type":"tool_use","input":{"usage":{"input_tokens":999}}}],"model":"claude-sonnet-4-5"}`,
		`{"candidates":[],"usageMetadata":{"promptTokenCount":12,"candidatesTokenCount":5,"totalTokenCount":17},"modelVersion":"gemini-2.5-flash"}`,
		`{"output":{"message":{"content":[{"text":"x"}]}},"usage":{"inputTokens":12,"outputTokens":5,"totalTokens":17},"metrics":{"latencyMs":9}}`,
	} {
		got := feed(contentJSON, []byte(answer), nil, -1)
		var want counts
		want.addJSON([]byte(answer)) // encoding/json into the payload
		if diff := cmp.Diff(want.usage(), got.usage()); diff != "" {
			t.Errorf("%s: usage (-encoding/json +meter):\n%s", answer, diff)
		}
		if got.model != want.model {
			t.Errorf("%s: model %q, encoding/json %q", answer, got.model, want.model)
		}
	}
}

// An answer that arrives in one read, as a short answer of declared length
// does, is read in the relay's buffer as it passes: the meter keeps no copy.
func TestJSONMeterReadsAOneReadAnswerInPlace(t *testing.T) {
	answer := []byte(`{"model":"claude-haiku-4-5","content":[{"type":"text","text":"hi"}],"usage":{"input_tokens":10,"output_tokens":3}}`)
	buf := bytes.Clone(answer)
	m := newMeter(contentJSON, int64(len(buf)), false).(*jsonMeter)
	m.observe(buf)
	clear(buf) // the relay's next read
	if m.head != nil {
		t.Errorf("the meter copied the answer (%d bytes)", len(m.head))
	}
	c := m.finish(counts{})
	if diff := cmp.Diff(usage(10, 3, 13), c.usage()); diff != "" || c.model != "claude-haiku-4-5" {
		t.Errorf("usage (-want +got):\n%s model %q", diff, c.model)
	}
}

// BenchmarkJSONMeterWhole meters a small whole Anthropic answer, as the
// relay's answerWhole does on every non-streamed call.
func BenchmarkJSONMeterWhole(b *testing.B) {
	answer := []byte(`{"id":"msg_1","type":"message","role":"assistant","model":"claude-sonnet-4-5","content":[{"type":"text","text":"Hello."}],"stop_reason":"end_turn","stop_sequence":null,"usage":{"input_tokens":120,"output_tokens":3}}`)
	b.ReportAllocs()
	for b.Loop() {
		var c counts
		meterWhole(contentJSON, answer, &c)
		if c.input != 120 || c.output != 3 || c.model != "claude-sonnet-4-5" {
			b.Fatalf("counts %+v", c)
		}
	}
}

// TestUsageJSONFields holds usageJSON's written-out field list to the
// vendors' own: the same names, reaching the same counts.
func TestUsageJSONFields(t *testing.T) {
	var u usageJSON
	want := append(u.Usage.Fields(), u.ConverseUsage.Fields()...)
	doc := []byte("{")
	for i, f := range want {
		if i > 0 {
			doc = append(doc, ',')
		}
		doc = fmt.Appendf(doc, "%q:%d", f.Name, i+1)
	}
	doc = append(doc, '}')
	if !u.decode(doc) {
		t.Fatalf("decode(%s) failed", doc)
	}
	for i, f := range want {
		if *f.Dst != int64(i+1) {
			t.Errorf("%s = %d, want %d (doc %s)", f.Name, *f.Dst, i+1, doc)
		}
	}
}
