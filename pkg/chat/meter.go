package chat

import (
	"bytes"
	"errors"
	"io"
	"strconv"

	"github.com/sluice-gateway/sluice/pkg/api"
	"github.com/sluice-gateway/sluice/pkg/jsonscan"
	"github.com/sluice-gateway/sluice/pkg/logevent"
	"github.com/sluice-gateway/sluice/pkg/oai"
	"github.com/sluice-gateway/sluice/pkg/sse"
)

// kind is the shape of an answer: what its choices hold and where its
// usage is.
type kind int

const (
	kindChat      kind = iota // chat.completion(.chunk): choices[].message / delta
	kindText                  // text_completion: choices[].text
	kindResponses             // response: usage in its own shape, no choices
)

// Bounds on what a meter keeps for the log event.
const (
	// maxLogged is how much of an answer (or, for a stream, of the content
	// it carries) the log event keeps; the event's claim check carries
	// large ones.
	maxLogged = 1 << 20
	// tailSize is how much of the end of a JSON answer over maxLogged is
	// kept, to read its usage.
	tailSize = 64 << 10
	// maxLoggedChoices bounds the choices a stream's log keeps.
	maxLoggedChoices = 16
	// maxLiteral bounds a kept id, model or finish reason literal.
	maxLiteral = 256
)

// jsonMeter meters a JSON answer as it goes out: it reads its usage and
// finish reason, and keeps the answer for the log event (up to maxLogged;
// past it, only the tail, where the usage is) when a callback may log it.
// An answer nobody logs that comes whole in one write — the relay reads
// answers within its buffer whole — is read where it is, never copied.
type jsonMeter struct {
	kind   kind
	prompt prompt // for an answer without usage
	keep   bool   // the event keeps the answer (modelcall.Call.LogsBodies)
	length int64  // the answer's length, -1 when unknown
	buf    []byte
	tail   []byte // ring of the last tailSize bytes, once over
	at     int    // next write in tail
	over   bool
	// usage and finish are a translated answer's, known already: the
	// meter then parses nothing (only forwarded OpenAI bodies are read).
	usage  *oai.Usage
	finish string
	// scan is the one pass over a whole answer (read), once scanned.
	scan    answerScan
	scanned bool
	direct  bool // scanned in the write that brought it, not kept
}

// newJSONMeter meters an answer of length bytes (-1: unknown), kept for the
// log event when keep. A copy's buffer is sized once when the length is
// known and within the bound.
func newJSONMeter(k kind, prompt prompt, length int64, keep bool) *jsonMeter {
	m := &jsonMeter{kind: k, prompt: prompt, keep: keep, length: length}
	if keep {
		m.sizeBuf()
	}
	return m
}

func (m *jsonMeter) sizeBuf() {
	if m.length > 0 && m.length <= maxLogged {
		m.buf = make([]byte, 0, m.length)
	}
}

func (m *jsonMeter) Write(p []byte) (int, error) {
	if !m.keep && m.readInPlace(p) {
		return len(p), nil
	}
	if !m.over {
		if m.buf == nil {
			m.sizeBuf()
		}
		if len(m.buf)+len(p) <= maxLogged {
			m.buf = append(m.buf, p...)
			return len(p), nil
		}
		m.over = true
		m.tail = make([]byte, 0, tailSize)
		m.ring(m.buf)
		m.buf = nil
	}
	m.ring(p)
	return len(p), nil
}

// readInPlace reads p, of an answer not kept, without copying it when it
// can: a translation needs no reading (its usage is known), and a forwarded
// answer that p holds whole is scanned in it. false: p is to be copied, to
// be read when the answer is whole.
func (m *jsonMeter) readInPlace(p []byte) bool {
	switch {
	case m.usage != nil:
		return true
	case m.direct:
		// Bytes past the answer's length (an http.Response body never
		// gives them): the answer was not the JSON object read.
		m.scan.size += int64(len(p))
		if jsonscan.SkipSpace(p, 0) < len(p) {
			m.scan.err = errNotJSON
		}
		return true
	case m.scanned || m.over || len(m.buf) > 0 || int64(len(p)) != m.length:
		return false
	}
	m.direct, m.scanned = true, true
	m.scanWhole(p)
	return true
}

