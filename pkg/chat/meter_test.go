package chat

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"runtime"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/sluice-gateway/sluice/pkg/auth"
	"github.com/sluice-gateway/sluice/pkg/jsonscan"
	"github.com/sluice-gateway/sluice/pkg/logevent"
	"github.com/sluice-gateway/sluice/pkg/modelcall"
	"github.com/sluice-gateway/sluice/pkg/models"
	"github.com/sluice-gateway/sluice/pkg/oai"
	"github.com/sluice-gateway/sluice/pkg/sse"
)

// promptTokens is a prompt of so many tokens.
type promptTokens int64

func (p promptTokens) tokens() int64 { return int64(p) }

const noPrompt = promptTokens(0)

// writeInPieces writes b to w in pieces of n bytes, as a relay's reads
// would cut it.
func writeInPieces(w io.Writer, b []byte, n int) {
	for len(b) > 0 {
		k := min(n, len(b))
		w.Write(b[:k])
		b = b[k:]
	}
}

func TestJSONMeter(t *testing.T) {
	answer := `{"id":"chatcmpl-1","object":"chat.completion","created":1,"model":"gpt-4o","choices":[{"index":0,"message":{"role":"assistant","content":"hi"},"finish_reason":"length"},{"index":1,"message":{"role":"assistant","content":"yo"},"finish_reason":"stop"}],"usage":{"prompt_tokens":3,"completion_tokens":2,"total_tokens":5,"prompt_tokens_details":{"cached_tokens":1}}}`
	m := newJSONMeter(kindChat, noPrompt, int64(len(answer)), true)
	writeInPieces(m, []byte(answer), 7)
	var ev logevent.Event
	u, err := m.End(&ev)
	if err != nil {
		t.Fatal(err)
	}
	want := oai.Usage{PromptTokens: 3, CompletionTokens: 2, TotalTokens: 5, PromptTokensDetails: oai.PromptTokensDetails{CachedTokens: 1}}
	if diff := cmp.Diff(want, u); diff != "" || ev.FinishReason != "length" || string(ev.Response) != answer || ev.UsageEstimated {
		t.Errorf("usage (-want +got):\n%s\nevent %+v", diff, ev)
	}
}

func TestJSONMeterReadsTheAnswerOnceForTheCostHeaderAndTheEvent(t *testing.T) {
	answer := `{"choices":[{"index":0,"message":{"role":"assistant","content":"hi"},"finish_reason":"stop"}],"usage":{"prompt_tokens":3,"completion_tokens":2,"total_tokens":5}}`
	m := newJSONMeter(kindChat, noPrompt, int64(len(answer)), true)
	var _ modelcall.UsageMeter = m
	io.WriteString(m, answer)
	quoted, ok := m.Usage()
	want := oai.Usage{PromptTokens: 3, CompletionTokens: 2, TotalTokens: 5}
	if !m.scanned || !ok || quoted != want {
		t.Fatalf("Usage %+v (%v), scanned %v", quoted, ok, m.scanned)
	}
	// A mark in what the scan found: End reports it only if it does not
	// read the answer again.
	m.scan.finish = "marked"
	var ev logevent.Event
	u, err := m.End(&ev)
	if err != nil || u != want || ev.FinishReason != "marked" {
		t.Errorf("End %+v, %v, finish %q: the answer was read again", u, err, ev.FinishReason)
	}
}

func TestJSONMeterWithoutUsageEstimates(t *testing.T) {
	m := newJSONMeter(kindChat, promptTokens(10), -1, true)
	io.WriteString(m, `{"choices":[{"index":0,"message":{"role":"assistant","content":"four score and seven"},"finish_reason":"stop"}]}`)
	var ev logevent.Event
	u, err := m.End(&ev)
	if err != nil || !ev.UsageEstimated || u.PromptTokens != 10 || u.CompletionTokens != 6 || u.TotalTokens != 16 {
		t.Errorf("usage %+v, err %v, estimated %v", u, err, ev.UsageEstimated)
	}
}

func TestJSONMeterIncompleteAnswer(t *testing.T) {
	m := newJSONMeter(kindChat, noPrompt, -1, true)
	io.WriteString(m, `{"choices":[{"index":0,"message":{"role":"assis`)
	var ev logevent.Event
	if _, err := m.End(&ev); err == nil || ev.Response != nil {
		t.Errorf("err %v, response %s", err, ev.Response)
	}
}

