package jsonscan

import (
	"bytes"
	"strconv"
	"unicode/utf16"
	"unicode/utf8"
)

// AppendString appends s as a JSON string of valid UTF-8, escaping what
// encoding/json escapes (quotes, backslashes, control characters, U+2028
// and U+2029) but not <, > and &.
func AppendString[S string | []byte](b []byte, s S) []byte {
	const hex = "0123456789abcdef"
	b = append(b, '"')
	start := 0
	for i := 0; i < len(s); {
		c := s[i]
		if c >= 0x20 && c != '"' && c != '\\' && c < 0x80 {
			i++
			continue
		}
		if c >= 0x80 {
			r, size := utf8.DecodeRuneInString(string(s[i:min(i+4, len(s))]))
			if r != '\u2028' && r != '\u2029' {
				i += size
				continue
			}
			b = append(b, s[start:i]...)
			b = append(b, `\u202`...)
			b = append(b, hex[r&0xF])
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
