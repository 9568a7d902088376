package messages

import (
	"io"
	"testing"

	"github.com/sluice-gateway/sluice/pkg/logevent"
	"github.com/sluice-gateway/sluice/pkg/modelcall"
	"github.com/sluice-gateway/sluice/pkg/oai"
)

// TestJSONMeterReadsTheAnswerOnce: the cost header's usage (Usage) and the
// log event's (End) come from one pass over the answer.
func TestJSONMeterReadsTheAnswerOnce(t *testing.T) {
	answer := `{"id":"msg_1","type":"message","content":[{"type":"text","text":"Hi"}],"stop_reason":"end_turn","usage":{"input_tokens":12,"output_tokens":3,"cache_read_input_tokens":4}}`
	m := newJSONMeter(int64(len(answer)))
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