// TestJSONMeterOverTheLogBound: an answer past maxLogged is not kept, but
// its usage (at the end) still counts, with bounded memory.
func TestJSONMeterOverTheLogBound(t *testing.T) {
	content := strings.Repeat(`word \"usage\": {\"prompt_tokens\":999} `, 3*maxLogged/40)
	answer := `{"id":"c","object":"chat.completion","choices":[{"index":0,"message":{"role":"assistant","content":"` + content +
		`"},"finish_reason":"stop"}],"usage":{"prompt_tokens":7,"completion_tokens":700000,"total_tokens":700007},"system_fingerprint":"fp"}`
	m := newJSONMeter(kindChat, noPrompt, -1, true)
	writeInPieces(m, []byte(answer), 32<<10)
	var ev logevent.Event
	u, err := m.End(&ev)
	if err != nil || u.TotalTokens != 700007 || u.PromptTokens != 7 || ev.Response != nil || ev.UsageEstimated {
		t.Errorf("usage %+v err %v response %d bytes", u, err, len(ev.Response))
	}
	if len(m.tail) != tailSize || m.buf != nil {
		t.Errorf("kept %d + %d bytes", len(m.buf), len(m.tail))
	}
}

func TestResponsesJSONMeter(t *testing.T) {
	m := newJSONMeter(kindResponses, noPrompt, -1, true)
	io.WriteString(m, `{"id":"resp_1","object":"response","status":"incomplete","output":[],"usage":{"input_tokens":4,"output_tokens":6,"total_tokens":10,"output_tokens_details":{"reasoning_tokens":2}}}`)
	var ev logevent.Event
	u, err := m.End(&ev)
	if err != nil || u.TotalTokens != 10 || u.CompletionTokensDetails.ReasoningTokens != 2 || ev.FinishReason != "incomplete" {
		t.Errorf("usage %+v err %v event %+v", u, err, ev)
	}
}

// stream is an OpenAI chunk stream: a role chunk, the texts as content
// deltas, a tool call in two pieces, the finish, the usage chunk, [DONE].
func stream(texts ...string) []byte {
	w := oai.NewChunkWriter("chatcmpl-x", "gpt-4o", 5)
	b := w.Role(nil, 0)
	for _, s := range texts {
		b = w.Choice(b, &oai.ChunkChoice{Delta: oai.Delta{Content: s}})
	}
	b = w.Choice(b, &oai.ChunkChoice{Delta: oai.Delta{ToolCalls: []oai.ToolCallDelta{{Index: 0, ID: "call_1", Type: "function", Name: "f"}}}})
	b = w.Choice(b, &oai.ChunkChoice{Delta: oai.Delta{ToolCalls: []oai.ToolCallDelta{{Index: 0, Arguments: `{"a":"`}}}})
	b = w.Choice(b, &oai.ChunkChoice{Delta: oai.Delta{ToolCalls: []oai.ToolCallDelta{{Index: 0, Arguments: `\n"}`}}}})
	b = w.Finish(b, 0, oai.FinishToolCalls)
	b = w.Usage(b, &oai.Usage{PromptTokens: 4, CompletionTokens: 9, TotalTokens: 13})
	return w.Done(b)
}

// answer is the chat.completion the chunks add up to, as a log keeps it.
type answer struct {
	ID      string `json:"id"`
	Model   string `json:"model"`
	Choices []struct {
		Message struct {
			Content   *string        `json:"content"`
			ToolCalls []oai.ToolCall `json:"tool_calls"`
		} `json:"message"`
		FinishReason string `json:"finish_reason"`
	} `json:"choices"`
	Usage     oai.Usage `json:"usage"`
	Truncated bool      `json:"truncated"`
}

