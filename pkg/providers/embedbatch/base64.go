package embedbatch

import (
	"encoding/base64"
	"encoding/binary"
	"slices"
)

// base64Pairs holds, for every 12 bits, the two standard base64 characters
// that encode them (the first in the low byte).
type base64Pairs [1 << 12]uint16

func newBase64Pairs() *base64Pairs {
	const alphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/"
	var t base64Pairs
	for x := range t {
		t[x] = uint16(alphabet[x>>6]) | uint16(alphabet[x&63])<<8
	}
	return &t
}

// pairs is read-only after package initialization.
var pairs = newBase64Pairs()

// appendBase64 is base64.StdEncoding.AppendEncode(dst, src), which
// FuzzAppendBase64 holds it to. A vector's base64 is the translation's
// second cost after reading its numbers: the standard encoder looks up one
// character at a time, this one a pair, and writes 6 bytes' 8 characters
// with one store.
func appendBase64(dst, src []byte) []byte {
	whole := len(src) / 3 * 3
	o := len(dst)
	dst = slices.Grow(dst, base64.StdEncoding.EncodedLen(len(src)))
	dst = dst[:o+whole/3*4]
	i := 0
	for ; len(src)-i >= 8; i += 6 {
		v := binary.BigEndian.Uint64(src[i:]) >> 16 // the 6 bytes, high first
		binary.LittleEndian.PutUint64(dst[o:], uint64(pairs[v>>36&0xFFF])|uint64(pairs[v>>24&0xFFF])<<16|
			uint64(pairs[v>>12&0xFFF])<<32|uint64(pairs[v&0xFFF])<<48)
		o += 8
	}
	for ; i < whole; i += 3 {
		v := uint(src[i])<<16 | uint(src[i+1])<<8 | uint(src[i+2])
		binary.LittleEndian.PutUint32(dst[o:], uint32(pairs[v>>12])|uint32(pairs[v&0xFFF])<<16)
		o += 4
	}
	return base64.StdEncoding.AppendEncode(dst, src[whole:])
}
