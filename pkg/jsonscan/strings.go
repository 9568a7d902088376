package jsonscan

import (
	"bytes"
	"strconv"
	"unicode/utf16"
	"unicode/utf8"
)

// AppendString appends s as a JSON string, as encoding/json writes it but
// for <, > and &, which need no escape outside HTML: quotes, backslashes,
// control characters, U+2028 and U+2029 escaped, each byte of invalid UTF-8
// replaced by U+FFFD.
func AppendString[S string | []byte](b []byte, s S) []byte {
	const hex = "0123456789abcdef"
	b = append(b, '"')
	start := 0
	for i := 0; i < len(s); {
		if i = asciiRun(s, i); i == len(s) {
			break
		}
		c := s[i]
		if c >= 0x20 && c != '"' && c != '\\' && c < 0x80 {
			i++
			continue
		}
		if c >= 0x80 {
			r, size := utf8.DecodeRuneInString(string(s[i:min(i+4, len(s))]))
			switch {
			case r == utf8.RuneError && size == 1:
				b = append(b, s[start:i]...)
				b = append(b, `\ufffd`...)
			case r == '\u2028' || r == '\u2029':
				b = append(b, s[start:i]...)
				b = append(b, `\u202`...)
				b = append(b, hex[r&0xF])
			default:
				i += size
				continue
			}
			i += size
			start = i
			continue
		}
		b = append(b, s[start:i]...)
		switch c {
		case '"', '\\':
			b = append(b, '\\', c)
		case '\b':
			b = append(b, '\\', 'b')
		case '\f':
			b = append(b, '\\', 'f')
		case '\n':
			b = append(b, '\\', 'n')
		case '\r':
			b = append(b, '\\', 'r')
		case '\t':
			b = append(b, '\\', 't')
		default:
			b = append(b, '\\', 'u', '0', '0', hex[c>>4], hex[c&0xF])
		}
		i++
		start = i
	}
	b = append(b, s[start:]...)
	return append(b, '"')
}

// asciiRun returns the index of the first 8-byte word at or after s[i]
// that may hold a byte AppendString must look at — '"', '\\', a control
// character or a non-ASCII byte — or where fewer than 8 bytes remain (the
// bit tests of plainRun, and the high bits).
func asciiRun[S string | []byte](s S, i int) int {
	const ones, highs = 0x0101010101010101, 0x8080808080808080
	for ; i+8 <= len(s); i += 8 {
		w := s[i : i+8] // one bounds check: the loads below combine into one
		v := uint64(w[0]) | uint64(w[1])<<8 | uint64(w[2])<<16 | uint64(w[3])<<24 |
			uint64(w[4])<<32 | uint64(w[5])<<40 | uint64(w[6])<<48 | uint64(w[7])<<56
		q := v ^ (ones * '"')
		e := v ^ (ones * '\\')
		if ((q-ones)&^q|(e-ones)&^e|(v-ones*0x20)&^v|v)&highs != 0 {
			return i
		}
	}
	return i
}

// Unquote decodes a JSON string literal (quotes included) of valid UTF-8
// into a new slice. It reports false for anything encoding/json would
// refuse, and for what it reads in its own way — invalid UTF-8 (replaced),
// surrogate escapes — which callers leave to encoding/json.
func Unquote(lit []byte) ([]byte, bool) {
	if len(lit) < 2 || lit[0] != '"' || lit[len(lit)-1] != '"' {
		return nil, false
	}
	in := lit[1 : len(lit)-1]
	if bytes.IndexByte(in, '\\') < 0 {
		for _, c := range in {
			if c < 0x20 || c == '"' {
				return nil, false
			}
		}
		return bytes.Clone(in), utf8.Valid(in)
	}
	out := make([]byte, 0, len(in))
	for i := 0; i < len(in); i++ {
		c := in[i]
		switch {
		case c < 0x20 || c == '"':
			return nil, false
		case c != '\\':
			out = append(out, c)
			continue
		}
		if i+1 >= len(in) {
			return nil, false
		}
		i++
		switch in[i] {
		case '"', '\\', '/':
			out = append(out, in[i])
		case 'b':
			out = append(out, '\b')
		case 'f':
			out = append(out, '\f')
		case 'n':
			out = append(out, '\n')
		case 'r':
			out = append(out, '\r')
		case 't':
			out = append(out, '\t')
		case 'u':
			if i+4 >= len(in) {
				return nil, false
			}
			r, err := strconv.ParseUint(string(in[i+1:i+5]), 16, 16)
			if err != nil || utf16.IsSurrogate(rune(r)) {
				return nil, false // surrogate pairs: encoding/json's business
			}
			out = utf8.AppendRune(out, rune(r))
			i += 4
		default:
			return nil, false
		}
	}
	return out, utf8.Valid(out)
}
