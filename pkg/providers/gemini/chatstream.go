package gemini

import (
	"errors"

	"github.com/sluice-gateway/sluice/pkg/api"
	"github.com/sluice-gateway/sluice/pkg/jsonscan"
	"github.com/sluice-gateway/sluice/pkg/oai"
	"github.com/sluice-gateway/sluice/pkg/sse"
)

// streamer translates streamGenerateContent?alt=sse — each event a
// GenerateContentResponse holding the next parts of its candidates, the
// last one of a candidate with its finishReason, usageMetadata on the last
// (or on each, growing) — into OpenAI chunks. The stream has no end marker:
// it ends with the body, and a candidate without its finish reason then is
// a stream cut short.
type streamer struct {
	w        *oai.ChunkWriter
	n        int // choices asked for: a blocked prompt gets that many refusals
	choices  []choiceState
	usage    oai.Usage
	hasUsage bool
	blocked  bool
}

type choiceState struct {
	started, finished bool
	calls             int // tool calls so far
}

func newStreamer(w *oai.ChunkWriter, n int) *streamer {
	return &streamer{w: w, n: max(n, 1)}
}

// errCut is a stream that ended before every candidate it started had
// finished (or before any answer).
var errCut = errors.New("gemini: the stream ended before its finish reason")

// Event translates one event: each candidate's parts (thoughts as
// reasoning_content deltas, text as content deltas — both copied as the
// JSON literals they are —, function calls as whole tool calls), its
// finish, and the usage to send at the end. An error object in the stream
// is the provider's error; an event that does not read is a malformed
// stream.
func (s *streamer) Event(dst []byte, ev sse.Event) ([]byte, error) {
	if len(ev.Data) == 0 {
		return dst, nil
	}
	r, err := parseResponse(ev.Data)
	if err != nil {
		return dst, malformed(err)
	}
	if r.err != nil {
		return dst, api.Upstream(nil, "The provider reported an error: %s", streamError(r.err))
	}
	if r.usage != nil {
		if s.usage, err = parseUsage(r.usage); err != nil {
			return dst, malformed(err)
		}
		s.hasUsage = true
	}
	if r.candidates != nil {
		err = jsonscan.Elements(r.candidates, func(el []byte) error {
			c, err := parseCandidate(el)
			if err != nil {
				return err
			}
			dst, err = s.candidate(dst, c)
			return err
		})
		if err != nil {
			return dst, malformed(err)
		}
	}
	if reason, message := blockReason(r.feedback); reason != "" && !s.blocked && len(s.choices) == 0 {
		s.blocked = true
		refusal := blockedMessage(reason, message)
		for i := range s.n {
			dst = s.w.Role(dst, i)
			dst = s.w.Choice(dst, &oai.ChunkChoice{Index: i, Delta: oai.Delta{Refusal: refusal}})
			dst = s.w.Finish(dst, i, oai.FinishContentFilter)
		}
	}
	return dst, nil
}

// candidate appends the chunks of one candidate's piece.
func (s *streamer) candidate(dst []byte, c candidate) ([]byte, error) {
	for len(s.choices) <= c.index {
		s.choices = append(s.choices, choiceState{})
	}
	st := &s.choices[c.index]
	if st.finished {
		return dst, nil // a repeat of its last event (nothing follows a finish)
	}
	if !st.started {
		st.started = true
		dst = s.w.Role(dst, c.index)
	}
	err := eachPart(c.content, func(p answerPart) error {
		switch {
		case p.call != nil:
			name, args, err := parseCall(p.call)
			if err != nil {
				return err
			}
			sig, _ := jsonscan.String(p.signature)
			dst = s.w.Choice(dst, &oai.ChunkChoice{Index: c.index, Delta: oai.Delta{ToolCalls: []oai.ToolCallDelta{{
				Index: st.calls, ID: toolCallID(sig), Type: "function", Name: name, Arguments: string(args),
			}}}})
			st.calls++
		case len(p.text) > 2: // not ""
			if p.thought {
				dst = s.w.Reasoning(dst, c.index, p.text)
			} else {
				dst = s.w.Text(dst, c.index, p.text)
			}
		}
		return nil
	})
	if err != nil {
		return dst, err
	}
	if c.finish != "" {
		st.finished = true
		dst = s.w.Finish(dst, c.index, finishReason(c.finish, st.calls > 0))
	}
	return dst, nil
}

// End appends the usage chunk (when Gemini reported usage: otherwise the
// gateway estimates it) and [DONE], or says the stream was cut short.
func (s *streamer) End(dst []byte) ([]byte, error) {
	if len(s.choices) == 0 && !s.blocked {
		return dst, errCut
	}
	for _, c := range s.choices {
		if c.started && !c.finished {
			return dst, errCut
		}
	}
	var u *oai.Usage
	if s.hasUsage {
		u = &s.usage
	}
	return s.w.End(dst, u), nil
}

func malformed(err error) error {
	return api.Upstream(err, "The provider's stream had an event that does not read: %v.", err)
}

// streamError is the message of an error object in a stream: Google's
// {"code","message","status"}.
func streamError(doc []byte) string {
	status, message := ParseError(doc)
	if message == "" {
		message = "an error without a message"
	}
	if status != "" {
		return truncate(message, 1000) + " (" + status + ")"
	}
	return truncate(message, 1000)
}