func TestStreamMeter(t *testing.T) {
	texts := []string{"Hel", "lo \"wörld\"\n", "\u2028 ✓"}
	m := newStreamMeter(newChunks(kindChat, noPrompt))
	writeInPieces(m, stream(texts...), 13)
	var ev logevent.Event
	u, err := m.End(&ev)
	if err != nil || u.TotalTokens != 13 || ev.FinishReason != "tool_calls" || ev.UsageEstimated {
		t.Fatalf("usage %+v err %v event %+v", u, err, ev)
	}
	var a answer
	if err := json.Unmarshal(ev.Response, &a); err != nil {
		t.Fatalf("response %s: %v", ev.Response, err)
	}
	if a.ID != "chatcmpl-x" || a.Model != "gpt-4o" || *a.Choices[0].Message.Content != strings.Join(texts, "") || a.Usage.TotalTokens != 13 ||
		a.Choices[0].FinishReason != "tool_calls" {
		t.Errorf("response %s", ev.Response)
	}
	want := []oai.ToolCall{{ID: "call_1", Type: "function", Function: oai.FunctionCall{Name: "f", Arguments: `{"a":"\n"}`}}}
	if diff := cmp.Diff(want, a.Choices[0].Message.ToolCalls); diff != "" {
		t.Errorf("tool calls (-want +got):\n%s", diff)
	}
}

func TestUsageFilterDropsOnlyTheUsageChunk(t *testing.T) {
	in := stream("a", "b")
	f := newUsageFilter(io.NopCloser(bytes.NewReader(in)), newChunks(kindChat, noPrompt))
	var out bytes.Buffer
	n := 0
	buf := make([]byte, 1<<16)
	for {
		k, err := f.Read(buf)
		if k > 0 {
			n++
			out.Write(buf[:k])
			if bytes.Count(buf[:k], []byte("\n\n")) != 1 {
				t.Errorf("a read gave %q, not one event", buf[:k])
			}
		}
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
	}
	var ev logevent.Event
	u, _ := f.End(&ev)
	got := strings.Split(strings.TrimSuffix(out.String(), "\n\n"), "\n\n")
	want := strings.Split(strings.TrimSuffix(string(in), "\n\n"), "\n\n")
	// Everything but the usage chunk (second to last), byte for byte.
	want = append(want[:len(want)-2], want[len(want)-1])
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("relayed (-want +got):\n%s", diff)
	}
	if u.TotalTokens != 13 || n != len(want) {
		t.Errorf("usage %+v after %d reads", u, n)
	}
}

func TestUsageFilterPassesAStreamError(t *testing.T) {
	cut := stream("a")
	cut = cut[:bytes.Index(cut, []byte(`"content":"a"`))]
	f := newUsageFilter(io.NopCloser(bytes.NewReader(cut)), newChunks(kindChat, noPrompt))
	_, err := io.ReadAll(f)
	if !errors.Is(err, sse.ErrTruncated) {
		t.Errorf("error %v, want the cut", err)
	}
}

// TestStreamMeterKeepsABoundedLog: content past maxLogged is counted for
// an estimate but not kept; the log says truncated.
func TestStreamMeterKeepsABoundedLog(t *testing.T) {
	w := oai.NewChunkWriter("c", "m", 1)
	m := newStreamMeter(newChunks(kindChat, noPrompt))
	piece := strings.Repeat("x", 1000)
	for range 2 * maxLogged / 1000 {
		m.Write(w.Choice(nil, &oai.ChunkChoice{Delta: oai.Delta{Content: piece}}))
	}
	m.Write(w.Done(w.Finish(nil, 0, "length")))
	var ev logevent.Event
	u, _ := m.End(&ev)
	var a answer
	if err := json.Unmarshal(ev.Response, &a); err != nil || !a.Truncated || len(*a.Choices[0].Message.Content) > maxLogged {
		t.Fatalf("response of %d bytes: %v", len(ev.Response), err)
	}
	if !ev.UsageEstimated || u.CompletionTokens != 2*maxLogged/1000*1000/4 {
		t.Errorf("usage %+v", u)
	}
}