// errNotJSON is End's error for an answer that is no complete JSON object.
var errNotJSON = errors.New("chat: the answer is not one JSON object")

// ring keeps the last tailSize bytes of what went by.
func (m *jsonMeter) ring(p []byte) {
	if len(p) >= tailSize {
		m.tail = append(m.tail[:0], p[len(p)-tailSize:]...)
		m.at = 0
		return
	}
	for len(p) > 0 {
		if len(m.tail) < tailSize {
			n := min(tailSize-len(m.tail), len(p))
			m.tail = append(m.tail, p[:n]...)
			p = p[n:]
			continue
		}
		n := copy(m.tail[m.at:], p)
		m.at = (m.at + n) % tailSize
		p = p[n:]
	}
}

func (m *jsonMeter) End(ev *logevent.Event) (oai.Usage, error) {
	if m.usage != nil {
		if ev.FinishReason == "" {
			ev.FinishReason = m.finish
		}
		if m.keep && !m.over {
			ev.Response = m.buf // the translator's own encoding/json output
		}
		return *m.usage, nil
	}
	if m.over {
		tail := append(append([]byte(nil), m.tail[m.at:]...), m.tail[:m.at]...)
		usage, ok := tailUsage(tail, m.kind)
		if !ok {
			usage = m.estimate(ev, 0)
		}
		return usage, nil
	}
	sc := m.read()
	switch {
	case sc.hasStatus:
		ev.FinishReason = sc.status
	case ev.FinishReason == "":
		ev.FinishReason = sc.finish
	}
	if sc.err != nil {
		return m.estimate(ev, sc.size), api.Upstream(nil, "The provider's answer was not a complete JSON object.")
	}
	if m.keep && sc.valid {
		ev.Response = m.buf
	}
	if !sc.hasUsage {
		return m.estimate(ev, sc.text), nil
	}
	return sc.usage, nil
}

// answerScan is what one pass over a whole JSON answer found.
type answerScan struct {
	usage     oai.Usage
	hasUsage  bool
	finish    string // the first choice's finish_reason, of the first choices that has one
	status    string // a Responses answer's status (its last)
	hasStatus bool
	valid     bool  // the answer is JSON, as jsonscan.Valid says (read only when kept)
	err       error // the answer is no complete JSON object
	size      int64 // the answer's bytes
	text      int64 // bytes of its choices' text, read for an estimate when it has no usage
}

// read scans the answer kept whole, once: Usage (the cost header, before
// the answer goes out) and End share the pass.
func (m *jsonMeter) read() *answerScan {
	if !m.scanned {
		m.scanned = true
		m.scanWhole(m.buf)
	}
	return &m.scan
}

// scanWhole reads the whole answer doc in one pass, which also checks it is
// JSON (for the log) without a second walk; what End needs of doc beyond
// (its validity when the walk could not say, its text when it has no usage)
// is read now, as doc may not be kept.
func (m *jsonMeter) scanWhole(doc []byte) {
	sc := &m.scan
	// The choices (the answer's bulk) are read by their own checked walk
	// as the answer's walk reaches them (readChoices), so that their text
	// is crossed once; choices it cannot read are left to the answer's
	// walk, and read as before (firstFinish). So is the usage of an answer
	// not kept (whose walk checks nothing, as ParseUsagePrefix does not):
	// read where it starts, not delimited and then walked again.
	walked := false // the member's value was read by delimit
	delimit := func(name, rest []byte) (int, bool) {
		switch string(name) {
		case "choices":
			n, valid, finish, ok := readChoices(rest, m.keep)
			if !ok {
				return 0, false
			}
			walked = true
			if sc.finish == "" {
				sc.finish = finish
			}
			return n, valid
		case "usage":
			if m.keep || m.kind == kindResponses {
				return 0, false
			}
			u, n, err := oai.ParseUsagePrefix(rest)
			if err != nil {
				return 0, false // null, or no usage: read as before
			}
			walked = true
			sc.usage, sc.hasUsage = u, true
			return n, false
		}
		return 0, false
	}
	member := func(name, v []byte) error {
		switch string(name) {
		case "usage":
			if walked {
				walked = false
			} else if !jsonscan.Null(v) {
				u, err := parseUsage(m.kind, v)
				sc.usage, sc.hasUsage = u, err == nil
			}
		case "choices":
			if walked {
				walked = false
			} else if sc.finish == "" {
				sc.finish = firstFinish(v)
			}
		case "status":
			if m.kind == kindResponses {
				sc.status, _ = jsonscan.String(v)
				sc.hasStatus = true
			}
		}
		return nil
	}
	if m.keep {
		sc.valid, sc.err = jsonscan.MembersCheckedBy(doc, member, delimit)
	} else {
		// Nothing of the answer is logged: its walk need not check it.
		sc.err = jsonscan.MembersBy(doc, member, delimit)
	}
	sc.size = int64(len(doc))
	if sc.err != nil {
		return
	}
	if m.keep && !sc.valid { // the walk could not say
		sc.valid = jsonscan.Valid(doc)
	}
	if !sc.hasUsage {
		sc.text = contentBytes(doc, m.kind)
	}
}

