package passthrough

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"mime"
	"net/http"
	"strings"

	"github.com/aws/aws-sdk-go-v2/aws/protocol/eventstream"

	"github.com/sluice-gateway/sluice/pkg/jsonscan"
	"github.com/sluice-gateway/sluice/pkg/oai"
	"github.com/sluice-gateway/sluice/pkg/providers/anthropic"
	"github.com/sluice-gateway/sluice/pkg/providers/bedrock"
	"github.com/sluice-gateway/sluice/pkg/providers/gemini"
	"github.com/sluice-gateway/sluice/pkg/sse"
)

// Bounds of the usage tee: what it may hold of one answer, whatever its size.
const (
	maxSSELine     = 256 << 10 // an SSE line longer than this is not inspected
	maxJSONWhole   = 256 << 10 // a JSON answer up to this size is parsed whole
	jsonTailKeep   = 64 << 10  // beyond it, only its tail is searched for usage
	jsonPrefixKeep = 4 << 10   // and its beginning for the model
	maxFrame       = 1 << 20   // an event-stream frame larger than this is skipped
	maxFrameLimit  = 24 << 20  // a frame length beyond this means the stream is not an event stream
)

// counts are the largest values seen of each counter across an answer's
// events: providers report cumulative counts, so the largest is the final one.
type counts struct {
	input, output, cacheWrite, cacheRead, total int64
	thoughts                                    int64 // Gemini's, counted in output too
	model                                       string
	failure                                     string // an error the answer carried (in-band stream errors too)
	errMessage                                  string // a top-level "message" string (AWS error bodies)
}

func (c *counts) usage() oai.Usage {
	u := oai.Usage{PromptTokens: c.input + c.cacheWrite + c.cacheRead, CompletionTokens: c.output}
	u.TotalTokens = max(c.total, u.PromptTokens+u.CompletionTokens)
	u.PromptTokensDetails.CachedTokens = c.cacheRead
	u.CompletionTokensDetails.ReasoningTokens = c.thoughts
	return u
}

// merge folds o, counts of the same answer, into c.
func (c *counts) merge(o *counts) {
	c.input, c.output = max(c.input, o.input), max(c.output, o.output)
	c.cacheWrite, c.cacheRead = max(c.cacheWrite, o.cacheWrite), max(c.cacheRead, o.cacheRead)
	c.total, c.thoughts = max(c.total, o.total), max(c.thoughts, o.thoughts)
	c.setModel(o.model)
	if o.failure != "" {
		c.failure = o.failure
	}
	if c.errMessage == "" {
		c.errMessage = o.errMessage
	}
}

func (c *counts) setModel(m string) {
	if c.model == "" && m != "" {
		c.model = m
	}
}

// usageJSON is a "usage" object: Anthropic's (snake_case) or Bedrock
// Converse's (camelCase), decoded in one pass by the vendors' schemas.
type usageJSON struct {
	anthropic.Usage
	bedrock.ConverseUsage
}

func (u *usageJSON) decode(v []byte) bool {
	// Both schemas' fields in one list on the stack, written out: the
	// vendors' Fields (bedrock's by reflection) would move u to the heap on
	// every answer. TestUsageJSONFields holds the list to theirs.
	a, b := &u.Usage, &u.ConverseUsage
	fields := [...]jsonscan.CountField{
		{Name: "input_tokens", Dst: &a.InputTokens},
		{Name: "output_tokens", Dst: &a.OutputTokens},
		{Name: "cache_creation_input_tokens", Dst: &a.CacheCreationInputTokens},
		{Name: "cache_read_input_tokens", Dst: &a.CacheReadInputTokens},
		{Name: "inputTokens", Dst: &b.InputTokens},
		{Name: "outputTokens", Dst: &b.OutputTokens},
		{Name: "totalTokens", Dst: &b.TotalTokens},
		{Name: "cacheReadInputTokens", Dst: &b.CacheReadInputTokens},
		{Name: "cacheWriteInputTokens", Dst: &b.CacheWriteInputTokens},
	}
	return jsonscan.Counts(v, fields[:])
}

// geminiUsageJSON is Gemini's and Vertex AI's usageMetadata.
type geminiUsageJSON = gemini.UsageMetadata

