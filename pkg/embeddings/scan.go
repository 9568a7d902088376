package embeddings

import (
	"bytes"

	"github.com/sluice-gateway/sluice/pkg/jsonscan"
	"github.com/sluice-gateway/sluice/pkg/oai"
)

// Scanner reads an OpenAI embeddings response as it streams past and keeps
// what the log event needs — usage, model, how many embeddings and their
// dimension — without decoding the vectors: strings are skipped with
// bytes.IndexByte, number arrays from bracket to bracket, and the usage and
// model values are copied as whole runs, so the cost is a few vectorised
// passes over the bytes. It copes with any member order and never fails:
// on a document it cannot follow it stops and reports what it has.
type Scanner struct {
	stack  [maxDepth]byte // container per depth: '{' or '['
	depth  int
	broken bool
	closed bool // the top-level object ended

	inString, escaped bool
	isKey             bool // the current string is a key we classify
	wantKey           bool // the next string in the current object is a key
	key               [16]byte
	keyLen            int // > len(key): too long (or escaped) to be one we want
	strLen            int

	pending int // member named by the last key: memberX
	member  int // top-level member whose value we are in
	item    int // member of the current data item whose value we are in

	// capturing: the value of a usage or model member is being copied,
	// from offset from of the buffer being scanned.
	capturing bool
	from      int
	usage     []byte // slices of the buffers below, unless a value outgrows them
	model     []byte
	usageBuf  [256]byte
	modelBuf  [128]byte

	items    int
	dims     int
	embArray bool // inside the first item's embedding array
	commas   int
	sawValue bool

	// next holds, for the bytes skipNumbers looks for (nextClose…), the
	// offset of the next one in the buffer being scanned (len when none),
	// or -1 before it is searched: each is searched again only once the
	// scan has passed it, so that many short arrays, or strings in one,
	// cost one pass over the buffer rather than one per element.
	next [3]int

	// parsed is the usage read from usage, valid while haveParsed: a
	// call's cost header and its log event both ask for it.
	parsed     oai.Usage
	parsedOK   bool
	haveParsed bool
}

const (
	maxDepth     = 32
	maxUsageJSON = 2 << 10
	maxModelJSON = 512
)

// Indexes into Scanner.next, and the bytes they find.
const (
	nextClose = iota
	nextQuote
	nextOpen
)

var nextByte = [...]byte{nextClose: ']', nextQuote: '"', nextOpen: '['}

const (
	memberOther = iota
	memberUsage
	memberData
	memberModel
	memberEmbedding
)

// Write scans p. It always consumes all of p.
func (s *Scanner) Write(p []byte) (int, error) {
	s.from = 0 // a value being captured goes on from the start of p
	s.next = [3]int{-1, -1, -1}
	s.haveParsed = false // the usage may change with p
	i := 0
	for i < len(p) && !s.broken {
		if s.inString {
			i = s.scanString(p, i)
			continue
		}
		if s.depth >= 4 && s.stack[s.depth-1] == '[' {
			if j := s.skipNumbers(p, i); j > i {
				i = j
				continue
			}
		}
		s.token(p, i)
		i++
	}
	if s.capturing {
		s.capture(p[s.from:i])
	}
	return len(p), nil
}

// token handles the byte p[i], outside strings.
func (s *Scanner) token(p []byte, i int) {
	switch c := p[i]; c {
	case '"':
		s.inString, s.strLen, s.keyLen = true, 0, 0
		s.isKey = s.wantKey && (s.depth == 1 || (s.depth == 3 && s.member == memberData))
	case '{', '[':
		if s.depth == maxDepth {
			s.broken = true
			return
		}
		if s.depth == 0 && c != '{' {
			s.broken = true
			return
		}
		s.stack[s.depth] = c
		s.depth++
		s.wantKey = c == '{'
		switch {
		case c == '{' && s.depth == 3 && s.member == memberData && s.stack[1] == '[':
			s.items++
			s.item = memberOther
		case c == '[' && s.depth == 4 && s.firstEmbedding():
			s.embArray, s.commas, s.sawValue = true, 0, false
		}
	case '}', ']':
		if s.depth == 0 {
			s.broken = true
			return
		}
		if s.depth == 1 {
			s.endMember(p, i)
			s.closed = true
		}
		if s.depth == 4 && s.embArray {
			s.embArray = false
			if s.sawValue {
				s.dims = s.commas + 1
			}
		}
		s.depth--
		s.wantKey = false
	case ':':
		switch s.depth {
		case 1:
			// A repeated member replaces the earlier one, as in a decoder.
			s.member = s.pending
			s.capturing = s.member == memberUsage || s.member == memberModel
			s.from = i + 1
			switch s.member {
			case memberUsage:
				s.usage = s.usageBuf[:0]
			case memberModel:
				s.model = s.modelBuf[:0]
			case memberData:
				s.items, s.dims = 0, 0
			}
		case 3:
			s.item = s.pending
		}
		s.wantKey = false
	case ',':
		if s.depth == 1 {
			s.endMember(p, i)
		}
		if s.depth > 0 && s.stack[s.depth-1] == '{' {
			s.wantKey = true
		}
		if s.depth == 4 && s.embArray {
			s.commas++
		}
	case ' ', '\t', '\n', '\r':
	default:
		if s.depth == 4 && s.embArray {
			s.sawValue = true
		}
	}
}