// readChoices reads the choices array that starts rest (what follows it
// unread) in one walk of its objects, checked when check: it returns the
// array's length, whether it is JSON as jsonscan.Valid would say (false:
// not known, or not checked), and the first choice's finish_reason (as firstFinish). ok false:
// it could not read the array (not an array of objects, or malformed).
func readChoices(rest []byte, check bool) (n int, valid bool, finish string, ok bool) {
	if rest[0] != '[' {
		return 0, false, "", false
	}
	valid = check
	first := true
	member := func(name, v []byte) error {
		if first && string(name) == "finish_reason" { // the last copy, as encoding/json
			finish = ""
			if v[0] == '"' {
				finish = finishReason(v)
			}
		}
		return nil
	}
	n, err := jsonscan.ElementsPrefixEnd(rest, func(el []byte) (int, error) {
		if el[0] != '{' {
			return 0, jsonscan.ErrSyntax // firstFinish reads such choices
		}
		if !check {
			size, err := jsonscan.MembersPrefix(el, member)
			first = false
			return size, err
		}
		size, checked, err := jsonscan.MembersPrefixChecked(el, member)
		first = false
		valid = valid && checked
		return size, err
	})
	if err != nil {
		return 0, false, "", false
	}
	return n, valid, finish, true
}

// Usage is the usage the answer reports, for its cost header: a
// translator's, or read from an answer kept whole (read); not known for
// one over the log's bound, which is never quoted.
func (m *jsonMeter) Usage() (oai.Usage, bool) {
	switch {
	case m.usage != nil:
		return *m.usage, true
	case m.over:
		return oai.Usage{}, false
	}
	sc := m.read()
	return sc.usage, sc.hasUsage
}

// estimate stands in for an answer that reported no usage.
func (m *jsonMeter) estimate(ev *logevent.Event, completionBytes int64) oai.Usage {
	ev.UsageEstimated = true
	return estimated(m.prompt.tokens(), completionBytes)
}

func estimated(prompt, completionBytes int64) oai.Usage {
	completion := (completionBytes + 3) / 4
	return oai.Usage{PromptTokens: prompt, CompletionTokens: completion, TotalTokens: prompt + completion}
}

func parseUsage(k kind, v []byte) (oai.Usage, error) {
	if k == kindResponses {
		return oai.ParseResponseUsage(v)
	}
	return oai.ParseUsage(v)
}

// firstFinish is the finish_reason of the first choice of choices, a
// value the answer's walk has delimited. It walks the first choice's
// members straight from its opening brace rather than delimiting the choice
// first (Elements): that would cross its message, the answer's bulk, once
// more (jsonscan.MembersPrefix leaves what follows the choice unread).
func firstFinish(choices []byte) string {
	i := jsonscan.SkipSpace(choices, 0)
	if i >= len(choices) || choices[i] != '[' {
		return ""
	}
	if i = jsonscan.SkipSpace(choices, i+1); i >= len(choices) || choices[i] != '{' {
		return ""
	}
	var reason string
	jsonscan.MembersPrefix(choices[i:], func(name, v []byte) error {
		if string(name) == "finish_reason" { // the last copy, as encoding/json
			reason = ""
			if v[0] == '"' {
				reason = finishReason(v)
			}
		}
		return nil
	})
	return reason
}