func FuzzStreamMeter(f *testing.F) {
	f.Add([]byte("Hello\x00 wörld\x00\"quoted\"\n"), 7)
	f.Add([]byte("\xff\xfe\x00\u2028"), 1)
	f.Add([]byte("data: {\"choices\":[{\"index\":99999999999,\"delta\":{\"content\":1}}]}\n\n"), 3)
	f.Fuzz(func(t *testing.T, raw []byte, piece int) {
		piece = max(1, piece%4096)
		// Arbitrary bytes: never a panic, and what the log keeps is JSON.
		m := newStreamMeter(newChunks(kindChat, noPrompt))
		writeInPieces(m, raw, piece)
		var ev logevent.Event
		m.End(&ev) // an error event in raw is an error here
		if ev.Response != nil && !json.Valid(ev.Response) {
			t.Fatalf("response is not JSON: %s", ev.Response)
		}
		// The texts (raw split at NUL) streamed: the log holds them whole.
		texts := strings.Split(string(raw), "\x00")
		m = newStreamMeter(newChunks(kindChat, noPrompt))
		writeInPieces(m, stream(texts...), piece)
		ev = logevent.Event{}
		u, _ := m.End(&ev)
		var a answer
		if err := json.Unmarshal(ev.Response, &a); err != nil {
			t.Fatalf("response %s: %v", ev.Response, err)
		}
		content := "" // null: the message has only its tool call
		if c := a.Choices[0].Message.Content; c != nil {
			content = *c
		}
		if want := strings.Join(texts, ""); content != want && utf8Valid(raw) {
			t.Fatalf("content %q, want %q", content, want)
		}
		if u.TotalTokens != 13 {
			t.Fatalf("usage %+v", u)
		}
	})
}

func utf8Valid(b []byte) bool { return strings.ToValidUTF8(string(b), "") == string(b) }

// router answers every call with a stream of n events from next.
type router struct {
	body func() io.ReadCloser
}

func (r router) Chat(context.Context, auth.Principal, *oai.ChatRequest) (*models.Reply, error) {
	return &models.Reply{Answer: &models.Answer{Body: r.body(), ContentLength: -1}}, nil
}

func (r router) Complete(context.Context, auth.Principal, *oai.CompletionRequest) (*models.Reply, error) {
	return nil, errors.New("not used")
}

func (r router) Respond(context.Context, auth.Principal, *oai.ResponsesRequest) (*models.Reply, error) {
	return nil, errors.New("not used")
}

// longStream is a provider stream of n content chunks (each 100 bytes of
// text), the usage chunk and [DONE], made as it is read.
func longStream(n int) io.ReadCloser {
	w := oai.NewChunkWriter("chatcmpl-long", "m", 1)
	lit := []byte(`"` + strings.Repeat("token ", 16) + `abcd"`)
	i := 0
	return oai.NewChunkStream(func(dst []byte) ([]byte, error) {
		i++
		switch {
		case i == 1:
			return w.Role(dst, 0), nil
		case i <= n+1:
			return w.Text(dst, 0, lit), nil
		}
		dst = w.Finish(dst, 0, oai.FinishStop)
		dst = w.Usage(dst, &oai.Usage{PromptTokens: 1, CompletionTokens: int64(n), TotalTokens: int64(n) + 1})
		return w.Done(dst), io.EOF
	}, nil)
}

// TestLongStreamsRelayInFlatMemory: relaying 10,000 events allocates no
// more than relaying 20,000 (past the log's bound, nothing grows), whether
// the usage chunk is relayed or filtered out.
func TestLongStreamsRelayInFlatMemory(t *testing.T) {
	for _, tc := range []struct {
		name string
		body string
	}{
		{"usage asked (relayed untouched)", `{"model":"m","messages":[{"role":"user","content":"x"}],"stream":true,"stream_options":{"include_usage":true}}`},
		{"usage not asked (filtered)", `{"model":"m","messages":[{"role":"user","content":"x"}],"stream":true}`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			relay := func(n int) (alloc uint64, usage oai.Usage) {
				s := New(router{body: func() io.ReadCloser { return longStream(n) }}, modelcall.New(nil, nil))
				var before, after runtime.MemStats
				runtime.GC()
				runtime.ReadMemStats(&before)
				res, err := s.Chat(context.Background(), auth.Principal{}, []byte(tc.body))
				if err != nil {
					t.Fatal(err)
				}
				if _, err := res.WriteTo(io.Discard); err != nil {
					t.Fatal(err)
				}
				runtime.ReadMemStats(&after)
				return after.TotalAlloc - before.TotalAlloc, res.Usage()
			}
			a10, u10 := relay(10_000)
			a20, u20 := relay(20_000)
			if u10.TotalTokens != 10_001 || u20.TotalTokens != 20_001 {
				t.Fatalf("usage %+v %+v", u10, u20)
			}
			// 10,000 more events (1 MB more text) may not cost more than a
			// small fraction of it.
			if a20 > a10+256<<10 {
				t.Errorf("10,000 events allocated %d bytes, 20,000 allocated %d", a10, a20)
			}
			t.Logf("allocated %s for 10,000 events, %s for 20,000", kib(a10), kib(a20))
		})
	}
}

