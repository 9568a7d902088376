package bedrock

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/aws/aws-sdk-go-v2/aws/protocol/eventstream"

	"github.com/sluice-gateway/sluice/pkg/api"
	"github.com/sluice-gateway/sluice/pkg/config"
	"github.com/sluice-gateway/sluice/pkg/models"
	"github.com/sluice-gateway/sluice/pkg/oai"
	"github.com/sluice-gateway/sluice/pkg/providers"
	"github.com/sluice-gateway/sluice/pkg/sse"
)

// frameBytes encodes one event-stream message of the given message type
// (event or exception) and event or exception type.
func frameBytes(messageType, typ string, payload []byte) []byte {
	var hs eventstream.Headers
	hs.Set(":message-type", eventstream.StringValue(messageType))
	if messageType == "exception" {
		hs.Set(":exception-type", eventstream.StringValue(typ))
	} else {
		hs.Set(":event-type", eventstream.StringValue(typ))
	}
	hs.Set(":content-type", eventstream.StringValue("application/json"))
	var b bytes.Buffer
	if err := eventstream.NewEncoder().Encode(&b, eventstream.Message{Headers: hs, Payload: payload}); err != nil {
		panic(err)
	}
	return b.Bytes()
}

// script turns lines "eventType payload" ("!exceptionType payload" for an
// exception) into an event stream: what the stream fuzz test feeds.
func script(s string) []byte {
	var out []byte
	for _, line := range strings.Split(s, "\n") {
		typ, payload, _ := strings.Cut(line, " ")
		if kind, ok := strings.CutPrefix(typ, "!"); ok {
			out = append(out, frameBytes("exception", kind, []byte(payload))...)
			continue
		}
		out = append(out, frameBytes("event", typ, []byte(payload))...)
	}
	return out
}

const scriptText = `messageStart {"role":"assistant","p":"abc"}
contentBlockDelta {"contentBlockIndex":0,"delta":{"text":"Hello \"you\""},"p":"ab"}
contentBlockStop {"contentBlockIndex":0}
contentBlockStart {"contentBlockIndex":1,"start":{"toolUse":{"name":"f","toolUseId":"t1"}}}
contentBlockDelta {"contentBlockIndex":1,"delta":{"toolUse":{"input":"{\"a\":"}}}
contentBlockDelta {"contentBlockIndex":1,"delta":{"toolUse":{"input":"1}"}}}
contentBlockDelta {"contentBlockIndex":2,"delta":{"reasoningContent":{"text":"hm"}}}
messageStop {"stopReason":"tool_use"}
metadata {"usage":{"inputTokens":3,"outputTokens":4,"totalTokens":7,"cacheReadInputTokens":1}}`

// runStream translates an event stream to its end and checks the output is
// OpenAI chunk events: each a JSON object, [DONE] last and only on a clean
// end; errors from a provider's exception are *api.Error.
func runStream(t *testing.T, body []byte, jsonMode bool) {
	s := newConverseStream(bytes.NewReader(body), "m", jsonMode)
	if err := s.prime(); err != nil {
		return // a provider error before the answer
	}
	var out []byte
	var err error
	for range len(body) + 2 { // each call reads a message, or ends
		if out, err = s.next(out); err != nil {
			break
		}
	}
	if err == nil {
		t.Fatal("the stream did not end")
	}
	if cap(s.frames.buf) > MaxStreamFrame {
		t.Fatalf("a %d-byte frame buffer", cap(s.frames.buf))
	}
	var events []string
	rd := sse.NewReader(bytes.NewReader(out), sse.Limits{})
	for {
		ev, rerr := rd.Next()
		if rerr == io.EOF {
			break
		}
		if rerr != nil {
			t.Fatalf("the output is not SSE: %v\n%s", rerr, out)
		}
		events = append(events, string(ev.Data))
	}
	for i, d := range events {
		if d == "[DONE]" {
			if i != len(events)-1 || err != io.EOF {
				t.Fatalf("[DONE] at %d of %d, ending %v", i, len(events), err)
			}
			continue
		}
		var v map[string]any
		if json.Unmarshal([]byte(d), &v) != nil || v["object"] != oai.ObjectChatChunk {
			t.Fatalf("event %d is not a chunk: %s", i, d)
		}
	}
	if err == io.EOF && (len(events) == 0 || events[len(events)-1] != "[DONE]") {
		t.Fatalf("a clean end without [DONE]: %q", events)
	}
}

// FuzzConverseStream feeds well-framed event streams of any events and
// payloads (the lines of a script) through the translator.
func FuzzConverseStream(f *testing.F) {
	f.Add(scriptText, false)
	f.Add(strings.Replace(scriptText, `"name":"f"`, `"name":"json_tool_call"`, 1), true)
	f.Add("messageStart {}\n!throttlingException {\"message\":\"slow down\"}", false)
	f.Add("messageStart {}\ncontentBlockDelta {\"contentBlockIndex\":99999,\"delta\":{\"toolUse\":{\"input\":\"x\"}}}", false)
	f.Add("metadata {\"usage\":{\"inputTokens\":1}}\nmessageStop {\"stopReason\":\"end_turn\"}", false)
	f.Fuzz(func(t *testing.T, s string, jsonMode bool) {
		runStream(t, script(s), jsonMode)
	})
}