// finishReasons are the finish reasons OpenAI's answers give: finishReason
// returns these constants rather than a copy.
var finishReasons = [...]string{"stop", "length", "tool_calls", "content_filter", "function_call"}

// finishReason decodes a finish_reason literal.
func finishReason(lit []byte) string {
	if len(lit) >= 2 {
		for _, r := range finishReasons {
			if string(lit[1:len(lit)-1]) == r {
				return r
			}
		}
	}
	s, _ := jsonscan.String(lit)
	return s
}

// contentBytes is the length of the text of a JSON answer's choices, for
// an estimate.
func contentBytes(doc []byte, k kind) int64 {
	var n int64
	jsonscan.Members(doc, func(name, v []byte) error {
		switch {
		case k == kindResponses && string(name) == "output":
			n += int64(len(v))
		case string(name) == "choices":
			jsonscan.Elements(v, func(c []byte) error {
				return jsonscan.Members(c, func(name, v []byte) error {
					switch string(name) {
					case "message":
						jsonscan.Members(v, func(name, v []byte) error {
							if string(name) == "content" || string(name) == "tool_calls" {
								n += int64(len(v))
							}
							return nil
						})
					case "text":
						n += int64(len(v))
					}
					return nil
				})
			})
		}
		return nil
	})
	return n
}

// usageKey is what a usage member starts with.
var usageKey = []byte(`"usage"`)

// tailUsage finds the usage member in the tail of an answer too large to
// keep: the last "usage" name followed by a colon whose value reads as a
// usage object. Inside a string a quote is escaped, so the name cannot be
// matched inside the answer's text.
func tailUsage(tail []byte, k kind) (oai.Usage, bool) {
	for end := len(tail); ; {
		i := bytes.LastIndex(tail[:end], usageKey)
		if i < 0 {
			return oai.Usage{}, false
		}
		end = i
		j := jsonscan.SkipSpace(tail, i+len(usageKey))
		if j >= len(tail) || tail[j] != ':' {
			continue
		}
		j = jsonscan.SkipSpace(tail, j+1)
		e, err := jsonscan.ValueEnd(tail, j)
		if err != nil {
			continue
		}
		if u, err := parseUsage(k, tail[j:e]); err == nil {
			return u, true
		}
	}
}

// chunks reads the events of a streamed chat (or text) completion: usage,
// the finish reasons, and the content for the log event, which it keeps as
// the JSON text of the deltas (string literals' insides concatenate into
// the literal of the concatenated text), so reading an event allocates
// nothing.
type chunks struct {
	kind    kind
	prompt  prompt
	id      []byte // raw literals of the first chunk's
	model   []byte
	created []byte
	choices [maxLoggedChoices]choiceLog
	n       int // choices seen (highest index + 1, within the bound)

	usage    oai.Usage
	hasUsage bool
	done     bool   // data: [DONE] arrived
	logged   int    // bytes kept for the log
	over     bool   // stopped keeping
	text     int64  // bytes of content seen, for an estimate
	failed   string // the message of an error event the provider sent in the stream
}

type choiceLog struct {
	content, reasoning, refusal []byte // insides of JSON string literals
	tools                       []toolLog
	finish                      []byte // raw literal
}

type toolLog struct {
	id, name []byte // raw literals
	args     []byte // inside of a literal
}

func newChunks(k kind, prompt prompt) *chunks { return &chunks{kind: k, prompt: prompt} }