func kib(n uint64) string { return fmt.Sprintf("%d KiB", n>>10) }

// TestStreamMeterNotesAnInBandError: a provider's error event inside its
// stream reaches the client as it came and fails the call's log event.
func TestStreamMeterNotesAnInBandError(t *testing.T) {
	w := oai.NewChunkWriter("c", "m", 1)
	m := newStreamMeter(newChunks(kindChat, noPrompt))
	m.Write(w.Role(nil, 0))
	io.WriteString(m, `data: {"error":{"message":"The server had an error while processing your request.","type":"server_error"}}`+"\n\n")
	var ev logevent.Event
	_, err := m.End(&ev)
	if err == nil || !strings.Contains(err.Error(), "The server had an error") {
		t.Errorf("error %v", err)
	}
}

// FuzzJSONMeter: any answer, in any pieces, of any kind: never a panic;
// what the log keeps is JSON; a usage the answer carries is what is
// counted, over the log's bound too.
func FuzzJSONMeter(f *testing.F) {
	f.Add([]byte(`{"id":"chatcmpl-1","choices":[{"index":0,"message":{"role":"assistant","content":"Hi"},"finish_reason":"stop"}],"usage":{"prompt_tokens":3,"completion_tokens":2,"total_tokens":5}}`), 7, uint8(0), false)
	f.Add([]byte(`{"choices":[{"text":"x","finish_reason":"length"}],"usage":null}`), 1, uint8(1), true)
	f.Add([]byte(`{"status":"completed","output":[],"usage":{"input_tokens":1,"output_tokens":2,"total_tokens":3}}`), 3, uint8(2), false)
	f.Add([]byte(`{"choices":[{"finish_reason":"stop","message":{"content":"a\x"}}],"choices":[{"finish_reason":"length"}]}`), 5, uint8(0), false)
	f.Add([]byte(`{"choices":[1,{"finish_reason":"stop"}],"usage":{"prompt_tokens":1,"completion_tokens":2,"total_tokens":3}}`), 64, uint8(0), false)
	f.Add([]byte(`{"choices":[{"finish_reason":"stop","finish_reason":7},{"finish_reason":"length"},],"x":tru}`), 64, uint8(1), false)
	f.Add([]byte(`{"usage":{"prompt_tokens":1,"total_tokens":3,"prompt_tokens_details":{"cached_tokens":1},"completion_tokens_details":null},"usage":{"prompt_tokens":"2"}}`), 4096, uint8(0), false)
	f.Add([]byte(`{"usage":{"prompt_tokens":5,"completion_tokens_details":{"reasoning_tokens":2,"x":[1 2]}},"usage":null,"x":1}`), 4096, uint8(1), false)
	f.Fuzz(func(t *testing.T, doc []byte, piece int, k uint8, pad bool) {
		piece = max(1, piece%(64<<10))
		kd := kind(k % 3)
		var ev logevent.Event
		m := newJSONMeter(kd, noPrompt, -1, true)
		writeInPieces(m, doc, piece)
		kept, endErr := m.End(&ev)
		if ev.Response != nil && !json.Valid(ev.Response) {
			t.Fatalf("response is not JSON: %q", ev.Response)
		}
		if len(doc) <= maxLogged {
			notKeptAgrees(t, kd, doc, kept, endErr, &ev)
		}
		// The answer's one walk (its choices read by their own checked
		// walk) agrees with a walk that delimits each member first and
		// reads the choices after: the same finish reason, and the answer
		// logged exactly when it is JSON.
		if len(doc) <= maxLogged {
			want := ""
			walkErr := jsonscan.Members(doc, func(name, v []byte) error {
				if string(name) == "choices" && want == "" {
					want = firstFinish(v)
				}
				return nil
			})
			if kd != kindResponses && ev.FinishReason != want {
				t.Fatalf("finish reason %q, want %q, of %q", ev.FinishReason, want, doc)
			}
			if logged := walkErr == nil && json.Valid(doc); (ev.Response != nil) != logged || (endErr == nil) != (walkErr == nil) {
				t.Fatalf("response logged %v (error %v), want %v (walk error %v), of %q", ev.Response != nil, endErr, logged, walkErr, doc)
			}
		}
		// The same answer with a usage at its end, as providers put it,
		// padded past the log's bound when pad: that usage is counted.
		if kd == kindResponses || !json.Valid(doc) || len(doc) == 0 || doc[0] != '{' {
			return
		}
		var members map[string]json.RawMessage
		if json.Unmarshal(doc, &members) != nil {
			return
		}
		delete(members, "usage")
		if pad {
			members["padding"] = json.RawMessage(`"` + strings.Repeat("x", maxLogged) + `"`)
		}
		body, _ := json.Marshal(members)
		body = append(body[:len(body)-1], `,"usage":{"prompt_tokens":7,"completion_tokens":11,"total_tokens":18}}`...)
		if len(members) == 0 {
			body = []byte(`{"usage":{"prompt_tokens":7,"completion_tokens":11,"total_tokens":18}}`)
		}
		ev = logevent.Event{}
		m = newJSONMeter(kd, noPrompt, int64(len(body)), true)
		writeInPieces(m, body, piece)
		u, err := m.End(&ev)
		if err != nil || u.TotalTokens != 18 || ev.UsageEstimated {
			t.Fatalf("usage %+v, err %v, estimated %v of %q", u, err, ev.UsageEstimated, doc)
		}
	})
}

