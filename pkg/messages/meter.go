package messages

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"

	"github.com/sluice-gateway/sluice/pkg/jsonscan"
	"github.com/sluice-gateway/sluice/pkg/logevent"
	"github.com/sluice-gateway/sluice/pkg/oai"
	"github.com/sluice-gateway/sluice/pkg/sse"
)

// Bounds of what a JSON meter keeps: the answer for the log event up to
// maxKept, past that a tail where its usage is.
const (
	maxKept = 1 << 20
	tailLen = 64 << 10
)

// toOAI is a message's usage as the gateway counts it (LiteLLM's): prompt
// tokens include the cache's reads and writes.
func toOAI(u Usage) oai.Usage {
	prompt := u.InputTokens + u.CacheReadInputTokens + u.CacheCreationInputTokens
	return oai.Usage{
		PromptTokens: prompt, CompletionTokens: u.OutputTokens, TotalTokens: prompt + u.OutputTokens,
		PromptTokensDetails:      oai.PromptTokensDetails{CachedTokens: u.CacheReadInputTokens},
		CacheReadInputTokens:     u.CacheReadInputTokens,
		CacheCreationInputTokens: u.CacheCreationInputTokens,
	}
}

var errNotUsage = errors.New("usage is not an object of token counts")

// jsonMeter reads a message answer's usage and stop reason, and keeps the
// answer (1 MiB at most) for the log event when a callback may log it. Its
// one pass over an answer kept whole (read) serves both the cost header
// (Usage, before the answer goes out) and End. An answer nobody logs that
// comes whole in one write (the relay reads answers within its buffer
// whole) is read where it is, never copied.
type jsonMeter struct {
	length int64 // the answer's length, -1 when unknown
	// kept is the answer, or once it is over the bound, its tail: one
	// slice and the flags side by side keep the call's state (messageCall)
	// in its size class.
	kept []byte
	keep bool // the event keeps the answer (modelcall.Call.LogsBodies)
	over bool
	// scanned: the pass over kept has run, with what it read; direct: it
	// ran over the write that brought the answer whole, which is not kept.
	scanned bool
	direct  bool
	stop    string
	usage   Usage
	err     error
}

// newJSONMeter meters an answer of length bytes (-1: unknown), kept for the
// log event when keep.
func newJSONMeter(length int64, keep bool) *jsonMeter {
	m := &jsonMeter{}
	m.start(length, keep)
	return m
}

// start readies the meter for an answer of length bytes (-1: unknown), kept
// for the log event when keep: a copy's buffer is sized once when the length
// is known and within the bound.
func (m *jsonMeter) start(length int64, keep bool) {
	m.length, m.keep = length, keep
	if keep {
		m.size()
	}
}

func (m *jsonMeter) size() {
	if m.length > 0 && m.length <= maxKept {
		m.kept = make([]byte, 0, m.length)
	}
}

func (m *jsonMeter) Write(p []byte) (int, error) {
	if !m.keep && m.readInPlace(p) {
		return len(p), nil
	}
	m.scanned = false
	if !m.over && len(m.kept)+len(p) <= maxKept {
		if m.kept == nil {
			m.size()
		}
		m.kept = append(m.kept, p...)
		return len(p), nil
	}
	if !m.over {
		// The tail in a buffer of its own: the answer's is let go.
		m.over = true
		m.kept = append([]byte(nil), m.kept[max(0, len(m.kept)-tailLen):]...)
	}
	m.kept = append(m.kept, p...)
	if len(m.kept) > tailLen {
		m.kept = append(m.kept[:0], m.kept[len(m.kept)-tailLen:]...)
	}
	return len(p), nil
}

// readInPlace reads p, of an answer not kept, without copying it when p
// is the whole answer (its first write, of its known length, within the
// bound). false: p is to be copied, to be read when the answer is whole.
func (m *jsonMeter) readInPlace(p []byte) bool {
	switch {
	case m.direct:
		// Bytes past the answer's length (an http.Response body never
		// gives them): the answer read was not the whole document, which
		// is no message unless they are blank (as a read of both would say).
		if m.err == nil && jsonscan.SkipSpace(p, 0) < len(p) {
			m.err = errTrailing
		}
		return true
	case m.over || len(m.kept) > 0 || int64(len(p)) != m.length || m.length > maxKept:
		return false
	}
	m.direct = true
	m.scan(p)
	return true
}

// errTrailing is End's error for an answer with bytes past the message
// read whole.
var errTrailing = errors.New("bytes after the message")

// read decodes the usage and stop_reason of the answer kept whole, once:
// only the two members (as encoding/json would decode them, without
// reflection: FuzzJSONMeter); the content is kept as it is.
func (m *jsonMeter) read() {
	if !m.scanned {
		m.scan(m.kept)
	}
}

// scan is read's pass over the whole answer doc.
func (m *jsonMeter) scan(doc []byte) {
	m.scanned = true
	m.stop, m.usage = "", Usage{}
	m.err = jsonscan.Members(doc, func(name, v []byte) error {
		var err error
		switch {
		case jsonscan.Null(v):
		case string(name) == "usage":
			if !m.usage.Decode(v) {
				err = errNotUsage
			}
		case string(name) == "stop_reason":
			m.stop, err = stopOf(v)
		}
		return err
	})
}

