// Package ids makes sluice's identifiers: a prefix plus 24 characters of
// [A-Za-z0-9] from a cryptographic source (about 143 bits).
package ids

import (
	"crypto/rand"
	"strings"
	"sync"
)

const (
	alphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789"
	// Length is the number of random characters after the prefix.
	Length = 24
)

// Identifier prefixes (ARCHITECTURE §4).
const (
	File         = "file-"
	Batch        = "batch_"
	BatchRequest = "batch_req_"
	Upload       = "upload_"
	Part         = "part_"
	Request      = "req_"
	Team         = "team-"
	// ChatCompletion names a chat answer sluice builds itself (a translated
	// provider's, a mock's), as OpenAI names its own.
	ChatCompletion = "chatcmpl-"
)

// New returns prefix followed by Length random alphanumeric characters.
func New(prefix string) string {
	var out [Length]byte
	r := randomPool.Get().(*random)
	r.fill(&out)
	randomPool.Put(r)
	return prefix + string(out[:])
}

// fill sets out to random characters, taking r's bytes past the ones it
// handed out before.
func (r *random) fill(out *[Length]byte) {
	buf, off := &r.buf, r.off
	for n := 0; n < Length; {
		if off == len(buf) {
			rand.Read(buf[:]) // never returns an error (crypto/rand, Go ≥ 1.24)
			off = 0
		}
		if c := charOf[buf[off]]; c != 0 {
			out[n] = c
			n++
		}
		off++
	}
	r.off = off
}

// charOf is the character a random byte stands for, 0 for none: 62 does
// not divide 256, so bytes ≥ 248 (4×62) are rejected and every character is
// equally likely.
var charOf = func() (t [256]byte) {
	for c := range 248 {
		t[c] = alphabet[c%62]
	}
	return t
}()

// randomChunk is how many bytes of crypto/rand a random holds: every
// request makes an id, and one read of the system's source per id (a
// system call where getrandom has no vDSO) showed in profiles; a chunk
// serves about twenty ids.
const randomChunk = 512

// random hands out crypto/rand's bytes a chunk at a time. Each byte is
// handed out once: a random is used by one goroutine at a time (it lives
// in a sync.Pool) and moves past what it hands out. The bytes are only
// ever identifiers' characters, never a secret's, so holding a chunk
// ahead of use exposes nothing crypto/rand's own buffers would not.
type random struct {
	buf [randomChunk]byte
	off int // the next byte to hand out; len(buf): none left
}

// randomPool keeps the randoms: a pool, not a mutex around one, so that
// cores making ids at once do not queue for it.
var randomPool = sync.Pool{New: func() any { return &random{off: randomChunk} }}

// Valid reports whether s is prefix followed by Length alphanumeric characters.
func Valid(prefix, s string) bool {
	rest, ok := strings.CutPrefix(s, prefix)
	if !ok || len(rest) != Length {
		return false
	}
	for i := 0; i < len(rest); i++ {
		if !strings.ContainsRune(alphabet, rune(rest[i])) {
			return false
		}
	}
	return true
}