// notKeptAgrees checks that a meter of an answer nobody logs, written whole
// (read where it is) and in pieces (copied), finds what the meter that
// kept it did — usage, error, finish reason, estimate — and logs nothing.
func notKeptAgrees(t *testing.T, kd kind, doc []byte, want oai.Usage, wantErr error, kept *logevent.Event) {
	t.Helper()
	for _, piece := range []int{len(doc), 5} {
		var ev logevent.Event
		m := newJSONMeter(kd, noPrompt, int64(len(doc)), false)
		writeInPieces(m, doc, max(piece, 1))
		u, err := m.End(&ev)
		if diff := cmp.Diff(want, u); diff != "" || (err == nil) != (wantErr == nil) || ev.Response != nil ||
			ev.FinishReason != kept.FinishReason || ev.UsageEstimated != kept.UsageEstimated {
			t.Fatalf("not kept, in pieces of %d: usage (-kept +not) %s, error %v (kept %v), response %q, finish %q (kept %q), estimated %v, of %q",
				piece, diff, err, wantErr, ev.Response, ev.FinishReason, kept.FinishReason, ev.UsageEstimated, doc)
		}
	}
}

// An answer nobody logs is metered as one that is kept, without its copy:
// the relay's whole answer is read in the write that brings it.
func TestJSONMeterReadsAnAnswerNobodyLogsInPlace(t *testing.T) {
	m := newJSONMeter(kindChat, noPrompt, int64(len(benchAnswer)), false)
	m.Write(benchAnswer)
	if m.buf != nil || !m.direct {
		t.Fatalf("the answer was copied (%d bytes kept), read in place %v", len(m.buf), m.direct)
	}
	if u, ok := m.Usage(); !ok || u.TotalTokens != 201 {
		t.Errorf("usage for the cost header %+v %v", u, ok)
	}
	var ev logevent.Event
	if u, err := m.End(&ev); err != nil || u.TotalTokens != 201 || ev.FinishReason != "stop" || ev.Response != nil {
		t.Errorf("usage %+v, err %v, finish %q, response %q", u, err, ev.FinishReason, ev.Response)
	}
}