// observe reads one event's data. It reports whether the event is the usage
// chunk (no choices, a usage), which a client that did not ask for usage
// must not see.
func (c *chunks) observe(data []byte) (usageChunk bool) {
	if string(data) == "[DONE]" {
		c.done = true
		return false
	}
	choices := -1
	hasUsage := false
	jsonscan.Members(data, func(name, v []byte) error { // a malformed event is relayed as it is, unread
		switch string(name) {
		case "id":
			keepLiteral(&c.id, v)
		case "model":
			keepLiteral(&c.model, v)
		case "created":
			if c.created == nil && jsonscan.ValidNumber(v) && len(v) < 20 {
				c.created = append([]byte(nil), v...)
			}
		case "usage":
			if !jsonscan.Null(v) {
				if u, err := oai.ParseUsage(v); err == nil {
					c.usage, c.hasUsage, hasUsage = u, true, true
				}
			}
		case "choices":
			choices = 0
			jsonscan.Elements(v, func(el []byte) error {
				choices++
				c.choice(el)
				return nil
			})
		case "error":
			c.inBandError(v)
		}
		return nil
	})
	return hasUsage && choices == 0
}

// inBandError notes an error event the provider sent inside its stream
// (OpenAI's data: {"error":{"message",…}}): the client got it as it came;
// the log event records the call as failed.
func (c *chunks) inBandError(v []byte) {
	c.failed = "the provider sent an error event"
	jsonscan.Members(v, func(name, v []byte) error {
		if string(name) == "message" {
			if msg, err := jsonscan.String(v); err == nil && msg != "" {
				c.failed = truncate(msg, 500)
			}
		}
		return nil
	})
}

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "…"
}

func keepLiteral(dst *[]byte, v []byte) {
	if *dst == nil && len(v) > 1 && v[0] == '"' && len(v) <= maxLiteral {
		*dst = append([]byte(nil), v...)
	}
}

// inside returns the inside of a JSON string literal, nil for another value.
func inside(v []byte) []byte {
	if len(v) < 2 || v[0] != '"' {
		return nil
	}
	return v[1 : len(v)-1]
}

func (c *chunks) choice(el []byte) {
	index := 0
	var delta, text, finish []byte
	jsonscan.Members(el, func(name, v []byte) error {
		switch string(name) {
		case "index":
			if n, ok := jsonscan.Count(v); ok && n < maxLoggedChoices {
				index = int(n)
			} else {
				index = -1
			}
		case "delta":
			delta = v
		case "text":
			text = v
		case "finish_reason":
			finish = v
		}
		return nil
	})
	if index < 0 {
		return
	}
	c.n = max(c.n, index+1)
	ch := &c.choices[index]
	if len(finish) > 1 && finish[0] == '"' && len(finish) <= maxLiteral {
		ch.finish = append(ch.finish[:0], finish...)
	}
	if t := inside(text); t != nil {
		c.keep(&ch.content, t)
	}
	if len(delta) == 0 || delta[0] != '{' {
		return
	}
	jsonscan.Members(delta, func(name, v []byte) error {
		switch string(name) {
		case "content":
			c.keep(&ch.content, inside(v))
		case "reasoning_content":
			c.keep(&ch.reasoning, inside(v))
		case "refusal":
			c.keep(&ch.refusal, inside(v))
		case "tool_calls":
			jsonscan.Elements(v, func(t []byte) error {
				c.toolCall(ch, t)
				return nil
			})
		}
		return nil
	})
}

func (c *chunks) toolCall(ch *choiceLog, t []byte) {
	index := -1
	var id, fn []byte
	jsonscan.Members(t, func(name, v []byte) error {
		switch string(name) {
		case "index":
			if n, ok := jsonscan.Count(v); ok && n < 128 {
				index = int(n)
			}
		case "id":
			id = v
		case "function":
			fn = v
		}
		return nil
	})
	if index < 0 {
		return
	}
	for len(ch.tools) <= index {
		ch.tools = append(ch.tools, toolLog{})
	}
	tl := &ch.tools[index]
	keepLiteral(&tl.id, id)
	if len(fn) > 0 && fn[0] == '{' {
		jsonscan.Members(fn, func(name, v []byte) error {
			switch string(name) {
			case "name":
				keepLiteral(&tl.name, v)
			case "arguments":
				c.keep(&tl.args, inside(v))
			}
			return nil
		})
	}
}

