package messages

import (
	"io"
	"strings"
	"testing"
	"unsafe"

	"github.com/sluice-gateway/sluice/pkg/logevent"
	"github.com/sluice-gateway/sluice/pkg/modelcall"
	"github.com/sluice-gateway/sluice/pkg/oai"
)

// TestJSONMeterReadsTheAnswerOnce: the cost header's usage (Usage) and the
// log event's (End) come from one pass over the answer.
func TestJSONMeterReadsTheAnswerOnce(t *testing.T) {
	answer := `{"id":"msg_1","type":"message","content":[{"type":"text","text":"Hi"}],"stop_reason":"end_turn","usage":{"input_tokens":12,"output_tokens":3,"cache_read_input_tokens":4}}`
	m := newJSONMeter(int64(len(answer)), true)
	var _ modelcall.UsageMeter = m
	io.WriteString(m, answer)
	quoted, ok := m.Usage()
	m.kept = append(m.kept[:0], `{}`...) // a second pass would read nothing
	var ev logevent.Event
	u, err := m.End(&ev)
	want := oai.Usage{PromptTokens: 16, CompletionTokens: 3, TotalTokens: 19,
		PromptTokensDetails: oai.PromptTokensDetails{CachedTokens: 4}, CacheReadInputTokens: 4}
	if err != nil || !ok || quoted != want || u != want || ev.FinishReason != "end_turn" {
		t.Errorf("Usage %+v (%v), End %+v, %v, finish %q", quoted, ok, u, err, ev.FinishReason)
	}
}

// TestAnswerMeterKnowsItsUsage: a translated answer's cost header reads
// nothing back: the usage is the translation's.
func TestAnswerMeterKnowsItsUsage(t *testing.T) {
	stop := StopEndTurn
	m := &answerMeter{answer: []byte(`{}`), res: &Response{StopReason: &stop, Usage: Usage{InputTokens: 5, OutputTokens: 2}}}
	var _ modelcall.UsageMeter = m
	u, ok := m.Usage()
	if want := (oai.Usage{PromptTokens: 5, CompletionTokens: 2, TotalTokens: 7}); !ok || u != want {
		t.Errorf("Usage %+v (%v)", u, ok)
	}
}

// TestAnswerMeterIsTheBody: the translated answer's meter is also the body
// the call copies, which yields the answer whole, then io.EOF.
func TestAnswerMeterIsTheBody(t *testing.T) {
	answer := []byte(`{"id":"msg_1","type":"message","content":[]}`)
	m := &answerMeter{answer: answer, res: &Response{}}
	got, err := io.ReadAll(io.LimitReader(struct{ io.Reader }{m}, 1<<20))
	if err != nil || string(got) != string(answer) {
		t.Errorf("read %q, %v", got, err)
	}
	if n, err := m.Read(make([]byte, 4)); n != 0 || err != io.EOF {
		t.Errorf("a read past the end: %d, %v", n, err)
	}
}

// TestJSONMeterKeepsTheAnswerOnlyToLogIt: an answer no callback logs is
// read without a copy when one write brings it whole, and copied to be read
// at its end otherwise; either way the event has no response, and the same
// usage and stop reason as when it is kept. Bytes past the answer's length
// that are not blank make it no message, as they would a kept one.
func TestJSONMeterKeepsTheAnswerOnlyToLogIt(t *testing.T) {
	answer := `{"id":"msg_1","type":"message","content":[{"type":"text","text":"Hi"}],"stop_reason":"max_tokens","usage":{"input_tokens":12,"output_tokens":3}}`
	want := oai.Usage{PromptTokens: 12, CompletionTokens: 3, TotalTokens: 15}
	for _, tc := range []struct {
		name   string
		keep   bool
		writes []string
		err    bool
	}{
		{"kept", true, []string{answer}, false},
		{"in place", false, []string{answer}, false},
		{"in pieces", false, []string{answer[:20], answer[20:]}, false},
		{"in place, then blanks", false, []string{answer, " \n"}, false},
		{"in place, then more", false, []string{answer, "{}"}, true},
		{"kept, then more", true, []string{answer, "{}"}, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m := newJSONMeter(int64(len(answer)), tc.keep)
			for _, w := range tc.writes {
				io.WriteString(m, w)
			}
			if !tc.keep && len(tc.writes[0]) == len(answer) && cap(m.kept) > 0 {
				t.Errorf("the answer was copied (%d bytes)", cap(m.kept))
			}
			var ev logevent.Event
			u, err := m.End(&ev)
			if tc.err {
				if err == nil {
					t.Errorf("End %+v, no error", u)
				}
				return
			}
			if err != nil || u != want || ev.FinishReason != StopMaxTokens {
				t.Errorf("End %+v, %v, finish %q", u, err, ev.FinishReason)
			}
			if got := string(ev.Response); tc.keep && got != answer || !tc.keep && ev.Response != nil {
				t.Errorf("the event's response %q (kept %v)", got, tc.keep)
			}
		})
	}
}

// TestJSONMeterReadsALargeAnswersUsageFromItsTail: an answer past the
// log's bound is not kept nor quoted; its usage, which Anthropic writes
// last, is read from the tail kept of it, and the tail is bounded.
func TestJSONMeterReadsALargeAnswersUsageFromItsTail(t *testing.T) {
	head := `{"id":"msg_1","type":"message","content":[{"type":"text","text":"`
	tail := `"}],"stop_reason":"end_turn","usage":{"input_tokens":7,"output_tokens":9}}`
	text := strings.Repeat("a", maxKept)
	answer := head + text + tail
	for _, keep := range []bool{true, false} {
		m := newJSONMeter(int64(len(answer)), keep)
		for rest := answer; len(rest) > 0; {
			n := min(len(rest), 32<<10)
			io.WriteString(m, rest[:n])
			rest = rest[n:]
		}
		if len(m.kept) > tailLen {
			t.Errorf("keep %v: %d bytes of tail kept, want %d at most", keep, len(m.kept), tailLen)
		}
		if _, ok := m.Usage(); ok {
			t.Errorf("keep %v: a usage quoted for an answer over the bound", keep)
		}
		var ev logevent.Event
		u, err := m.End(&ev)
		if want := (oai.Usage{PromptTokens: 7, CompletionTokens: 9, TotalTokens: 16}); err != nil || u != want || ev.Response != nil {
			t.Errorf("keep %v: End %+v, %v, response of %d bytes", keep, u, err, len(ev.Response))
		}
	}
}

// A call's state (messageCall) is one allocation a call: it stays in the
// allocator's 640-byte size class (objects with pointers above 512 bytes
// carry an 8-byte header), not the next one, 704 bytes.
func TestMessageCallFitsItsSizeClass(t *testing.T) {
	if n := unsafe.Sizeof(messageCall{}); n+8 > 640 {
		t.Errorf("a messageCall is %d bytes (+8 of header): past the 640-byte size class", n)
	}
}