// An answer nobody logs has its usage read where it is, in the answer's
// walk: the same counts, details and refusals as the kept answer's.
func TestJSONMeterReadsTheUsageInPlace(t *testing.T) {
	for _, tc := range []struct {
		doc  string
		want oai.Usage
		read bool
	}{
		{`{"usage":{"prompt_tokens":3,"completion_tokens":2,"total_tokens":5,"prompt_tokens_details":{"cached_tokens":1,"audio_tokens":0},"completion_tokens_details":{"reasoning_tokens":2}},"x":1}`,
			oai.Usage{PromptTokens: 3, CompletionTokens: 2, TotalTokens: 5, PromptTokensDetails: oai.PromptTokensDetails{CachedTokens: 1}, CompletionTokensDetails: oai.CompletionTokensDetails{ReasoningTokens: 2}}, true},
		{`{"usage":{"prompt_tokens":3,"completion_tokens":2},"usage":null}`, oai.Usage{PromptTokens: 3, CompletionTokens: 2, TotalTokens: 5}, true},
		{`{"usage":{"prompt_tokens":3},"usage":{"prompt_tokens_details":{"cached_tokens":-1}}}`, oai.Usage{}, false},
		{`{"usage":{"prompt_tokens":3,"prompt_tokens_details":[]}}`, oai.Usage{}, false},
	} {
		doc := []byte(tc.doc)
		for _, keep := range []bool{false, true} {
			m := newJSONMeter(kindChat, noPrompt, int64(len(doc)), keep)
			m.Write(doc)
			if u, ok := m.Usage(); ok != tc.read || ok && u != tc.want {
				t.Errorf("%s, kept %v: usage %+v %v, want %+v %v", doc, keep, u, ok, tc.want, tc.read)
			}
		}
	}
}

// Bytes past the answer's length after it was read in place: not the
// answer read, so not a complete JSON object.
func TestJSONMeterInPlaceRefusesBytesPastTheLength(t *testing.T) {
	m := newJSONMeter(kindChat, noPrompt, int64(len(benchAnswer)), false)
	m.Write(benchAnswer)
	m.Write([]byte(" \n"))
	var ev logevent.Event
	if _, err := m.End(&ev); err != nil {
		t.Fatalf("trailing space: %v", err)
	}
	m = newJSONMeter(kindChat, noPrompt, int64(len(benchAnswer)), false)
	m.Write(benchAnswer)
	m.Write([]byte(`{}`))
	if _, err := m.End(&ev); err == nil || !ev.UsageEstimated {
		t.Errorf("trailing bytes: err %v, estimated %v", err, ev.UsageEstimated)
	}
}

// A translation nobody logs: its usage and finish reason, no copy.
func TestJSONMeterTakesATranslatorsUsageWithoutACopy(t *testing.T) {
	body := []byte(`{"choices":[{"finish_reason":"length"}]}`)
	m := newJSONMeter(kindChat, noPrompt, int64(len(body)), false)
	m.usage, m.finish = &oai.Usage{PromptTokens: 7, CompletionTokens: 3, TotalTokens: 10}, oai.FinishStop
	writeInPieces(m, body, 3)
	var ev logevent.Event
	u, err := m.End(&ev)
	if err != nil || u.TotalTokens != 10 || ev.FinishReason != oai.FinishStop || ev.Response != nil || m.buf != nil {
		t.Errorf("usage %+v, %v; event finish %q, response %s, copy %q", u, err, ev.FinishReason, ev.Response, m.buf)
	}
}

// FuzzUsageFilter: any provider stream through the filter of a client that
// did not ask for usage: never a panic, events out whole, no usage chunk
// among them, and what the log keeps is JSON.
func FuzzUsageFilter(f *testing.F) {
	f.Add(stream("a", "b"))
	f.Add([]byte("data: {\"choices\":[],\"usage\":{\"prompt_tokens\":1,\"completion_tokens\":1,\"total_tokens\":2}}\n\ndata: [DONE]\n\n"))
	f.Add([]byte("event: x\r\ndata: {\"choices\":[{\"index\":1,\"delta\":{\"tool_calls\":[{\"index\":3}]}}]}\r\n\r\n"))
	f.Fuzz(func(t *testing.T, raw []byte) {
		f := newUsageFilter(io.NopCloser(bytes.NewReader(raw)), newChunks(kindChat, noPrompt))
		out, _ := io.ReadAll(f) // a cut stream is an error here
		var ev logevent.Event
		f.End(&ev)
		if ev.Response != nil && !json.Valid(ev.Response) {
			t.Fatalf("response is not JSON: %q", ev.Response)
		}
		p := sse.NewParser(sse.Limits{}, func(e sse.Event) {
			if newChunks(kindChat, noPrompt).observe(e.Data) {
				t.Fatalf("a usage chunk went through: %q", e.Data)
			}
		})
		p.Write(out)
		if err := p.End(); len(out) > 0 && err != nil {
			t.Fatalf("the filter's output does not end with a whole event (%v): %q", err, out)
		}
	})
}