// metricsJSON is the amazon-bedrock-invocationMetrics Bedrock adds to the
// last chunk of InvokeModelWithResponseStream.
type metricsJSON = bedrock.InvocationMetrics

// payloadJSON is every top-level field any of the four providers reports
// usage, model or an error in.
type payloadJSON struct {
	Type          string           `json:"type"`
	Model         string           `json:"model"`
	ModelVersion  string           `json:"modelVersion"`
	Usage         *usageJSON       `json:"usage"`
	Message       json.RawMessage  `json:"message"` // Anthropic message_start: an object; AWS errors: a string
	UsageMetadata *geminiUsageJSON `json:"usageMetadata"`
	Metrics       *metricsJSON     `json:"amazon-bedrock-invocationMetrics"` // bedrock.InvocationMetricsKey
	Error         json.RawMessage  `json:"error"`
}

func (c *counts) addUsage(u *usageJSON) {
	a, b := &u.Usage, &u.ConverseUsage
	c.input = max(c.input, a.InputTokens, b.InputTokens)
	c.output = max(c.output, a.OutputTokens, b.OutputTokens)
	c.cacheWrite = max(c.cacheWrite, a.CacheCreationInputTokens, b.CacheWriteInputTokens)
	c.cacheRead = max(c.cacheRead, a.CacheReadInputTokens, b.CacheReadInputTokens)
	c.total = max(c.total, b.TotalTokens)
}

func (c *counts) addGemini(u *geminiUsageJSON) {
	// promptTokenCount already includes cached content.
	c.input = max(c.input, u.PromptTokenCount)
	c.output = max(c.output, u.CandidatesTokenCount+u.ThoughtsTokenCount)
	c.thoughts = max(c.thoughts, u.ThoughtsTokenCount)
	c.total = max(c.total, u.TotalTokenCount)
}

func (c *counts) addMetrics(m *metricsJSON) {
	c.input = max(c.input, m.InputTokenCount)
	c.output = max(c.output, m.OutputTokenCount)
	c.cacheRead = max(c.cacheRead, m.CacheReadInputTokenCount)
	c.cacheWrite = max(c.cacheWrite, m.CacheWriteInputTokenCount)
}

// addJSON folds one JSON document (an object, or an array of them as in
// Gemini's non-SSE streams) into c. Anything else is ignored.
func (c *counts) addJSON(data []byte) {
	data = bytes.TrimSpace(data)
	if len(data) == 0 {
		return
	}
	if data[0] == '[' {
		var list []payloadJSON
		if json.Unmarshal(data, &list) == nil {
			for i := range list {
				c.add(&list[i])
			}
		}
		return
	}
	var p payloadJSON
	if json.Unmarshal(data, &p) == nil {
		c.add(&p)
	}
}

func (c *counts) add(p *payloadJSON) {
	if p.Usage != nil {
		c.addUsage(p.Usage)
	}
	if p.UsageMetadata != nil {
		c.addGemini(p.UsageMetadata)
	}
	if p.Metrics != nil {
		c.addMetrics(p.Metrics)
	}
	c.setModel(p.Model)
	c.setModel(p.ModelVersion)
	if len(p.Message) > 0 {
		switch p.Message[0] {
		case '{':
			var m struct {
				Model string     `json:"model"`
				Usage *usageJSON `json:"usage"`
			}
			if json.Unmarshal(p.Message, &m) == nil {
				c.setModel(m.Model)
				if m.Usage != nil {
					c.addUsage(m.Usage)
				}
			}
		case '"':
			// Into a string of its own: &c.errMessage would move the
			// call's counts to the heap on every call.
			var msg string
			if json.Unmarshal(p.Message, &msg) == nil {
				c.errMessage = msg
			}
		}
	}
	if len(p.Error) > 0 && p.Error[0] == '{' {
		if jsonscan.Valid(p.Error) {
			typ, msg := anthropic.ParseError(p.Error)
			status, _ := gemini.ParseError(p.Error)
			if msg := joinNonEmpty(typ, status, msg); msg != "" {
				c.failure = msg
			}
		}
	} else if p.Type == "error" && c.failure == "" {
		c.failure = "error"
	}
}

// addHeaders reads the token counts Bedrock's InvokeModel puts in headers.
func (c *counts) addHeaders(h http.Header) {
	m := bedrock.HeaderMetrics(h)
	c.addMetrics(&m)
}

