// Package auth owns keys and teams: the master key, virtual keys (stored only
// as SHA-256 hashes), key extraction from requests, the principal a request
// acts as, the key and team rate limits, and the admin endpoints.
package auth

import (
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"strings"

	"github.com/sluice-gateway/sluice/pkg/ids"
)

// KeyPrefix starts every sluice key.
const KeyPrefix = "sk-"

// AdminTeam is the reserved team that owns what the master key creates.
const AdminTeam = "admin"

// NewKey returns a fresh virtual key: "sk-" and 43 characters of unpadded
// base64url (32 random bytes).
func NewKey() string {
	var b [32]byte
	rand.Read(b[:]) // never returns an error (crypto/rand, Go ≥ 1.24)
	return KeyPrefix + base64.RawURLEncoding.EncodeToString(b[:])
}

// Token is the at-rest form of a key: the lowercase hex SHA-256 of the whole key.
func Token(key string) string {
	var t token
	t.of(key)
	return string(t[:])
}

// token is a Token's bytes: Authenticate finds a cached key by them without
// making a string of them.
type token [sha256.Size * 2]byte

// of sets t to key's token. A key of the usual length is hashed from a copy
// on the stack: converting it to []byte would allocate.
func (t *token) of(key string) {
	var buf [128]byte
	b := buf[:0]
	if len(key) <= len(buf) {
		b = append(b, key...)
	} else {
		b = []byte(key)
	}
	sum := sha256.Sum256(b)
	hex.Encode(t[:], sum[:])
}

// isToken reports whether s looks like a Token rather than a raw key.
func isToken(s string) bool {
	if len(s) != sha256.Size*2 {
		return false
	}
	_, err := hex.DecodeString(s)
	return err == nil && strings.ToLower(s) == s
}

// tokenOf accepts a raw key or its token and returns the token.
func tokenOf(keyOrToken string) string {
	if isToken(keyOrToken) {
		return keyOrToken
	}
	return Token(keyOrToken)
}

// newTeamID generates an id for a team created without one.
func newTeamID() string { return ids.New(ids.Team) }
