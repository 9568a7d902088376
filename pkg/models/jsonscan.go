package models

import (
	"bytes"
	"encoding/json"
	"errors"
	"unicode/utf8"
)

// The request parsers read only the few top-level members they need and keep
// the rest of the body as bytes, so a request can be forwarded as it came
// (with only its model rewritten) instead of being decoded and re-encoded.
// They run json.Valid first; the scanners below then walk a document known to
// be well-formed, but still check their bounds so that a bug is an error, not
// a panic.

var errMalformed = errors.New("malformed JSON")

// member is one member of a JSON object: its key and the span of its value.
type member struct {
	key        string
	start, end int // value bytes: doc[start:end]
}

// objectMembers lists the members of the JSON object doc (well-formed JSON).
// It reports ok=false when doc is not an object.
func objectMembers(doc []byte) (members []member, ok bool, err error) {
	i := skipSpace(doc, 0)
	if i >= len(doc) || doc[i] != '{' {
		return nil, false, nil
	}
	i = skipSpace(doc, i+1)
	if i < len(doc) && doc[i] == '}' {
		return nil, true, nil
	}
	for {
		if i >= len(doc) || doc[i] != '"' {
			return nil, true, errMalformed
		}
		keyEnd, err := stringEnd(doc, i)
		if err != nil {
			return nil, true, err
		}
		key, err := unquote(doc[i:keyEnd])
		if err != nil {
			return nil, true, err
		}
		i = skipSpace(doc, keyEnd)
		if i >= len(doc) || doc[i] != ':' {
			return nil, true, errMalformed
		}
		start := skipSpace(doc, i+1)
		end, err := valueEnd(doc, start)
		if err != nil {
			return nil, true, err
		}
		members = append(members, member{key: key, start: start, end: end})
		i = skipSpace(doc, end)
		if i >= len(doc) {
			return nil, true, errMalformed
		}
		switch doc[i] {
		case ',':
			i = skipSpace(doc, i+1)
		case '}':
			return members, true, nil
		default:
			return nil, true, errMalformed
		}
	}
}

// arrayElements calls f with the span of each element of the JSON array doc
// (well-formed); f returning false stops the walk.
func arrayElements(doc []byte, f func(start, end int) bool) error {
	i := skipSpace(doc, 0)
	if i >= len(doc) || doc[i] != '[' {
		return errMalformed
	}
	i = skipSpace(doc, i+1)
	if i < len(doc) && doc[i] == ']' {
		return nil
	}
	for {
		end, err := valueEnd(doc, i)
		if err != nil {
			return err
		}
		if !f(i, end) {
			return nil
		}
		i = skipSpace(doc, end)
		if i >= len(doc) {
			return errMalformed
		}
		switch doc[i] {
		case ',':
			i = skipSpace(doc, i+1)
		case ']':
			return nil
		default:
			return errMalformed
		}
	}
}

func skipSpace(doc []byte, i int) int {
	for i < len(doc) {
		switch doc[i] {
		case ' ', '\t', '\n', '\r':
			i++
		default:
			return i
		}
	}
	return i
}

// stringEnd returns the index just past the string starting at doc[i] == '"'.
func stringEnd(doc []byte, i int) (int, error) {
	j := i + 1
	for {
		k := bytes.IndexByte(doc[j:], '"')
		if k < 0 {
			return 0, errMalformed
		}
		// The quote ends the string unless an odd run of backslashes precedes it.
		n := 0
		for p := j + k - 1; p > i && doc[p] == '\\'; p-- {
			n++
		}
		if n%2 == 0 {
			return j + k + 1, nil
		}
		j += k + 1
	}
}

// valueEnd returns the index just past the value starting at doc[i].
func valueEnd(doc []byte, i int) (int, error) {
	if i >= len(doc) {
		return 0, errMalformed
	}
	switch doc[i] {
	case '"':
		return stringEnd(doc, i)
	case '{', '[':
		depth := 0
		for j := i; j < len(doc); j++ {
			switch doc[j] {
			case '"':
				end, err := stringEnd(doc, j)
				if err != nil {
					return 0, err
				}
				j = end - 1
			case '{', '[':
				depth++
			case '}', ']':
				depth--
				if depth == 0 {
					return j + 1, nil
				}
			}
		}
		return 0, errMalformed
	default: // number, true, false, null
		j := i
		for j < len(doc) {
			switch doc[j] {
			case ',', '}', ']', ' ', '\t', '\n', '\r':
				return j, nil
			}
			j++
		}
		return j, nil
	}
}

// unquote decodes a JSON string literal (quotes included).
func unquote(lit []byte) (string, error) {
	if len(lit) < 2 || lit[0] != '"' || lit[len(lit)-1] != '"' {
		return "", errMalformed
	}
	inner := lit[1 : len(lit)-1]
	if bytes.IndexByte(inner, '\\') < 0 && utf8.Valid(inner) {
		return string(inner), nil
	}
	var s string
	if err := json.Unmarshal(lit, &s); err != nil {
		return "", err
	}
	return s, nil
}

// isNull reports whether the value span is the literal null.
func isNull(v []byte) bool { return string(v) == "null" }

// isNonNegativeInteger reports whether v is a JSON integer ≥ 0 (no fraction,
// exponent or sign).
func isNonNegativeInteger(v []byte) bool {
	if len(v) == 0 {
		return false
	}
	for _, c := range v {
		if c < '0' || c > '9' {
			return false
		}
	}
	return true
}