// meter watches an answer go by and extracts its usage, holding a bounded
// amount of it whatever the answer's size. It never changes or delays the
// bytes relayed. finish takes and returns the counts by value: a pointer
// handed to an interface method escapes, and the call's counts live on
// serve's stack.
type meter interface {
	observe(p []byte)
	finish(c counts) counts
}

// Content types of streamed answers.
const (
	contentSSE         = "text/event-stream"
	contentEventStream = "application/vnd.amazon.eventstream"
	contentJSON        = "application/json"
)

// mediaType is the lower-cased media type of a Content-Type value.
func mediaType(ct string) string {
	switch ct {
	case "", contentJSON, contentSSE: // the usual answers: nothing to parse
		return ct
	}
	mt, _, err := mime.ParseMediaType(ct)
	if err != nil {
		mt, _, _ = strings.Cut(ct, ";")
		mt = strings.ToLower(strings.TrimSpace(mt))
	}
	return mt
}

// newMeter picks the meter for an answer's media type; failed marks an
// error status.
func newMeter(mt string, contentLength int64, failed bool) meter {
	switch {
	case mt == contentSSE:
		return newSSEMeter()
	case mt == contentEventStream:
		return &eventStreamMeter{dec: eventstream.NewDecoder()}
	case isJSON(mt):
		return &jsonMeter{failed: failed, length: contentLength}
	}
	return nopMeter{}
}

func isJSON(mt string) bool { return mt == contentJSON || strings.HasSuffix(mt, "+json") }

// meterWhole adds to c the usage of a whole successful answer of media
// type mt. A JSON answer is read directly, as its meter would read it, not
// through the meter interface, which would move the meter to the heap on
// every call.
func meterWhole(mt string, body []byte, c *counts) {
	if isJSON(mt) {
		readWholeJSON(c, body, false) // what a jsonMeter does with it
		return
	}
	m := newMeter(mt, int64(len(body)), false)
	m.observe(body)
	*c = m.finish(*c)
}

type nopMeter struct{}

func (nopMeter) observe([]byte)         {}
func (nopMeter) finish(c counts) counts { return c }

// sseMeter reads server-sent events (Anthropic, and Gemini / Vertex AI with
// alt=sse) with an sse.Parser. It keeps only the last event data of each
// kind that can carry usage and parses those at the end: providers' counts
// are cumulative, so the last of each kind is enough, and no event is parsed
// twice. An event over maxSSELine is not inspected.
type sseMeter struct {
	parser *sse.Parser
	keep   [sseKinds][]byte
}

const (
	kindStart  = iota // Anthropic message_start: input tokens, model
	kindUsage         // Anthropic message_delta: output tokens
	kindGemini        // a chunk with usageMetadata
	kindError         // an in-band error
	sseKinds
)

var (
	quotedUsage    = []byte(`"usage`)
	quotedStart    = []byte(`"message_start"`)
	quotedError    = []byte(`"error"`)
	quotedMetadata = []byte(`Metadata"`)
)

func newSSEMeter() *sseMeter {
	m := &sseMeter{}
	m.parser = sse.NewParser(sse.Limits{MaxLine: maxSSELine, MaxEvent: maxSSELine}, m.classify)
	return m
}

func (m *sseMeter) observe(p []byte) { m.parser.Write(p) }

func (m *sseMeter) classify(ev sse.Event) {
	data := ev.Data
	kind := -1
	if i := bytes.Index(data, quotedUsage); i >= 0 {
		rest := data[i+len(quotedUsage):]
		switch {
		case bytes.HasPrefix(rest, quotedMetadata):
			kind = kindGemini
		case len(rest) > 0 && rest[0] == '"':
			kind = kindUsage
			if bytes.Contains(data, quotedStart) {
				kind = kindStart
			}
		}
	}
	if kind < 0 && bytes.Contains(data, quotedError) {
		kind = kindError
	}
	if kind >= 0 {
		m.keep[kind] = append(m.keep[kind][:0], data...)
	}
}

func (m *sseMeter) finish(c counts) counts {
	m.parser.End() // a cut stream's last event still counts
	for _, data := range m.keep {
		if len(data) > 0 {
			c.addJSON(data)
		}
	}
	return c
}

