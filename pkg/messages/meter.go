package messages

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"

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
// answer (1 MiB at most) for the log event.
type jsonMeter struct {
	kept []byte
	tail []byte
	over bool
}

func newJSONMeter() *jsonMeter { return &jsonMeter{} }

func (m *jsonMeter) Write(p []byte) (int, error) {
	if !m.over && len(m.kept)+len(p) <= maxKept {
		m.kept = append(m.kept, p...)
		return len(p), nil
	}
	if !m.over {
		m.over = true
		m.tail = append(m.tail, m.kept...)
		m.kept = nil
	}
	m.tail = append(m.tail, p...)
	if len(m.tail) > tailLen {
		m.tail = append(m.tail[:0], m.tail[len(m.tail)-tailLen:]...)
	}
	return len(p), nil
}

func (m *jsonMeter) End(ev *logevent.Event) (oai.Usage, error) {
	var a struct {
		StopReason string `json:"stop_reason"`
		Usage      Usage  `json:"usage"`
	}
	if !m.over {
		// Only the two members are decoded (as encoding/json would decode
		// them, without reflection: FuzzJSONMeter): the content is kept as
		// it is.
		err := jsonscan.Members(m.kept, func(name, v []byte) error {
			var err error
			switch {
			case jsonscan.Null(v):
			case string(name) == "usage":
				if !a.Usage.Decode(v) {
					err = errNotUsage
				}
			case string(name) == "stop_reason":
				a.StopReason, err = jsonscan.String(v)
			}
			return err
		})
		if err != nil {
			return oai.Usage{}, fmt.Errorf("messages: the answer is not a message: %w", err)
		}
		ev.Response = m.kept
		ev.FinishReason = a.StopReason
		return toOAI(a.Usage), nil
	}
	// Anthropic writes usage last: read it from the tail.
	i := bytes.LastIndex(m.tail, []byte(`"usage"`))
	if i < 0 {
		return oai.Usage{}, nil
	}
	rest := m.tail[i+len(`"usage"`):]
	if j := bytes.IndexByte(rest, ':'); j >= 0 {
		json.NewDecoder(bytes.NewReader(rest[j+1:])).Decode(&a.Usage)
	}
	return toOAI(a.Usage), nil
}

// answerMeter meters a translated answer, which sluice wrote: its usage
// and stop reason are known, nothing is read back from the bytes.
type answerMeter struct {
	answer []byte
	res    *Response
}

func (m *answerMeter) Write(p []byte) (int, error) { return len(p), nil }

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
