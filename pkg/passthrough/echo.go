package passthrough

import (
	"encoding/base64"
	"encoding/binary"
	"encoding/hex"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"sync"
)

// injectedCredentials returns the credentials sluice put on an outbound
// request, read after the client's own were dropped and sluice's injected:
// the API key, the OAuth2 access token and the SigV4 session token (lasting:
// the same on many calls), appended to lasting, and the SigV4 signature (new
// on every call).
func injectedCredentials(h http.Header, lasting []string) (_ []string, signature string) {
	// Indexed by their canonical names, as sluice set them: Get would
	// canonicalise each name again on every call.
	for _, k := range [...]string{"X-Api-Key", "X-Goog-Api-Key", "X-Amz-Security-Token"} {
		if v := firstValue(h, k); v != "" {
			lasting = append(lasting, v)
		}
	}
	auth := firstValue(h, "Authorization")
	if tok, ok := strings.CutPrefix(auth, "Bearer "); ok && tok != "" {
		lasting = append(lasting, tok)
	} else if _, sig, ok := strings.Cut(auth, "Signature="); ok && sig != "" {
		signature = sig
	}
	return lasting, signature
}

// firstValue is h.Get(k) for a canonical k.
func firstValue(h http.Header, k string) string {
	if vs := h[k]; len(vs) > 0 {
		return vs[0]
	}
	return ""
}

// injectedSecrets returns the echo set of the credentials on an outbound
// request. A lasting credential's set is built once (echoes); a signature's,
// which no other call shares, every time.
func (s *Service) injectedSecrets(h http.Header) *echoSet {
	return echoesOf(h, s.echoes.of)
}

// keyEchoes is the echo set of the API key setKey injects (Anthropic,
// Gemini): the same on every call, so the upstream keeps it, where each call
// would look it up in the echo cache (a lock, and the key hashed).
func keyEchoes(setKey func(http.Header)) *echoSet {
	h := http.Header{}
	setKey(h)
	return echoesOf(h, func(v string) *echoSet { return newEchoSet(echoForms([]string{v})) })
}

// echoesOf returns the echo set of the credentials on h, a lasting one's
// set found by lasting.
func echoesOf(h http.Header, lasting func(string) *echoSet) *echoSet {
	var buf [4]string // every credential there is: no allocation
	creds, sig := injectedCredentials(h, buf[:0])
	var set *echoSet
	for _, v := range creds {
		set = set.union(lasting(v))
	}
	if sig != "" {
		set = set.union(newEchoSet(echoForms([]string{sig})))
	}
	return set
}

// maxEchoSets bounds the echo sets kept: credentials rotate (OAuth2 tokens
// and session tokens hourly), so the cache starts over when it is full.
const maxEchoSets = 64

// echoCache keeps the echo set of each lasting credential: its spellings
// are a dozen encodings, the same on every call that injects it.
type echoCache struct {
	mu   sync.Mutex
	sets map[string]*echoSet
}

func (c *echoCache) of(secret string) *echoSet {
	c.mu.Lock()
	e, ok := c.sets[secret]
	c.mu.Unlock()
	if ok {
		return e
	}
	e = newEchoSet(echoForms([]string{secret}))
	c.mu.Lock()
	if c.sets == nil || len(c.sets) >= maxEchoSets {
		c.sets = make(map[string]*echoSet, 4)
	}
	c.sets[secret] = e
	c.mu.Unlock()
	return e
}

// minEchoForm is the shortest spelling of a secret looked for: shorter
// runs (the tail of a short base64 alignment) would match innocent text.
const minEchoForm = 8

// echoForms returns the lower-cased spellings in which an echo could carry
// one of secrets: as is, percent-encoded, in hex, and in base64 (standard
// and URL alphabets) at each of the three alignments it can have inside a
// longer encoded value (as in "Basic base64(user:secret)"), trimmed to the
// characters that depend on the secret alone.
func echoForms(secrets []string) []string {
	var out []string
	add := func(f string) {
		if f = strings.ToLower(f); len(f) >= minEchoForm && !slices.Contains(out, f) {
			out = append(out, f)
		}
	}
	for _, s := range secrets {
		add(s)
		add(url.QueryEscape(s))
		add(url.PathEscape(s))
		add(hex.EncodeToString([]byte(s)))
		for off := range 3 {
			padded := append(make([]byte, off, off+len(s)), s...)
			// Characters [first, last) hold only the secret's bits.
			first, last := (off*8+5)/6, (off+len(s))*8/6
			for _, enc := range []*base64.Encoding{base64.StdEncoding, base64.URLEncoding} {
				if e := enc.EncodeToString(padded); last > first {
					add(e[first:last])
				}
			}
		}
	}
	return out
}