// jsonMeter reads a JSON answer: whole when it is small (the usual case),
// else its tail, where the four providers put their usage object.
type jsonMeter struct {
	head     []byte
	tail     []byte
	overflow bool
	failed   bool  // an error answer: decode it whole for its message
	length   int64 // the declared length, or -1

	// An answer that arrives in one read is read as it passes, in the
	// relay's buffer, instead of being copied to be read at the end: what
	// it held waits here.
	read   counts
	inRead bool
}

func (m *jsonMeter) observe(p []byte) {
	if m.inRead {
		return // nothing follows a declared length
	}
	if !m.overflow && len(m.head) == 0 && int64(len(p)) == m.length {
		readWholeJSON(&m.read, p, m.failed)
		m.inRead = true
		return
	}
	if !m.overflow {
		if len(m.head)+len(p) <= maxJSONWhole {
			if m.head == nil && m.length > 0 && m.length <= maxJSONWhole {
				m.head = make([]byte, 0, m.length)
			}
			m.head = append(m.head, p...)
			return
		}
		// Too large to parse whole: keep its beginning (the model) and,
		// from now on, only its tail (the usage).
		m.overflow = true
		old := m.head
		m.tail = append(m.tail, old[max(0, len(old)-jsonTailKeep):]...)
		prefix := make([]byte, 0, jsonPrefixKeep)
		prefix = append(prefix, old[:min(len(old), jsonPrefixKeep)]...)
		m.head = append(prefix, p[:min(len(p), jsonPrefixKeep-len(prefix))]...)
	}
	m.tail = append(m.tail, p...)
	if len(m.tail) > 2*jsonTailKeep {
		n := copy(m.tail, m.tail[len(m.tail)-jsonTailKeep:])
		m.tail = m.tail[:n]
	}
}

// finish reads the usage of the answer. An error answer (rare) is decoded
// whole for its message; a successful one is not: the usage, model and
// metrics objects are found by their keys and only they are decoded, which
// costs a fraction of decoding the whole answer. The four providers put the
// top-level usage object after the content, so the last occurrence of its
// key is the top-level one, and the first "model" is the top-level model.
func (m *jsonMeter) finish(c counts) counts {
	switch {
	case m.inRead:
		c.merge(&m.read)
	case m.overflow:
		readFound(&c, &meterFinds{head: m.head, tail: m.tail})
	default:
		readWholeJSON(&c, m.head, m.failed)
	}
	return c
}

// readWholeJSON reads the usage of a whole JSON answer; failed marks an
// error status.
func readWholeJSON(c *counts, doc []byte, failed bool) {
	if failed {
		c.addJSON(doc)
		return
	}
	f := meterFinds{head: doc, tail: doc}
	f.whole = topLevel(doc, &f.members)
	readFound(c, &f)
}

// readFound adds to c the usage objects and the model f finds. Each kind
// is decoded into a variable of its own (kept across the occurrences
// tried): Anthropic's and Bedrock Converse's usage and the model on the
// stack; Gemini's usage and Bedrock's metrics, whose schema decoders
// (reflection) move what they decode into to the heap, allocated only when
// the answer holds one.
func readFound(c *counts, f *meterFinds) {
	var u usageJSON
	if f.decode(keyUsage, u.decode) {
		c.addUsage(&u)
	}
	var g *geminiUsageJSON
	if f.decode(keyUsageMetadata, func(v []byte) bool {
		if g == nil {
			g = new(geminiUsageJSON)
		}
		return g.Decode(v)
	}) {
		c.addGemini(g)
	}
	var m *metricsJSON
	if f.decode(keyInvocationMetrics, func(v []byte) bool {
		if m == nil {
			m = new(metricsJSON)
		}
		return m.Decode(v)
	}) {
		c.addMetrics(m)
	}
	var model string
	decodeModel := func(v []byte) bool {
		s, err := jsonscan.String(v)
		if err == nil {
			model = s
		}
		return err == nil
	}
	if f.decode(keyModel, decodeModel) || f.decode(keyModelVersion, decodeModel) {
		c.setModel(model)
	}
}