// keep appends text to dst, within the log's bound.
func (c *chunks) keep(dst *[]byte, text []byte) {
	c.text += int64(len(text))
	if c.over || len(text) == 0 {
		return
	}
	if c.logged+len(text) > maxLogged {
		c.over = true
		return
	}
	c.logged += len(text)
	*dst = append(*dst, text...)
}

// end records in ev what the stream said, and returns its usage (estimated
// when the provider sent none) and, when the provider sent an error event
// in it, that error.
func (c *chunks) end(ev *logevent.Event) (oai.Usage, error) {
	if c.n > 0 && c.choices[0].finish != nil {
		ev.FinishReason, _ = jsonscan.String(c.choices[0].finish)
	}
	usage := c.usage
	if !c.hasUsage {
		ev.UsageEstimated = true
		usage = estimated(c.prompt.tokens(), c.text)
	}
	if r := c.response(&usage); jsonscan.Valid(r) {
		ev.Response = r
	}
	if c.failed != "" {
		return usage, api.Upstream(nil, "The provider ended the stream with an error: %s", c.failed)
	}
	return usage, nil
}

// response is the answer the stream adds up to, as the JSON answer would
// have been (content past the log's bound left out, and "truncated": true).
func (c *chunks) response(u *oai.Usage) []byte {
	b := make([]byte, 0, 256+c.logged)
	b = append(b, `{"id":`...)
	b = literalOr(b, c.id)
	if c.kind == kindText {
		b = append(b, `,"object":"text_completion","created":`...)
	} else {
		b = append(b, `,"object":"chat.completion","created":`...)
	}
	if c.created != nil {
		b = append(b, c.created...)
	} else {
		b = append(b, '0')
	}
	b = append(b, `,"model":`...)
	b = literalOr(b, c.model)
	b = append(b, `,"choices":[`...)
	for i := 0; i < c.n; i++ {
		ch := &c.choices[i]
		if i > 0 {
			b = append(b, ',')
		}
		b = append(b, `{"index":`...)
		b = strconv.AppendInt(b, int64(i), 10)
		if c.kind == kindText {
			b = append(b, `,"text":"`...)
			b = append(b, ch.content...)
			b = append(b, '"')
		} else {
			b = append(b, `,"message":{"role":"assistant","content":`...)
			if len(ch.content) > 0 || len(ch.tools) == 0 {
				b = append(b, '"')
				b = append(b, ch.content...)
				b = append(b, '"')
			} else {
				b = append(b, "null"...)
			}
			if len(ch.reasoning) > 0 {
				b = append(b, `,"reasoning_content":"`...)
				b = append(b, ch.reasoning...)
				b = append(b, '"')
			}
			if len(ch.refusal) > 0 {
				b = append(b, `,"refusal":"`...)
				b = append(b, ch.refusal...)
				b = append(b, '"')
			}
			if len(ch.tools) > 0 {
				b = append(b, `,"tool_calls":[`...)
				for j, t := range ch.tools {
					if j > 0 {
						b = append(b, ',')
					}
					b = append(b, `{"id":`...)
					b = literalOr(b, t.id)
					b = append(b, `,"type":"function","function":{"name":`...)
					b = literalOr(b, t.name)
					b = append(b, `,"arguments":"`...)
					b = append(b, t.args...)
					b = append(b, `"}}`...)
				}
				b = append(b, ']')
			}
			b = append(b, '}')
		}
		b = append(b, `,"finish_reason":`...)
		if ch.finish != nil {
			b = append(b, ch.finish...)
		} else {
			b = append(b, "null"...)
		}
		b = append(b, '}')
	}
	b = append(b, `],"usage":`...)
	b = oai.AppendUsage(b, u)
	if c.over {
		b = append(b, `,"truncated":true`...)
	}
	return append(b, '}')
}

func literalOr(b, lit []byte) []byte {
	if lit == nil {
		return append(b, `""`...)
	}
	return append(b, lit...)
}

// streamMeter meters a stream relayed as it comes: its bytes go through an
// SSE parser into chunks.
type streamMeter struct {
	p   *sse.Parser
	obs *chunks
}

