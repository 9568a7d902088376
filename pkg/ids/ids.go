// Package ids makes sluice's identifiers: a prefix plus 24 characters of
// [A-Za-z0-9] from a cryptographic source (about 143 bits).
package ids

import (
	"crypto/rand"
	"strings"
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
	// 62 does not divide 256: reject bytes ≥ 248 (4×62) so every character is
	// equally likely.
	var b strings.Builder
	b.Grow(len(prefix) + Length)
	b.WriteString(prefix)
	var buf [32]byte
	for n := 0; n < Length; {
		rand.Read(buf[:]) // never returns an error (crypto/rand, Go ≥ 1.24)
		for _, c := range buf {
			if c >= 248 {
				continue
			}
			b.WriteByte(alphabet[c%62])
			if n++; n == Length {
				break
			}
		}
	}
	return b.String()
}

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