// meterFinds finds the values of the meter's keys in a JSON answer: among
// its top-level members when it was whole and valid, else by searching
// the text it kept — the first "model" in its head, the last of every other
// key in its tail. (Concrete types; the decoders it is handed are closures
// that do not escape: this runs on every call, and closures stored or
// returned allocated seven times.)
type meterFinds struct {
	members    [meterKeyCount][]byte
	whole      bool
	head, tail []byte
}

// decode hands decode the value of key k, and reports whether it found one
// that decoded.
func (f *meterFinds) decode(k meterKey, decode func([]byte) bool) bool {
	if f.whole {
		v := f.members[k]
		return v != nil && decode(v)
	}
	if k == keyModel {
		return decodeAfterKey(f.head, k, decode, false)
	}
	return decodeAfterKey(f.tail, k, decode, true)
}

// topLevel sets members to the values of the meter's keys among the
// top-level members of a whole answer that is one JSON object, found in one
// pass (jsonscan.Members crosses the content's strings a word at a time):
// the usage objects of the four providers and the model are members of the
// answer itself, and a "usage" nested in the content is not the answer's.
// It reports false for anything else (a cut or broken answer), which the
// key search reads as well as it can.
func topLevel(doc []byte, members *[meterKeyCount][]byte) bool {
	err := jsonscan.Members(doc, func(name, v []byte) error {
		switch string(name) {
		case "usage":
			members[keyUsage] = v
		case "usageMetadata":
			members[keyUsageMetadata] = v
		case bedrock.InvocationMetricsKey:
			members[keyInvocationMetrics] = v
		case "model":
			members[keyModel] = v
		case "modelVersion":
			members[keyModelVersion] = v
		}
		return nil
	})
	return err == nil
}

// meterKey names a key the JSON meter looks for: an index of meterKeys.
type meterKey int

const (
	keyUsage meterKey = iota
	keyUsageMetadata
	keyInvocationMetrics
	keyModel
	keyModelVersion
	meterKeyCount
)

// meterKeys are the meter's keys, quoted.
var meterKeys = [meterKeyCount][]byte{
	keyUsage:             []byte(`"usage"`),
	keyUsageMetadata:     []byte(`"usageMetadata"`),
	keyInvocationMetrics: []byte(`"` + bedrock.InvocationMetricsKey + `"`),
	keyModel:             []byte(`"model"`),
	keyModelVersion:      []byte(`"modelVersion"`),
}

// decodeAfterKey hands decode the value of the last (or first) occurrence
// of key — a quoted JSON key, not text inside a string — until one decodes.
func decodeAfterKey(data []byte, key meterKey, decode func([]byte) bool, last bool) bool {
	k := meterKeys[key]
	lo, hi := 0, len(data)
	for {
		var i int
		if last {
			i = lastIndex(data[:hi], k)
		} else if i = bytes.Index(data[lo:], k); i >= 0 {
			i += lo
		}
		if i < 0 {
			return false
		}
		if last {
			hi = i
		} else {
			lo = i + len(k)
		}
		// A quote preceded by an odd number of backslashes is inside a string.
		bs := 0
		for j := i - 1; j >= 0 && data[j] == '\\'; j-- {
			bs++
		}
		if bs%2 == 1 {
			continue
		}
		rest := bytes.TrimLeft(data[i+len(k):], " \t\r\n")
		if len(rest) == 0 || rest[0] != ':' {
			continue
		}
		value := bytes.TrimLeft(rest[1:], " \t\r\n")
		if n := valueEnd(value); n > 0 && decode(value[:n]) {
			return true
		}
	}
}

// lastIndex is bytes.LastIndex(s, k) for a non-empty k. bytes.LastIndex
// hashes every byte (Rabin-Karp); this hops back between occurrences of k's
// first byte — a key's quote — which in a short JSON answer are few. The
// meter looks for three keys in every answer, so it shows in profiles.
func lastIndex(s, k []byte) int {
	for end := len(s); end >= len(k); {
		i := bytes.LastIndexByte(s[:end-len(k)+1], k[0])
		if i < 0 {
			return -1
		}
		if bytes.Equal(s[i:i+len(k)], k) {
			return i
		}
		end = i + len(k) - 1
	}
	return -1
}