// FuzzResponseStreamMeter: any Responses API stream, in any pieces: never
// a panic, and what the log keeps is JSON.
func FuzzResponseStreamMeter(f *testing.F) {
	f.Add([]byte("event: response.completed\ndata: {\"type\":\"response.completed\",\"response\":{\"status\":\"completed\",\"usage\":{\"input_tokens\":1,\"output_tokens\":2,\"total_tokens\":3}}}\n\n"), 5)
	f.Add([]byte("data: {\"delta\":\"x\"}\n\ndata: {\"response\":[1]}\n\n"), 1)
	f.Fuzz(func(t *testing.T, raw []byte, piece int) {
		m := newResponseStreamMeter(noPrompt)
		writeInPieces(m, raw, max(1, piece%4096))
		var ev logevent.Event
		u, _ := m.End(&ev)
		if ev.Response != nil && !json.Valid(ev.Response) {
			t.Fatalf("response is not JSON: %q", ev.Response)
		}
		if u.TotalTokens < 0 {
			t.Fatalf("usage %+v", u)
		}
	})
}

// A translated answer's usage and finish reason come with it: the meter
// takes them and reads nothing of the body for them.
func TestJSONMeterTakesATranslatorsUsage(t *testing.T) {
	body := []byte(`{"choices":[{"finish_reason":"length"}],"usage":{"prompt_tokens":1,"completion_tokens":1,"total_tokens":2}}`)
	m := newJSONMeter(kindChat, noPrompt, int64(len(body)), true)
	m.usage, m.finish = &oai.Usage{PromptTokens: 7, CompletionTokens: 3, TotalTokens: 10}, oai.FinishStop
	m.Write(body)
	var ev logevent.Event
	u, err := m.End(&ev)
	if err != nil || u.TotalTokens != 10 || ev.FinishReason != oai.FinishStop || string(ev.Response) != string(body) || ev.UsageEstimated {
		t.Errorf("usage %+v, %v; event finish %q, response %s", u, err, ev.FinishReason, ev.Response)
	}
}

func TestFirstFinish(t *testing.T) {
	for _, tc := range []struct{ choices, want string }{
		{`[{"index":0,"message":{"content":"a"},"finish_reason":"stop"},{"finish_reason":"length"}]`, "stop"},
		{` [ {"finish_reason":"tool_calls"} ] `, "tool_calls"},
		{`[{"index":1},{"finish_reason":"length"}]`, ""},
		{`[{"finish_reason":"st\u006fp"}]`, "stop"},
		{`[{"finish_reason":"a_new_reason"}]`, "a_new_reason"},
		{`[{"finish_reason":null}]`, ""},
		{`[1,{"finish_reason":"stop"}]`, ""},
		{`[]`, ""},
		{`{}`, ""},
	} {
		if got := firstFinish([]byte(tc.choices)); got != tc.want {
			t.Errorf("firstFinish(%s) = %q, want %q", tc.choices, got, tc.want)
		}
	}
}

// FuzzFirstFinish holds firstFinish to encoding/json on every choices array
// it reads: the first choice's finish_reason string.
func FuzzFirstFinish(f *testing.F) {
	f.Add([]byte(`[{"index":0,"message":{"role":"assistant","content":"hi"},"finish_reason":"stop"}]`))
	f.Add([]byte(`[{"finish_reason":"length","finish_reason":"stop"},{"finish_reason":"x"}]`))
	f.Fuzz(func(t *testing.T, choices []byte) {
		got := firstFinish(choices)
		var all []json.RawMessage
		if json.Unmarshal(choices, &all) != nil || len(all) == 0 {
			return
		}
		var first map[string]any // names matched exactly, the last copy kept
		if json.Unmarshal(all[0], &first) != nil {
			return
		}
		want, _ := first["finish_reason"].(string)
		if got != want {
			t.Fatalf("firstFinish(%q) = %q, encoding/json %q", choices, got, want)
		}
	})
}