// FuzzConverseStreamBytes feeds raw bytes: framing, lengths and checksums
// of anything.
func FuzzConverseStreamBytes(f *testing.F) {
	f.Add(script(scriptText))
	f.Add(script(scriptText)[:40])
	f.Add([]byte{0xff, 0xff, 0xff, 0xff, 0, 0, 0, 0, 0, 0, 0, 0})
	f.Add([]byte{0, 0, 0, 16, 0xff, 0xff, 0xff, 0xff, 0, 0, 0, 0, 0, 0, 0, 0})
	f.Fuzz(func(t *testing.T, b []byte) {
		runStream(t, b, false)
	})
}

// FuzzTranslate runs any request that parses through the translation for
// each model family: it either refuses with a 400 or builds a Converse body
// that is JSON, with alternating non-empty turns and no blank text.
func FuzzTranslate(f *testing.F) {
	for _, s := range []string{
		`{"model":"m","messages":[{"role":"system","content":"s"},{"role":"user","content":"Hi"},{"role":"user","content":[{"type":"text","text":"x"},{"type":"image_url","image_url":{"url":"data:image/png;base64,AAAA"}}]},{"role":"assistant","content":"a","tool_calls":[{"id":"t","type":"function","function":{"name":"f","arguments":"{}"}}],"thinking_blocks":[{"type":"thinking","thinking":"t","signature":"s"}]},{"role":"tool","tool_call_id":"t","content":"r"}],"tools":[{"type":"function","function":{"name":"f","parameters":{"type":"object"}}}],"tool_choice":"required","max_tokens":10,"stop":["x",""],"reasoning_effort":"high","top_k":3}`,
		`{"model":"m","messages":[{"role":"user","content":" "},{"role":"assistant","content":""},{"role":"user","content":[{"type":"file","file":{"file_data":"data:application/pdf;base64,AA==","filename":"a b.pdf"}}]}],"response_format":{"type":"json_schema","json_schema":{"name":"n","schema":{"type":"object"}}},"thinking":{"type":"enabled","budget_tokens":1024}}`,
		`{"model":"m","messages":[{"role":"developer","content":[{"type":"text","text":"d","cache_control":{"type":"ephemeral"}}]},{"role":"user","content":"q"}],"n":2,"drop_params":true,"guardrailConfig":{"guardrailIdentifier":"g","guardrailVersion":"1"},"tool_choice":"none","tools":[{"type":"function","function":{"name":"f"}}]}`,
	} {
		f.Add(s, uint8(0))
	}
	drop := providers.NewDropParams(Name, config.Deployment{ModelName: "m"})
	f.Fuzz(func(t *testing.T, body string, family uint8) {
		req, err := oai.ParseChatRequest([]byte(body))
		if err != nil {
			return
		}
		e := &endpoint{model: "m", chat: chatFamily(family % 5), drop: drop}
		tr, err := e.translate(req)
		if err != nil {
			var ae *api.Error
			// (A member named "" is an unsupported parameter named ''.)
			if !errors.As(err, &ae) || ae.Status != 400 || (ae.Param == "" && ae.Code != "unsupported_parameter") {
				t.Fatalf("refused with %#v; want a 400 naming the field", err)
			}
			return
		}
		out, err := json.Marshal(&tr.out)
		if err != nil || !json.Valid(out) {
			t.Fatalf("the Converse body does not encode: %v", err)
		}
		for i, m := range tr.out.Messages {
			if len(m.Content) == 0 || (i > 0 && tr.out.Messages[i-1].Role == m.Role) || (m.Role != "user" && m.Role != "assistant") {
				t.Fatalf("turn %d: %+v", i, m)
			}
			for _, b := range m.Content {
				if b.Text == "" && b.Image == nil && b.Document == nil && b.ToolUse == nil && b.ToolResult == nil && b.ReasoningContent == nil && b.CachePoint == nil {
					t.Fatalf("turn %d has an empty (or blank text) block", i)
				}
				if b.Text != "" && blank(b.Text) {
					t.Fatalf("turn %d has a blank text", i)
				}
			}
		}
	})
}

// repeatReader yields parts' head, then its body n times, then its tail,
// without holding the stream.
type repeatReader struct {
	parts [][]byte
	n     int
	cur   []byte
}

func (r *repeatReader) Read(p []byte) (int, error) {
	for len(r.cur) == 0 {
		switch {
		case len(r.parts) == 0:
			return 0, io.EOF
		case len(r.parts) == 2 && r.n > 0:
			r.cur = r.parts[0]
			r.n--
		case len(r.parts) == 2: // the body, repeated n times
			r.parts = r.parts[1:]
		default:
			r.cur, r.parts = r.parts[0], r.parts[1:]
		}
	}
	n := copy(p, r.cur)
	r.cur = r.cur[n:]
	return n, nil
}