// stopOf decodes a stop_reason's string: one of Anthropic's stop reasons
// (unescaped, as Anthropic writes them) without a copy.
func stopOf(v []byte) (string, error) {
	for _, s := range [...]string{StopEndTurn, StopMaxTokens, StopToolUse, StopStopSequence, StopRefusal} {
		if len(v) == len(s)+2 && v[0] == '"' && string(v[1:len(v)-1]) == s {
			return s, nil
		}
	}
	return jsonscan.String(v)
}

// Usage is the answer's usage, for its cost header: read from an answer
// kept whole; not known for one over the log's bound, never quoted.
func (m *jsonMeter) Usage() (oai.Usage, bool) {
	if m.over {
		return oai.Usage{}, false
	}
	m.read()
	if m.err != nil {
		return oai.Usage{}, false
	}
	return toOAI(m.usage), true
}

func (m *jsonMeter) End(ev *logevent.Event) (oai.Usage, error) {
	if !m.over {
		m.read()
		if m.err != nil {
			return oai.Usage{}, fmt.Errorf("messages: the answer is not a message: %w", m.err)
		}
		if m.keep {
			ev.Response = m.kept
		}
		ev.FinishReason = m.stop
		return toOAI(m.usage), nil
	}
	// Anthropic writes usage last: read it from the tail.
	var u Usage
	i := bytes.LastIndex(m.kept, []byte(`"usage"`))
	if i < 0 {
		return oai.Usage{}, nil
	}
	rest := m.kept[i+len(`"usage"`):]
	if j := bytes.IndexByte(rest, ':'); j >= 0 {
		json.NewDecoder(bytes.NewReader(rest[j+1:])).Decode(&u)
	}
	return toOAI(u), nil
}

// answerMeter meters a translated answer, which sluice wrote: its usage
// and stop reason are known, nothing is read back from the bytes. It is
// also the answer's body, which the call copies (Read): one object a call.
type answerMeter struct {
	answer []byte
	res    *Response
	read   int // how much of answer Read has given
}

func (m *answerMeter) Read(p []byte) (int, error) {
	if m.read >= len(m.answer) {
		return 0, io.EOF
	}
	n := copy(p, m.answer[m.read:])
	m.read += n
	return n, nil
}

func (m *answerMeter) Close() error { return nil }

func (m *answerMeter) Write(p []byte) (int, error) { return len(p), nil }

// Usage is the answer's usage, known: the cost header reads nothing back.
func (m *answerMeter) Usage() (oai.Usage, bool) { return toOAI(m.res.Usage), true }

func (m *answerMeter) End(ev *logevent.Event) (oai.Usage, error) {
	ev.Response = m.answer
	if m.res.StopReason != nil {
		ev.FinishReason = *m.res.StopReason
	}
	return toOAI(m.res.Usage), nil
}

// streamMeter reads a Messages event stream as it goes by: the usage of
// message_start and message_delta (whose counts are cumulative), the stop
// reason, and whether message_stop went out (the caller has it whole).
type streamMeter struct {
	parser *sse.Parser
	usage  Usage
	stop   string
	whole  bool
}

func newStreamMeter() *streamMeter {
	m := &streamMeter{}
	m.parser = sse.NewParser(sse.Limits{}, m.event)
	return m
}

func (m *streamMeter) Write(p []byte) (int, error) { return m.parser.Write(p) }

func (m *streamMeter) event(ev sse.Event) {
	switch string(ev.Type) {
	case EventMessageStart:
		var s struct {
			Message struct {
				Usage Usage `json:"usage"`
			} `json:"message"`
		}
		if json.Unmarshal(ev.Data, &s) == nil {
			m.usage = s.Message.Usage
		}
	case EventMessageDelta:
		var d struct {
			Delta struct {
				StopReason string `json:"stop_reason"`
			} `json:"delta"`
			Usage *struct {
				InputTokens              *int64 `json:"input_tokens"`
				OutputTokens             *int64 `json:"output_tokens"`
				CacheCreationInputTokens *int64 `json:"cache_creation_input_tokens"`
				CacheReadInputTokens     *int64 `json:"cache_read_input_tokens"`
			} `json:"usage"`
		}
		if json.Unmarshal(ev.Data, &d) != nil {
			return
		}
		m.stop = d.Delta.StopReason
		if u := d.Usage; u != nil {
			set := func(dst *int64, v *int64) {
				if v != nil && *v > 0 {
					*dst = *v
				}
			}
			set(&m.usage.InputTokens, u.InputTokens)
			set(&m.usage.OutputTokens, u.OutputTokens)
			set(&m.usage.CacheCreationInputTokens, u.CacheCreationInputTokens)
			set(&m.usage.CacheReadInputTokens, u.CacheReadInputTokens)
		}
	case EventMessageStop:
		m.whole = true
	}
}

func (m *streamMeter) Whole() bool { return m.whole }

func (m *streamMeter) End(ev *logevent.Event) (oai.Usage, error) {
	m.parser.End()
	ev.FinishReason = m.stop
	return toOAI(m.usage), nil
}
