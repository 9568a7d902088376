package batchinput

import "encoding/binary"

// maxDepth is encoding/json's nesting limit, so valid agrees with json.Valid.
const maxDepth = 10000

// valid reports whether data is exactly one JSON value, with optional
// whitespace around it: the same answer as json.Valid (a fuzz test holds it
// to that), several times faster on the string-heavy lines batch files are
// made of, because string contents are skipped eight bytes at a time. The
// batch upload path runs every byte of a batch file through it while the
// file streams, so its speed is the upload's speed.
func valid(data []byte) bool {
	var stackBuf [64]byte
	stack := stackBuf[:0] // '{' or '[' per open container
	i := skipSpace(data, 0)
	for {
		// A value starts at i.
		if i >= len(data) {
			return false
		}
		switch c := data[i]; {
		case c == '{' || c == '[':
			if stack = append(stack, c); len(stack) > maxDepth {
				return false
			}
			i = skipSpace(data, i+1)
			if i < len(data) && data[i] == c+2 { // '}' is '{'+2, ']' is '['+2
				stack = stack[:len(stack)-1]
				i++
				break
			}
			if c == '{' {
				var ok bool
				if i, ok = memberKey(data, i); !ok {
					return false
				}
			}
			continue
		case c == '"':
			var ok bool
			if i, ok = scanString(data, i); !ok {
				return false
			}
		case c == '-' || ('0' <= c && c <= '9'):
			var ok bool
			if i, ok = scanNumber(data, i); !ok {
				return false
			}
		case c == 't':
			if !hasLiteral(data, i, "true") {
				return false
			}
			i += 4
		case c == 'f':
			if !hasLiteral(data, i, "false") {
				return false
			}
			i += 5
		case c == 'n':
			if !hasLiteral(data, i, "null") {
				return false
			}
			i += 4
		default:
			return false
		}
		// A value ended at i: close containers, or move to the next value.
		for {
			i = skipSpace(data, i)
			if len(stack) == 0 {
				return i == len(data)
			}
			if i >= len(data) {
				return false
			}
			top := stack[len(stack)-1]
			c := data[i]
			if c == top+2 {
				stack = stack[:len(stack)-1]
				i++
				continue
			}
			if c != ',' {
				return false
			}
			i = skipSpace(data, i+1)
			if top == '{' {
				var ok bool
				if i, ok = memberKey(data, i); !ok {
					return false
				}
			}
			break
		}
	}
}

// memberKey scans `"key" :` at i and returns where the member's value starts.
func memberKey(data []byte, i int) (int, bool) {
	if i >= len(data) || data[i] != '"' {
		return i, false
	}
	i, ok := scanString(data, i)
	if !ok {
		return i, false
	}
	i = skipSpace(data, i)
	if i >= len(data) || data[i] != ':' {
		return i, false
	}
	return skipSpace(data, i+1), true
}

func hasLiteral(data []byte, i int, lit string) bool {
	return len(data)-i >= len(lit) && string(data[i:i+len(lit)]) == lit
}

// Word-at-a-time tests (SWAR): for a little-endian word w, each is non-zero
// exactly when some byte of w matches.
const (
	ones  = 0x0101010101010101
	highs = 0x8080808080808080
)

func hasZero(w uint64) uint64          { return (w - ones) & ^w & highs }
func hasByte(w uint64, b byte) uint64  { return hasZero(w ^ (ones * uint64(b))) }
func hasBelow(w uint64, n byte) uint64 { return (w - ones*uint64(n)) & ^w & highs } // n ≤ 128

// scanString checks the string starting at data[i] (a '"') and returns the
// index just past its closing quote.
func scanString(data []byte, i int) (int, bool) {
	i++
	for {
		// Skip eight plain bytes at a time: no quote, backslash or control.
		for i+8 <= len(data) {
			w := binary.LittleEndian.Uint64(data[i:])
			if hasByte(w, '"')|hasByte(w, '\\')|hasBelow(w, 0x20) != 0 {
				break
			}
			i += 8
		}
		if i >= len(data) {
			return i, false
		}
		switch c := data[i]; {
		case c == '"':
			return i + 1, true
		case c == '\\':
			if i+1 >= len(data) {
				return i, false
			}
			switch data[i+1] {
			case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
				i += 2
			case 'u':
				if len(data)-i < 6 || !isHex(data[i+2]) || !isHex(data[i+3]) || !isHex(data[i+4]) || !isHex(data[i+5]) {
					return i, false
				}
				i += 6
			default:
				return i, false
			}
		case c < 0x20:
			return i, false
		default:
			i++
		}
	}
}

func isHex(c byte) bool {
	return '0' <= c && c <= '9' || 'a' <= c && c <= 'f' || 'A' <= c && c <= 'F'
}

func isDigit(c byte) bool { return '0' <= c && c <= '9' }

// scanNumber checks the number at data[i] and returns the index after it:
// -?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)?
func scanNumber(data []byte, i int) (int, bool) {
	if data[i] == '-' {
		i++
	}
	switch {
	case i >= len(data):
		return i, false
	case data[i] == '0':
		i++
	case '1' <= data[i] && data[i] <= '9':
		for i++; i < len(data) && isDigit(data[i]); i++ {
		}
	default:
		return i, false
	}
	if i < len(data) && data[i] == '.' {
		i++
		if i >= len(data) || !isDigit(data[i]) {
			return i, false
		}
		for ; i < len(data) && isDigit(data[i]); i++ {
		}
	}
	if i < len(data) && (data[i] == 'e' || data[i] == 'E') {
		i++
		if i < len(data) && (data[i] == '+' || data[i] == '-') {
			i++
		}
		if i >= len(data) || !isDigit(data[i]) {
			return i, false
		}
		for ; i < len(data) && isDigit(data[i]); i++ {
		}
	}
	return i, true
}