// valueEnd returns the length of the JSON object or string at the start of
// data, or 0 when data does not hold a whole one. The decoders validate what
// it spans.
func valueEnd(data []byte) int {
	if len(data) == 0 || data[0] != '{' && data[0] != '"' {
		return 0
	}
	n, err := jsonscan.ValueEnd(data, 0)
	if err != nil {
		return 0
	}
	return n
}

// eventStreamMeter reads an AWS event stream (Bedrock ConverseStream and
// InvokeModelWithResponseStream): it frames messages by their length prelude,
// decodes them with the SDK's decoder, and keeps the Converse "metadata"
// event and the first and last InvokeModel chunks (the first carries
// Anthropic's message_start, the last Bedrock's invocation metrics).
// Frames over maxFrame are skipped unread.
type eventStreamMeter struct {
	dec      *eventstream.Decoder
	buf      []byte
	skip     int
	broken   bool
	metadata []byte
	first    []byte
	last     []byte
	failure  string
}

func (m *eventStreamMeter) observe(p []byte) {
	for len(p) > 0 && !m.broken {
		if m.skip > 0 {
			n := min(m.skip, len(p))
			m.skip -= n
			p = p[n:]
			continue
		}
		if len(m.buf) == 0 && len(p) >= 4 {
			// The common case: whole frames within this read, no copy.
			total := int(binary.BigEndian.Uint32(p))
			if !m.checkLength(total) {
				return
			}
			if total <= maxFrame && len(p) >= total {
				m.frame(p[:total])
				p = p[total:]
				continue
			}
		}
		if len(m.buf) < 4 {
			n := min(4-len(m.buf), len(p))
			m.buf = append(m.buf, p[:n]...)
			p = p[n:]
			if len(m.buf) < 4 {
				return
			}
		}
		total := int(binary.BigEndian.Uint32(m.buf))
		if !m.checkLength(total) {
			return
		}
		if total > maxFrame {
			m.skip = total - len(m.buf)
			m.buf = m.buf[:0]
			continue
		}
		n := min(total-len(m.buf), len(p))
		m.buf = append(m.buf, p[:n]...)
		p = p[n:]
		if len(m.buf) == total {
			m.frame(m.buf)
			m.buf = m.buf[:0]
		}
	}
}

// checkLength stops metering a stream whose frame lengths make no sense.
func (m *eventStreamMeter) checkLength(total int) bool {
	if total < 16 || total > maxFrameLimit {
		m.broken = true
		return false
	}
	return true
}

func (m *eventStreamMeter) frame(f []byte) {
	msg, err := m.dec.Decode(bytes.NewReader(f), nil)
	if err != nil {
		m.broken = true
		return
	}
	header := func(name string) string {
		if v := msg.Headers.Get(name); v != nil {
			return v.String()
		}
		return ""
	}
	switch header(":message-type") {
	case "exception", "error":
		var body struct {
			Message string `json:"message"`
		}
		json.Unmarshal(msg.Payload, &body)
		kind := header(":exception-type")
		if kind == "" {
			kind = header(":error-code")
		}
		m.failure = joinNonEmpty(kind, body.Message)
		return
	}
	switch header(":event-type") {
	case "metadata":
		m.metadata = append(m.metadata[:0], msg.Payload...)
	case "chunk":
		if m.first == nil {
			m.first = append([]byte{}, msg.Payload...)
		} else {
			m.last = append(m.last[:0], msg.Payload...)
		}
	}
}

func (m *eventStreamMeter) finish(c counts) counts {
	if len(m.metadata) > 0 {
		c.addJSON(m.metadata)
	}
	for _, chunk := range [][]byte{m.first, m.last} {
		var wrapped struct {
			Bytes []byte `json:"bytes"` // base64 in the JSON
		}
		if len(chunk) > 0 && json.Unmarshal(chunk, &wrapped) == nil {
			c.addJSON(wrapped.Bytes)
		}
	}
	if m.failure != "" {
		c.failure = m.failure
	}
	return c
}

// joinNonEmpty joins the non-empty strings with single spaces.
func joinNonEmpty(parts ...string) string {
	var b strings.Builder
	for _, p := range parts {
		if p = strings.TrimSpace(p); p != "" {
			if b.Len() > 0 {
				b.WriteByte(' ')
			}
			b.WriteString(p)
		}
	}
	return b.String()
}