// firstEmbedding reports whether the value now starting is the embedding
// of the first data item.
func (s *Scanner) firstEmbedding() bool {
	return s.member == memberData && s.items == 1 && s.item == memberEmbedding && s.dims == 0
}

// endMember ends the top-level member being read at p[i] (its ',' or the
// final '}').
func (s *Scanner) endMember(p []byte, i int) {
	if s.capturing {
		s.capture(p[s.from:i])
		s.capturing = false
	}
	s.member = memberOther
}

// capture appends b, a run of the value being captured, to it, up to the
// value's bound.
func (s *Scanner) capture(b []byte) {
	switch s.member {
	case memberUsage:
		s.usage = append(s.usage, b[:min(len(b), maxUsageJSON-len(s.usage))]...)
	case memberModel:
		s.model = append(s.model, b[:min(len(b), maxModelJSON-len(s.model))]...)
	}
}

// scanString consumes string bytes from p[i:] and returns where it stopped.
func (s *Scanner) scanString(p []byte, i int) int {
	for i < len(p) {
		if s.escaped {
			s.escaped = false
			s.strLen++
			i++
			continue
		}
		seg := p[i:]
		q := bytes.IndexByte(seg, '"')
		if q >= 0 {
			seg = seg[:q]
		}
		if b := bytes.IndexByte(seg, '\\'); b >= 0 {
			s.strLen += b
			if s.isKey {
				s.keyLen = len(s.key) + 1 // an escaped key is none we want
			}
			s.escaped = true
			i += b + 1
			continue
		}
		s.strLen += len(seg)
		if s.isKey {
			copy(s.key[min(s.keyLen, len(s.key)):], seg)
			s.keyLen += len(seg)
		}
		if q < 0 {
			return len(p)
		}
		s.endString()
		return i + q + 1
	}
	return i
}

func (s *Scanner) endString() {
	s.inString = false
	if s.isKey {
		s.isKey = false
		s.pending = memberOther
		if s.keyLen <= len(s.key) {
			switch k := string(s.key[:s.keyLen]); {
			case s.depth == 1 && k == "usage":
				s.pending = memberUsage
			case s.depth == 1 && k == "data":
				s.pending = memberData
			case s.depth == 1 && k == "model":
				s.pending = memberModel
			case s.depth == 3 && k == "embedding":
				s.pending = memberEmbedding
			}
		}
		return
	}
	if s.depth == 3 && s.firstEmbedding() {
		// A base64 embedding: 4 bytes per float32, 3 bytes per 4 characters.
		s.dims = s.strLen * 3 / 16
	}
}

// skipNumbers skips, inside an array nested in a data item, the run of
// bytes up to the next bracket or string, counting the first embedding's
// commas. It returns i when the next byte needs token. Numbers hold no
// quotes or brackets, so the run ends at the nearest of the next ']', '"'
// and '[' (nextAt) — three vectorised passes over a float vector, plus
// the comma count of the first one. Braces need no
// search of their own: in valid JSON an object holds a string unless it
// is empty, so a '{' in a run without '"' is an empty "{}" (nothing to
// follow: it leaves the depth as it was and is one element of the array)
// or the run's last byte before a key (cut off below, for token).
func (s *Scanner) skipNumbers(p []byte, i int) int {
	end := min(s.nextAt(p, i, nextClose), s.nextAt(p, i, nextQuote), s.nextAt(p, i, nextOpen))
	seg := trimObjectStart(p[i:end])
	if len(seg) == 0 {
		return i
	}
	if s.embArray && s.depth == 4 {
		s.commas += bytes.Count(seg, []byte{','})
		if !s.sawValue {
			s.sawValue = hasValue(seg)
		}
	}
	return i + len(seg)
}