func newStreamMeter(obs *chunks) *streamMeter {
	m := &streamMeter{obs: obs}
	m.p = sse.NewParser(sse.Limits{}, func(ev sse.Event) { obs.observe(ev.Data) })
	return m
}

func (m *streamMeter) Write(p []byte) (int, error) { return m.p.Write(p) }

// Whole reports whether data: [DONE] has gone by (modelcall.WholeMeter).
func (m *streamMeter) Whole() bool { return m.obs.done }

func (m *streamMeter) End(ev *logevent.Event) (oai.Usage, error) {
	m.p.End() // a cut stream is the copy's error, reported by the call layer
	return m.obs.end(ev)
}

// usageFilter relays a stream event by event, minus its usage chunk (for a
// client that did not ask for it), metering each event as it passes. It is
// the answer's body and its meter both: what it meters is what it reads,
// the dropped chunk included.
type usageFilter struct {
	rd   *sse.Reader
	body io.Closer
	obs  *chunks
	out  []byte
	off  int
}

func newUsageFilter(body io.ReadCloser, obs *chunks) *usageFilter {
	return &usageFilter{rd: sse.NewReader(body, sse.Limits{}), body: body, obs: obs}
}

// Read returns the next event that is not the usage chunk. A failure of the
// provider's stream is returned as it is, after the events before it.
func (f *usageFilter) Read(p []byte) (int, error) {
	for f.off >= len(f.out) {
		ev, err := f.rd.Next()
		if err != nil {
			return 0, err
		}
		if f.obs.observe(ev.Data) {
			continue
		}
		f.out = sse.AppendEvent(f.out[:0], string(ev.Type), ev.Data)
		f.off = 0
	}
	n := copy(p, f.out[f.off:])
	f.off += n
	return n, nil
}

func (f *usageFilter) Close() error { return f.body.Close() }

// Write is the meter's: the filter has metered what it read.
func (f *usageFilter) Write(p []byte) (int, error) { return len(p), nil }

func (f *usageFilter) End(ev *logevent.Event) (oai.Usage, error) { return f.obs.end(ev) }

// Whole reports whether data: [DONE] has been read, and so relayed before
// any later read (modelcall.WholeMeter).
func (f *usageFilter) Whole() bool { return f.obs.done }

// responseStream meters a Responses API stream: its usage, status and the
// final response come in its response.completed (or .incomplete, .failed)
// event.
type responseStream struct {
	p        *sse.Parser
	prompt   prompt
	response []byte
	usage    oai.Usage
	hasUsage bool
	status   string
	text     int64
}

func newResponseStreamMeter(prompt prompt) *responseStream {
	m := &responseStream{prompt: prompt}
	m.p = sse.NewParser(sse.Limits{}, m.observe)
	return m
}

func (m *responseStream) observe(ev sse.Event) {
	jsonscan.Members(ev.Data, func(name, v []byte) error {
		switch string(name) {
		case "delta":
			m.text += int64(len(v))
		case "response":
			m.finalResponse(v)
		}
		return nil
	})
}

// finalResponse reads the response object of a response.* event; the last
// one (response.completed) has the usage.
func (m *responseStream) finalResponse(v []byte) {
	jsonscan.Members(v, func(name, v []byte) error {
		switch string(name) {
		case "usage":
			if u, err := oai.ParseResponseUsage(v); err == nil && !jsonscan.Null(v) {
				m.usage, m.hasUsage = u, true
			}
		case "status":
			m.status, _ = jsonscan.String(v)
		}
		return nil
	})
	if len(v) <= maxLogged {
		m.response = append(m.response[:0], v...)
	}
}

func (m *responseStream) Write(p []byte) (int, error) { return m.p.Write(p) }

func (m *responseStream) End(ev *logevent.Event) (oai.Usage, error) {
	m.p.End()
	ev.FinishReason = m.status
	if jsonscan.Valid(m.response) {
		ev.Response = m.response
	}
	if !m.hasUsage {
		ev.UsageEstimated = true
		return estimated(m.prompt.tokens(), m.text), nil
	}
	return m.usage, nil
}
