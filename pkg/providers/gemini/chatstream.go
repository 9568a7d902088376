package gemini

import (
	"errors"

	"github.com/sluice-gateway/sluice/pkg/api"
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
	if r.Error != nil && string(r.Error) != "null" {
		return dst, api.Upstream(nil, "The provider reported an error: %s", streamError(r.Error))
	}
	if u := r.UsageMetadata; u != nil {
		s.usage, s.hasUsage = u.OpenAI(), true
	}
	for i := range r.Candidates {
		if dst, err = s.candidate(dst, &r.Candidates[i]); err != nil {
			return dst, malformed(err)
		}
	}
	if reason, message := r.blockReason(); reason != "" && !s.blocked && len(s.choices) == 0 {
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
func (s *streamer) candidate(dst []byte, c *candidate) ([]byte, error) {
	for len(s.choices) <= c.Index {
		s.choices = append(s.choices, choiceState{})
	}
	st := &s.choices[c.Index]
	if st.finished {
		return dst, nil // a repeat of its last event (nothing follows a finish)
	}
	if !st.started {
		st.started = true
		dst = s.w.Role(dst, c.Index)
	}
	for _, p := range c.parts() {
		var d oai.Delta
		switch {
		case p.FunctionCall != nil:
			d.ToolCalls = []oai.ToolCallDelta{{Index: st.calls, ID: toolCallID(p.ThoughtSignature), Type: "function",
				Name: p.FunctionCall.Name, Arguments: p.FunctionCall.arguments()}}
			st.calls++
		case p.Text == nil || *p.Text == "":
			continue
		case p.Thought:
			d.ReasoningContent = *p.Text
		default:
			d.Content = *p.Text
		}
		dst = s.w.Choice(dst, &oai.ChunkChoice{Index: c.Index, Delta: d})
	}
	if c.FinishReason != "" {
		st.finished = true
		dst = s.w.Finish(dst, c.Index, finishReason(c.FinishReason, st.calls > 0))
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