// nextAt returns the offset in p, at or after i, of the next byte
// nextByte[b] (len(p) when there is none), searching only when the last
// search's answer is behind i.
func (s *Scanner) nextAt(p []byte, i, b int) int {
	if s.next[b] < i {
		k := bytes.IndexByte(p[i:], nextByte[b])
		if k < 0 {
			k = len(p) - i
		}
		s.next[b] = i + k
	}
	return s.next[b]
}

// trimObjectStart cuts off a '{' that ends seg (white space aside): an
// object that may have members, which token must follow.
func trimObjectStart(seg []byte) []byte {
	n := len(seg)
	for n > 0 && isSpace(seg[n-1]) {
		n--
	}
	if n > 0 && seg[n-1] == '{' {
		return seg[:n-1]
	}
	return seg
}

// hasValue reports whether seg holds a byte of an array element: one
// other than white space and ','.
func hasValue(seg []byte) bool {
	for _, c := range seg {
		if c != ',' && !isSpace(c) {
			return true
		}
	}
	return false
}

func isSpace(c byte) bool { return c == ' ' || c == '\t' || c == '\n' || c == '\r' }

// Usage returns the response's usage; ok is false when it had none (or
// not one of token counts).
func (s *Scanner) Usage() (u oai.Usage, ok bool) {
	if !s.haveParsed {
		s.parsed, s.parsedOK = s.parseUsage()
		s.haveParsed = true
	}
	return s.parsed, s.parsedOK
}

func (s *Scanner) parseUsage() (oai.Usage, bool) {
	if len(s.usage) == 0 {
		return oai.Usage{}, false
	}
	u, ok := plainUsage(s.usage)
	if !ok {
		var err error
		if u, err = oai.ParseUsage(s.usage); err != nil {
			return oai.Usage{}, false
		}
	}
	if u.TotalTokens == 0 {
		u.TotalTokens = u.PromptTokens
	}
	return u, true
}

// plainUsage reads the usage as OpenAI writes it,
// {"prompt_tokens":N,"total_tokens":M} byte for byte, without a walk over
// its members; ok is false for any other form, which oai.ParseUsage reads.
func plainUsage(b []byte) (u oai.Usage, ok bool) {
	const prompt, total = `{"prompt_tokens":`, `,"total_tokens":`
	if !bytes.HasPrefix(b, []byte(prompt)) || b[len(b)-1] != '}' {
		return u, false
	}
	b = b[len(prompt) : len(b)-1]
	k := bytes.IndexByte(b, ',')
	if k < 0 || !bytes.HasPrefix(b[k:], []byte(total)) {
		return u, false
	}
	p, okP := jsonscan.PlainInt(b[:k])
	t, okT := jsonscan.PlainInt(b[k+len(total):])
	if !okP || !okT || p >= maxCount || t >= maxCount {
		return u, false
	}
	return oai.Usage{PromptTokens: p, TotalTokens: t}, true
}

// maxCount bounds a token count, as jsonscan.Count does.
const maxCount = 1 << 40

// Model returns the response's model, or "".
func (s *Scanner) Model() string {
	m, err := jsonscan.String(s.modelValue())
	if err != nil {
		return ""
	}
	return m
}

// modelLiteral returns the model member's value as it came, when it is a
// string that jsonscan.AppendString writes back byte for byte — ASCII
// without escapes, as model names are — so that it is copied, not decoded
// and encoded again; ok is false otherwise (Model then).
func (s *Scanner) modelLiteral() (lit []byte, ok bool) {
	lit = s.modelValue()
	if len(lit) < 2 || lit[0] != '"' {
		return nil, false
	}
	if e, err := jsonscan.StringEnd(lit, 0); err != nil || e != len(lit) {
		return nil, false
	}
	for _, c := range lit[1 : len(lit)-1] {
		if c >= 0x80 || c == '\\' {
			return nil, false
		}
	}
	return lit, true
}

// modelValue is the model member's value without the white space around.
func (s *Scanner) modelValue() []byte {
	lit := s.model[jsonscan.SkipSpace(s.model, 0):]
	for len(lit) > 0 && jsonscan.SkipSpace(lit, len(lit)-1) == len(lit) {
		lit = lit[:len(lit)-1] // white space after the value, before its ',' or '}'
	}
	return lit
}

// Count is the number of data items seen.
func (s *Scanner) Count() int { return s.items }

// Dimensions is the length of the first embedding, or 0 if unknown.
func (s *Scanner) Dimensions() int { return s.dims }

// Complete reports whether the whole top-level object was read.
func (s *Scanner) Complete() bool { return s.closed && !s.broken }