// echoSet holds the spellings (echoForms) an answer header must not hold,
// with a prefilter: a bit for a hash of each 8-byte word a spelling starts
// with at its offsets 0 to 7, so that a header is read a word at a time
// and a spelling compared only where a word's bit is set. When every
// spelling is at least strideForm long (as a real credential's are), the
// header is read only at every eighth offset: such a spelling, wherever it
// starts, holds a whole word at one of them. Immutable once built: sets are
// shared between calls.
type echoSet struct {
	forms  []string
	stride int // 8, or 1 when a spelling is shorter than strideForm
	heads  [echoFilterBits / 64]uint64
}

const (
	// strideForm is the shortest spelling that always holds a whole word
	// at an offset a multiple of 8 (seven bytes before it, eight of it).
	strideForm = 15
	// echoFilterBits sizes the prefilter: a dozen spellings at eight
	// offsets each set about one bit in forty (1,024 bits measured 12 %
	// slower on BenchmarkCopyResponseHeader).
	echoFilterLog  = 12
	echoFilterBits = 1 << echoFilterLog
)

func newEchoSet(forms []string) *echoSet {
	e := &echoSet{forms: forms, stride: 8}
	for _, f := range forms {
		if !isASCII(f) {
			continue // found by the slow path only (holds)
		}
		if len(f) < strideForm {
			e.stride = 1
		}
		for k := 0; k < 8 && k+minEchoForm <= len(f); k++ {
			h := headHash(binary.LittleEndian.Uint64([]byte(f[k : k+minEchoForm])))
			e.heads[h>>6] |= 1 << (h & 63)
		}
	}
	return e
}

// union is the set of both; a nil e or o is the empty set.
func (e *echoSet) union(o *echoSet) *echoSet {
	switch {
	case e == nil:
		return o
	case o == nil:
		return e
	}
	u := &echoSet{forms: append(slices.Clip(e.forms), o.forms...), stride: min(e.stride, o.stride)}
	for i := range u.heads {
		u.heads[i] = e.heads[i] | o.heads[i]
	}
	return u
}

// revealedIn reports whether a header's name or values hold one of the
// spellings, compared case-insensitively: an upstream may echo a
// credential lower-cased, percent-encoded, base64-encoded (alone or inside
// a Basic credential) or in hex.
func (e *echoSet) revealedIn(name string, values []string) bool {
	if e == nil || len(e.forms) == 0 {
		return false
	}
	return e.holds(name) || slices.ContainsFunc(values, e.holds)
}

func (e *echoSet) holds(v string) bool {
	if !isASCII(v) {
		// Rare: strings.ToLower's Unicode folding, as the spellings had
		// (which can lengthen v: an invalid byte becomes U+FFFD).
		v = strings.ToLower(v)
		return slices.ContainsFunc(e.forms, func(f string) bool { return strings.Contains(v, f) })
	}
	if len(v) < minEchoForm {
		return false
	}
	for i := 0; i+minEchoForm <= len(v); i += e.stride {
		w := lowerWord(binary.LittleEndian.Uint64([]byte(v[i : i+minEchoForm])))
		if h := headHash(w); e.heads[h>>6]&(1<<(h&63)) == 0 {
			continue
		}
		// A spelling holding this word starts at most stride-1 bytes
		// before it.
		for start := max(0, i-e.stride+1); start <= i; start++ {
			for _, f := range e.forms {
				if len(f) <= len(v)-start && equalLowerASCII(v[start:start+len(f)], f) {
					return true
				}
			}
		}
	}
	return false
}

// headHash maps a word of 8 lower-cased bytes to one of echoFilterBits.
func headHash(w uint64) uint64 { return (w * 0x9e3779b97f4a7c15) >> (64 - echoFilterLog) }

// lowerWord lower-cases the ASCII letters of 8 ASCII bytes at once: a byte
// of 'A'..'Z' gains 0x20. No byte has its high bit set, so the additions
// carry into no neighbour.
func lowerWord(w uint64) uint64 {
	const ones = 0x0101010101010101
	geA := w + (0x80-'A')*ones
	gtZ := w + (0x80-'Z'-1)*ones
	upper := (geA &^ gtZ) & (0x80 * ones)
	return w | upper>>2
}

// equalLowerASCII reports whether ASCII s lower-cased is f.
func equalLowerASCII(s, f string) bool {
	for i := 0; i < len(f); i++ {
		c := s[i]
		if 'A' <= c && c <= 'Z' {
			c += 'a' - 'A'
		}
		if c != f[i] {
			return false
		}
	}
	return true
}

func isASCII(s string) bool {
	i := 0
	for ; i+8 <= len(s); i += 8 {
		if binary.LittleEndian.Uint64([]byte(s[i:i+8]))&0x8080808080808080 != 0 {
			return false
		}
	}
	for ; i < len(s); i++ {
		if s[i] >= 0x80 {
			return false
		}
	}
	return true
}
