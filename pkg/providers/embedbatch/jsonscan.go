package embedbatch

import (
	"bytes"
	"encoding/json"
	"errors"
	"math"
	"strconv"
	"unicode/utf8"
)

// The provider answers translated here are mostly numbers: a 1536-dimension
// vector is 20 KB of them, and Titan v2 sends every vector twice.
// encoding/json validates such a document and then scans it again to decode
// it, which cost more than everything else sluice does for the request.
// Members and Elements instead walk the structure once — strings skipped
// with their escapes, containers matched bracket for bracket, a run of
// numbers crossed byte by byte without a state machine — and hand the
// parsers the spans of the values they ask for. What a parser uses is
// checked where it is used (AppendVector checks every number it emits,
// Count every count); what it skips is only checked for structure. So a
// provider's answer is never copied to the client unchecked, but a document
// broken inside a member sluice ignores may be accepted.

// ErrSyntax is returned for a document whose structure is not JSON.
var ErrSyntax = errors.New("malformed JSON")

// maxDepth bounds the nesting of a skipped value.
const maxDepth = 256

// Members calls f with the key and raw value of each member of the JSON
// object doc, in order (a key given twice is passed twice: a parser keeping
// the last copy matches encoding/json). An error from f stops the walk and
// is returned.
func Members(doc []byte, f func(key string, value []byte) error) error {
	i := skipSpace(doc, 0)
	if i >= len(doc) || doc[i] != '{' {
		return errors.New("not a JSON object")
	}
	i = skipSpace(doc, i+1)
	if i < len(doc) && doc[i] == '}' {
		return end(doc, i+1)
	}
	for {
		if i >= len(doc) || doc[i] != '"' {
			return ErrSyntax
		}
		keyEnd, err := stringEnd(doc, i)
		if err != nil {
			return err
		}
		key, err := keyString(doc[i:keyEnd])
		if err != nil {
			return err
		}
		i = skipSpace(doc, keyEnd)
		if i >= len(doc) || doc[i] != ':' {
			return ErrSyntax
		}
		i = skipSpace(doc, i+1)
		valueEnd, err := valueEnd(doc, i)
		if err != nil {
			return err
		}
		if err := f(key, doc[i:valueEnd]); err != nil {
			return err
		}
		i = skipSpace(doc, valueEnd)
		if i >= len(doc) {
			return ErrSyntax
		}
		switch doc[i] {
		case ',':
			i = skipSpace(doc, i+1)
		case '}':
			return end(doc, i+1)
		default:
			return ErrSyntax
		}
	}
}

// Elements calls f with the raw value of each element of the JSON array
// doc, in order.
func Elements(doc []byte, f func(value []byte) error) error {
	i := skipSpace(doc, 0)
	if i >= len(doc) || doc[i] != '[' {
		return errors.New("not a JSON array")
	}
	i = skipSpace(doc, i+1)
	if i < len(doc) && doc[i] == ']' {
		return end(doc, i+1)
	}
	for {
		valueEnd, err := valueEnd(doc, i)
		if err != nil {
			return err
		}
		if err := f(doc[i:valueEnd]); err != nil {
			return err
		}
		i = skipSpace(doc, valueEnd)
		if i >= len(doc) {
			return ErrSyntax
		}
		switch doc[i] {
		case ',':
			i = skipSpace(doc, i+1)
		case ']':
			return end(doc, i+1)
		default:
			return ErrSyntax
		}
	}
}

// Null reports whether a raw value is absent or JSON null.
func Null(value []byte) bool { return len(value) == 0 || string(value) == "null" }

// Count reads a raw value as a token count: a JSON number that is a
// non-negative integer (1e3 and 6.0 are accepted, as encoding/json would
// decode them into a float) below 2^40.
func Count(value []byte) (int64, bool) {
	if !validNumber(value) {
		return 0, false
	}
	f, err := strconv.ParseFloat(string(value), 64)
	if err != nil || f < 0 || f >= 1<<40 || f != math.Trunc(f) {
		return 0, false
	}
	return int64(f), true
}

// end checks that only white space follows the top-level value.
func end(doc []byte, i int) error {
	if skipSpace(doc, i) != len(doc) {
		return ErrSyntax
	}
	return nil
}