// TestConverseStreamFlatMemory: a 10,000-event stream is translated with a
// constant number of allocations per event and buffers that do not grow.
// (The AWS SDK's decoder makes 38 small ones per message: its checksum
// hashers, readers and header values; the translation itself none.)
func TestConverseStreamFlatMemory(t *testing.T) {
	const events = 10000
	delta := frameBytes("event", "contentBlockDelta", []byte(`{"contentBlockIndex":0,"delta":{"text":"a word or two "},"p":"abcdefghijklmnopqrstuvwxyzABCDEF"}`))
	tail := script(`messageStop {"stopReason":"end_turn"}
metadata {"usage":{"inputTokens":3,"outputTokens":10000,"totalTokens":10003}}`)
	var s *converseStream
	var body *oai.ChunkStream
	allocs := testing.AllocsPerRun(1, func() {
		r := &repeatReader{parts: [][]byte{script(`messageStart {"role":"assistant"}`), delta, tail}, n: events}
		s = newConverseStream(r, "us.anthropic.claude-sonnet-4-5-20250929-v1:0", false)
		if err := s.prime(); err != nil {
			t.Fatal(err)
		}
		body = oai.NewChunkStream(s.next, nil)
		buf := make([]byte, 32<<10)
		reads := 0
		for {
			_, err := body.Read(buf)
			if err == io.EOF {
				break
			}
			if err != nil {
				t.Fatal(err)
			}
			reads++
		}
		if reads != events+3 {
			t.Errorf("%d reads", reads)
		}
	})
	if per := allocs / events; per > 48 {
		t.Errorf("%.1f allocations per event", per)
	}
	if c := cap(s.frames.buf); c > 4096 {
		t.Errorf("the frame buffer grew to %d bytes", c)
	}
	if c := cap(s.frames.payload); c > 4096 {
		t.Errorf("the payload buffer grew to %d bytes", c)
	}
	t.Logf("%.1f allocations per event", allocs/events)
}

// FuzzValidLiteral holds validLiteral to encoding/json: a JSON string
// literal it accepts, of valid UTF-8.
func FuzzValidLiteral(f *testing.F) {
	for _, s := range []string{`""`, `"a\"b"`, `"\u00e9\n"`, `"\0"`, `"\u12"`, "\"\x01\"", "\"\xff\"", `"é"`, `"a"b"`, `"\`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, lit []byte) {
		want := len(lit) > 1 && lit[0] == '"' && lit[len(lit)-1] == '"' && json.Valid(lit) && utf8.Valid(lit)
		if got := validLiteral(lit); got != want {
			t.Fatalf("validLiteral(%q) = %v, want %v", lit, got, want)
		}
	})
}

// FuzzConverseAnswer feeds Converse answers (untrusted) to the answer
// reader: it refuses what it cannot read with an unreadable-answer error,
// and what it reads is a chat.completion that encodes, with counts that
// are counts and a finish reason OpenAI knows.
func FuzzConverseAnswer(f *testing.F) {
	for _, s := range []string{
		`{"output":{"message":{"content":[{"text":"Hi"},{"toolUse":{"input":{"a":1},"name":"f","toolUseId":"t"}},{"reasoningContent":{"reasoningText":{"text":"r","signature":"s"}}},{"reasoningContent":{"redactedContent":"AA=="}}],"role":"assistant"}},"stopReason":"tool_use","usage":{"inputTokens":3,"outputTokens":4,"totalTokens":7,"cacheReadInputTokens":1}}`,
		`{"output":{"message":{"content":[{"toolUse":{"input":{"x":[1,2]},"name":"json_tool_call","toolUseId":"j"}}]}},"stopReason":"tool_use"}`,
		`{"output":{"message":null},"stopReason":"guardrail_intervened","usage":null}`,
		`{"output":{"message":{"content":[{"text":7}]}}}`, `{"usage":{"inputTokens":-1}}`, `[]`, ``,
	} {
		f.Add([]byte(s), false)
	}
	f.Fuzz(func(t *testing.T, raw []byte, jsonMode bool) {
		e := &endpoint{model: "m"}
		cc, err := e.completion(raw, jsonMode)
		if err != nil {
			var pe *models.ProviderError
			if !errors.As(err, &pe) || pe.Status != 200 || !strings.HasPrefix(pe.Message, "unreadable Converse answer") {
				t.Fatalf("%q: %v; want an unreadable answer", raw, err)
			}
			return
		}
		if _, err := json.Marshal(cc); err != nil {
			t.Fatalf("%q: the completion does not encode: %v", raw, err)
		}
		if u := cc.Usage; u != nil && (u.PromptTokens < 0 || u.CompletionTokens < 0 || u.TotalTokens < 0) {
			t.Fatalf("%q: usage %+v", raw, u)
		}
		switch cc.Choices[0].FinishReason {
		case oai.FinishStop, oai.FinishLength, oai.FinishToolCalls, oai.FinishContentFilter:
		default:
			t.Fatalf("%q: finish reason %q", raw, cc.Choices[0].FinishReason)
		}
		for _, c := range cc.Choices[0].Message.ToolCalls {
			if !json.Valid([]byte(c.Function.Arguments)) {
				t.Fatalf("%q: tool call arguments %q are not JSON", raw, c.Function.Arguments)
			}
		}
	})
}