// keyString returns a member key; one with escapes or invalid UTF-8 (rare)
// is decoded as encoding/json does.
func keyString(lit []byte) (string, error) {
	inner := lit[1 : len(lit)-1]
	if bytes.IndexByte(inner, '\\') < 0 && utf8.Valid(inner) {
		return string(inner), nil
	}
	var s string
	if err := json.Unmarshal(lit, &s); err != nil {
		return "", ErrSyntax
	}
	return s, nil
}

// stringEnd returns the index just past the string starting at doc[i] ('"').
func stringEnd(doc []byte, i int) (int, error) {
	j := i + 1
	for {
		k := indexQuoteOrEscape(doc[j:])
		if k < 0 {
			return 0, ErrSyntax
		}
		j += k
		if doc[j] == '"' {
			return j + 1, nil
		}
		j += 2 // the escaped character; \uXXXX's digits are plain bytes
		if j > len(doc) {
			return 0, ErrSyntax
		}
	}
}

func indexQuoteOrEscape(b []byte) int {
	for i, c := range b {
		if c == '"' || c == '\\' {
			return i
		}
		if c < 0x20 {
			return -1 // a control character cannot be in a string
		}
	}
	return -1
}

// structural marks the bytes that open, close or quote inside a container.
var structural = [256]bool{'"': true, '[': true, ']': true, '{': true, '}': true}

// valueEnd returns the index just past the value starting at doc[i].
func valueEnd(doc []byte, i int) (int, error) {
	if i >= len(doc) {
		return 0, ErrSyntax
	}
	switch c := doc[i]; c {
	case '"':
		return stringEnd(doc, i)
	case '{', '[':
		var (
			stack [maxDepth]byte
			depth int
			flat  flatArrays
		)
		for j := i; j < len(doc); {
			c := doc[j]
			if !structural[c] {
				j++
				continue
			}
			switch c {
			case '"':
				e, err := stringEnd(doc, j)
				if err != nil {
					return 0, err
				}
				j = e
				continue
			case '{', '[':
				if c == '[' {
					if e := flat.end(doc, j); e > 0 {
						if depth == 0 {
							return e, nil
						}
						j = e
						continue
					}
				}
				if depth == maxDepth {
					return 0, ErrSyntax
				}
				stack[depth] = c
				depth++
			case '}', ']':
				if depth == 0 || stack[depth-1] != c-2 { // '{'+2 == '}', '['+2 == ']'
					return 0, ErrSyntax
				}
				depth--
				if depth == 0 {
					return j + 1, nil
				}
			}
			j++
		}
		return 0, ErrSyntax
	}
	j := i
	for j < len(doc) && (isNumberByte(doc[j]) || doc[j] >= 'a' && doc[j] <= 'z') {
		j++
	}
	if j == i {
		return 0, ErrSyntax
	}
	return j, nil
}

// flatArrays finds the end of arrays that hold no container or string —
// the hot case, a vector of numbers, whose end is then its first ']' — with
// vectorised byte searches instead of the byte loop. It remembers the last
// region it searched, so that the arrays opening inside it cost nothing and
// the searches of one document add up to one pass over it.
type flatArrays struct {
	close int // the first ']' after the last array tried (0: none tried)
	last  int // the last of '[', '{', '"', '}' before close
}

// end returns the index just past the array starting at doc[i] ('[') if it
// is flat, else 0.
func (f *flatArrays) end(doc []byte, i int) int {
	if i < f.close {
		// The first ']' after i is f.close: the array is flat if nothing
		// structural lies between it and that ']'.
		if i == f.last {
			return f.close + 1
		}
		return 0
	}
	k := bytes.IndexByte(doc[i+1:], ']')
	if k < 0 {
		return 0
	}
	inner := doc[i+1 : i+1+k]
	last := max(bytes.LastIndexByte(inner, '['), bytes.LastIndexByte(inner, '{'),
		bytes.LastIndexByte(inner, '"'), bytes.LastIndexByte(inner, '}'))
	if last < 0 {
		return i + 2 + k
	}
	f.close, f.last = i+1+k, i+1+last
	return 0
}
