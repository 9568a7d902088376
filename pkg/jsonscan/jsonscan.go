// Package jsonscan walks JSON documents without decoding them: it hands a
// caller the spans of the members and elements it asks for, as slices of the
// document, in one pass over its bytes. Strings are skipped with their
// escapes, containers matched bracket for bracket, and a run of numbers (the
// hot case: an embedding vector is 20 KB of them) crossed with vectorised
// byte searches.
//
// It checks structure, not every value: a document broken inside a value the
// caller only skips (a misspelt literal, a malformed number) may be accepted.
// What a caller uses it checks where it uses it (Count, NumberEnd, Unquote),
// or it runs Valid first when the whole document must be JSON. A fuzz
// test holds it to encoding/json: every object and array encoding/json reads,
// Members and Elements read with the same values, byte for byte.
package jsonscan

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"errors"
	"math"
	"math/bits"
	"strconv"
	"unicode/utf8"
)

// ErrSyntax is returned for a document whose structure is not JSON.
var ErrSyntax = errors.New("jsonscan: malformed JSON")

// MaxDepth bounds the nesting of a value; deeper is ErrSyntax.
const MaxDepth = 256

// Members calls f with the name and raw value of each member of the JSON
// object doc, in order; only white space may surround the object. A name
// given twice is passed twice (a caller keeping the last copy matches
// encoding/json). name is decoded (escapes resolved) and, like value, valid
// only during the call; value is a slice of doc (Span gives its offsets). An
// error from f stops the walk and is returned.
func Members(doc []byte, f func(name, value []byte) error) error {
	_, _, err := walkMembers(doc, f, nil, false, false)
	return err
}

// MembersChecked is Members that also checks each value as Valid does, in
// the same pass: valid true means doc is JSON exactly as Valid would say, so
// a caller that needs both (the chat meter) crosses the document once, not
// twice. valid false means not known: the caller runs Valid.
func MembersChecked(doc []byte, f func(name, value []byte) error) (valid bool, err error) {
	_, valid, err = walkMembers(doc, f, nil, true, false)
	return valid, err
}

// Delimit walks a member's value itself, as MembersCheckedBy's caller reads
// it: rest is the document from the value's first byte on. It returns the
// value's length and whether it checked the value as Valid would, or n = 0
// to leave the value to the walk (a value it cannot read: the walk then
// delimits and checks it as MembersChecked does).
type Delimit func(name, rest []byte) (n int, valid bool)

// MembersCheckedBy is MembersChecked where delimit may cross a member's
// value itself, reading it as it goes (a request's messages, an answer's
// choices), so that the value is crossed once, not checked by the walk and
// then read again. f is then called with the value delimit delimited.
func MembersCheckedBy(doc []byte, f func(name, value []byte) error, delimit Delimit) (valid bool, err error) {
	_, valid, err = walkMembers(doc, f, delimit, true, false)
	return valid, err
}

// MembersBy is Members where delimit may cross a member's value itself, as
// for MembersCheckedBy, without checking the values (delimit's valid is
// ignored): a caller that reads an object's members but keeps nothing of it
// (the chat meter of an answer nobody logs) skips the check's cost.
func MembersBy(doc []byte, f func(name, value []byte) error, delimit Delimit) error {
	_, _, err := walkMembers(doc, f, delimit, false, false)
	return err
}

// MembersPrefixChecked is MembersPrefix that also checks the object as
// MembersChecked does: valid true means doc[:end] is JSON exactly as Valid
// would say (false: not known).
func MembersPrefixChecked(doc []byte, f func(name, value []byte) error) (end int, valid bool, err error) {
	return walkMembers(doc, f, nil, true, true)
}

// MembersPrefix is Members over the object that starts doc (white space
// before it allowed), returning the index just past its closing brace;
// what follows is not read. An array of objects (a request's messages, an
// answer's choices) is so read in one crossing of each element, rather
// than delimited first (Elements, ValueEnd) and walked again.
func MembersPrefix(doc []byte, f func(name, value []byte) error) (end int, err error) {
	end, _, err = walkMembers(doc, f, nil, false, true)
	return end, err
}

// MembersPrefixBy is MembersPrefix where delimit may cross a member's value
// itself, as for MembersBy: an object read where it starts in a larger
// document (an answer's usage), and the objects in it (the usage's
// details), are so crossed once, not delimited first and walked again.
func MembersPrefixBy(doc []byte, f func(name, value []byte) error, delimit Delimit) (end int, err error) {
	end, _, err = walkMembers(doc, f, delimit, false, true)
	return end, err
}

// walkMembers walks the object at the start of doc; with prefix, what
// follows it is left unread and end is the index past it.
func walkMembers(doc []byte, f func(name, value []byte) error, delimit Delimit, check, prefix bool) (end int, valid bool, err error) {
	i := SkipSpace(doc, 0)
	if i >= len(doc) || doc[i] != '{' {
		return 0, false, errors.New("jsonscan: not a JSON object")
	}
	i = SkipSpace(doc, i+1)
	if i < len(doc) && doc[i] == '}' {
		end, err := closeObject(doc, i+1, prefix)
		return end, check && err == nil, err
	}
	valid = check
	for {
		if i >= len(doc) || doc[i] != '"' {
			return 0, false, ErrSyntax
		}
		// A plain name (ASCII, no escape: as APIs write them) is its bytes,
		// found in one pass; others are delimited, then decoded.
		var name []byte
		nameEnd := plainNameEnd(doc, i)
		if nameEnd > 0 {
			name = doc[i+1 : nameEnd-1]
		} else if name, nameEnd, err = quotedName(doc, i); err != nil {
			return 0, false, err
		}
		i = SkipSpace(doc, nameEnd)
		if i >= len(doc) || doc[i] != ':' {
			return 0, false, ErrSyntax
		}
		i = SkipSpace(doc, i+1)
		valueEnd := -1
		if delimit != nil && i < len(doc) {
			if n, ok := delimit(name, doc[i:]); n > 0 && n <= len(doc)-i {
				valueEnd = i + n
				valid = valid && ok
			}
		}
		if valueEnd < 0 && valid && i < len(doc) && (doc[i] == '{' || doc[i] == '[' || doc[i] == '"') {
			// A container or string Valid accepts ends where ValueEnd says.
			// A string (most values) is checked straight away.
			if doc[i] == '"' {
				valueEnd = validStringEnd(doc, i)
			} else {
				valueEnd = validValueEnd(doc, i)
			}
		}
		if valueEnd < 0 {
			if valueEnd, err = ValueEnd(doc, i); err != nil {
				return 0, false, err
			}
			if valid && (doc[i] == '{' || doc[i] == '[' || doc[i] == '"' || !validScalar(doc[i:valueEnd])) {
				valid = false
			}
		}
		if err := f(name, doc[i:valueEnd]); err != nil {
			return 0, false, err
		}
		i = SkipSpace(doc, valueEnd)
		if i >= len(doc) {
			return 0, false, ErrSyntax
		}
		switch doc[i] {
		case ',':
			i = SkipSpace(doc, i+1)
		case '}':
			end, err := closeObject(doc, i+1, prefix)
			return end, valid && err == nil, err
		default:
			return 0, false, ErrSyntax
		}
	}
}

// closeObject returns i, the index past an object's (or array's) closing
// bracket, after checking (unless prefix) that only white space follows.
func closeObject(doc []byte, i int, prefix bool) (int, error) {
	if prefix {
		return i, nil
	}
	if err := end(doc, i); err != nil {
		return 0, err
	}
	return i, nil
}

// validScalar reports whether tok is exactly one JSON literal or number.
func validScalar(tok []byte) bool {
	switch string(tok) {
	case "true", "false", "null":
		return true
	}
	return ValidNumber(tok)
}

// Elements calls f with the raw value of each element of the JSON array doc,
// in order; only white space may surround the array. value is a slice of doc.
func Elements(doc []byte, f func(value []byte) error) error {
	return ElementsPrefix(doc, func(rest []byte) (int, error) {
		n, err := ValueEnd(rest, 0)
		if err != nil {
			return 0, err
		}
		return n, f(rest[:n])
	})
}

// ElementsPrefix is Elements for a caller that delimits each element as it
// reads it (MembersPrefix): f gets the document from the element's first
// byte on and returns the element's length, which must be positive.
func ElementsPrefix(doc []byte, f func(rest []byte) (int, error)) error {
	_, err := walkElements(doc, f, false)
	return err
}

// ElementsPrefixEnd is ElementsPrefix over the array that starts doc
// (white space before it allowed), returning the index just past its
// closing bracket; what follows is not read. The array's own syntax (its
// brackets, commas and white space) is checked as Valid does: the array is
// JSON if each element f delimits is.
func ElementsPrefixEnd(doc []byte, f func(rest []byte) (int, error)) (end int, err error) {
	return walkElements(doc, f, true)
}

// walkElements walks the array at the start of doc; with prefix, what
// follows it is left unread and end is the index past it.
func walkElements(doc []byte, f func(rest []byte) (int, error), prefix bool) (int, error) {
	i := SkipSpace(doc, 0)
	if i >= len(doc) || doc[i] != '[' {
		return 0, errors.New("jsonscan: not a JSON array")
	}
	i = SkipSpace(doc, i+1)
	if i < len(doc) && doc[i] == ']' {
		return closeObject(doc, i+1, prefix)
	}
	for {
		if i >= len(doc) {
			return 0, ErrSyntax
		}
		n, err := f(doc[i:])
		if err != nil {
			return 0, err
		}
		if n <= 0 || n > len(doc)-i {
			return 0, ErrSyntax
		}
		i = SkipSpace(doc, i+n)
		if i >= len(doc) {
			return 0, ErrSyntax
		}
		switch doc[i] {
		case ',':
			i = SkipSpace(doc, i+1)
		case ']':
			return closeObject(doc, i+1, prefix)
		default:
			return 0, ErrSyntax
		}
	}
}

// Span returns the offsets in doc of value, a slice of doc that Members or
// Elements handed out: doc[start:end] is value.
func Span(doc, value []byte) (start, end int) {
	start = cap(doc) - cap(value)
	return start, start + len(value)
}

// Null reports whether a raw value is absent or JSON null.
func Null(value []byte) bool { return len(value) == 0 || string(value) == "null" }

// Count reads a raw value as a token count: a JSON number that is a
// non-negative integer (1e3 and 6.0 are accepted, as encoding/json would
// decode them into a float) below 2^40.
func Count(value []byte) (int64, bool) {
	if !ValidNumber(value) {
		return 0, false
	}
	if n, ok := smallInt(value); ok {
		return n, true
	}
	f, err := strconv.ParseFloat(string(value), 64)
	if err != nil || f < 0 || f >= 1<<40 || f != math.Trunc(f) {
		return 0, false
	}
	return int64(f), true
}

// smallInt reads the common case of Count, plain digits, without ParseFloat.
func smallInt(v []byte) (int64, bool) {
	if len(v) > 12 {
		return 0, false
	}
	n, ok := PlainInt(v)
	return n, ok && n < 1<<40
}

// PlainInt reads a JSON number of 1 to 18 digits without a leading zero (0
// itself aside) — one that fits an int64 as it is; any other form is not
// read (false), for the caller's full decode.
func PlainInt(v []byte) (int64, bool) {
	if len(v) == 0 || len(v) > 18 || (v[0] == '0' && len(v) > 1) {
		return 0, false
	}
	var n int64
	for _, c := range v {
		if c < '0' || c > '9' {
			return 0, false
		}
		n = n*10 + int64(c-'0')
	}
	return n, true
}

// String decodes a raw value that must be a JSON string.
func String(value []byte) (string, error) {
	if len(value) < 2 || value[0] != '"' {
		return "", ErrSyntax
	}
	if e, err := StringEnd(value, 0); err != nil || e != len(value) {
		return "", ErrSyntax
	}
	inner := value[1 : len(value)-1]
	if bytes.IndexByte(inner, '\\') < 0 && utf8.Valid(inner) {
		return string(inner), nil
	}
	var s string
	if err := json.Unmarshal(value, &s); err != nil {
		return "", ErrSyntax
	}
	return s, nil
}

// quotedName returns the name whose literal starts at doc[i] ('"') and
// is not plain (plainNameEnd), and the index past the literal: one with
// escapes or invalid UTF-8 (rare) is decoded as encoding/json does.
func quotedName(doc []byte, i int) (name []byte, end int, err error) {
	if end, err = StringEnd(doc, i); err != nil {
		return nil, 0, err
	}
	lit := doc[i:end]
	if inner := lit[1 : len(lit)-1]; bytes.IndexByte(inner, '\\') < 0 && utf8.Valid(inner) {
		return inner, end, nil
	}
	var s string
	if err := json.Unmarshal(lit, &s); err != nil { // escapes decoded by encoding/json: checked
		return nil, 0, ErrSyntax
	}
	return []byte(s), end, nil
}

// plainNameEnd returns the index past the string literal starting at
// doc[i] when its content is plain ASCII (no escape, no control
// character), else 0. Its word test is plainRun's with bytes over 0x7f
// flagged too: the lowest flagged byte is still exact.
func plainNameEnd(doc []byte, i int) int {
	const ones, highs = 0x0101010101010101, 0x8080808080808080
	j := i + 1
	for ; j+8 <= len(doc); j += 8 {
		v := binary.LittleEndian.Uint64(doc[j:])
		q, e := v^(ones*'"'), v^(ones*'\\')
		if m := ((q-ones)&^q | (e-ones)&^e | (v-ones*0x20)&^v | v) & highs; m != 0 {
			j += bits.TrailingZeros64(m) / 8
			break
		}
	}
	for ; j < len(doc); j++ {
		switch c := doc[j]; {
		case c == '"':
			return j + 1
		case c < 0x20 || c >= utf8.RuneSelf || c == '\\':
			return 0
		}
	}
	return 0
}

// end checks that only white space follows the top-level value.
func end(doc []byte, i int) error {
	if SkipSpace(doc, i) != len(doc) {
		return ErrSyntax
	}
	return nil
}

// SkipSpace returns the index of the first byte at or after i that is not
// JSON white space (len(doc) if none).
func SkipSpace(doc []byte, i int) int {
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

// StringEnd returns the index just past the string starting at doc[i] ('"').
// A control character inside it, or no closing quote, is ErrSyntax.
func StringEnd(doc []byte, i int) (int, error) {
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
	i := plainRun(b, 0)
	if i == shortRun {
		i = longRun(b, i)
	}
	for ; i < len(b); i++ {
		c := b[i]
		if c == '"' || c == '\\' {
			return i
		}
		if c < 0x20 {
			return -1 // a control character cannot be in a string
		}
	}
	return -1
}

// plainRun returns the index of the first stop byte of a string ('"',
// '\\' or a control character) at or after b[i] within the 8-byte words it
// reads, or where fewer than 8 bytes remain, or i+shortRun: the bytes
// before it are plain string content. The test is the classic
// has-zero-byte and has-less-than bit tricks, whose lowest flagged byte is
// exact (a borrow only flags bytes above a true one), so the stop byte is
// found without a byte loop; callers scan on from the returned index byte
// by byte, and go on with longRun when it is i+shortRun.
func plainRun(b []byte, i int) int {
	const ones, highs = 0x0101010101010101, 0x8080808080808080
	for end := i + shortRun; i+8 <= len(b) && i < end; i += 8 {
		v := binary.LittleEndian.Uint64(b[i:])
		q, e := v^(ones*'"'), v^(ones*'\\')
		if m := ((q-ones)&^q | (e-ones)&^e | (v-ones*0x20)&^v) & highs; m != 0 {
			return i + bits.TrailingZeros64(m)/8
		}
	}
	return i
}

// shortRun is how far plainRun looks a word at a time: most strings
// (member names, roles, model names) end within it, found inline, without
// longRun's calls.
const shortRun = 64

// longRun is plainRun past a string's first words: the rest of a long
// string's text, most of a chat request's and answer's bytes. Quotes and
// backslashes are found with bytes.IndexByte (vectorised in the runtime) a
// window at a time — the window bounds the work when escapes are dense and
// the closing quote far — and only the control-character test is left to
// a word-at-a-time loop. It returns the index of the first stop byte, or
// len(b).
func longRun(b []byte, i int) int {
	const window = 512
	for i < len(b) {
		w := b[i:min(i+window, len(b))]
		n := len(w)
		if q := bytes.IndexByte(w, '"'); q >= 0 {
			n = q
		}
		if e := bytes.IndexByte(w[:n], '\\'); e >= 0 {
			n = e
		}
		if c := controlRun(w[:n]); c < n {
			return i + c
		}
		i += n
		if n < len(w) {
			return i // a quote or an escape
		}
	}
	return i
}

// controlRun returns the index of the first control character of b, or
// len(b).
func controlRun(b []byte) int {
	const ones, highs = 0x0101010101010101, 0x8080808080808080
	// Slicing the rest rather than indexing from i lets the compiler drop
	// the loads' bounds checks.
	rest := b
	for len(rest) >= 16 {
		v, w := binary.LittleEndian.Uint64(rest), binary.LittleEndian.Uint64(rest[8:])
		if ((v-ones*0x20)&^v|(w-ones*0x20)&^w)&highs != 0 {
			break
		}
		rest = rest[16:]
	}
	if len(rest) >= 8 {
		if v := binary.LittleEndian.Uint64(rest); (v-ones*0x20)&^v&highs == 0 {
			rest = rest[8:]
		}
	}
	i := len(b) - len(rest)
	for ; i < len(b); i++ {
		if b[i] < 0x20 {
			return i
		}
	}
	return i
}

// structural marks the bytes that open, close or quote inside a container.
var structural = [256]bool{'"': true, '[': true, ']': true, '{': true, '}': true}

// ValueEnd returns the index just past the value starting at doc[i]: a
// string, an object or array (brackets matched, nesting at most MaxDepth), or
// a literal or number (a run of the bytes those are made of).
func ValueEnd(doc []byte, i int) (int, error) {
	if i >= len(doc) {
		return 0, ErrSyntax
	}
	switch c := doc[i]; c {
	case '"':
		return StringEnd(doc, i)
	case '{', '[':
		// One bit per open container, set for an object: 32 bytes of
		// stack, where a byte each grew a relay goroutine's stack.
		var (
			open  [MaxDepth / 64]uint64
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
				e, err := StringEnd(doc, j)
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
				if depth == MaxDepth {
					return 0, ErrSyntax
				}
				if c == '{' {
					open[depth/64] |= 1 << (depth % 64)
				} else {
					open[depth/64] &^= 1 << (depth % 64)
				}
				depth++
			case '}', ']':
				if depth == 0 || (open[(depth-1)/64]&(1<<((depth-1)%64)) != 0) != (c == '}') {
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
	// An array whose first element is a container or a string is not flat:
	// no search needed (the content blocks of a chat answer, say).
	if j := SkipSpace(doc, i+1); j < len(doc) && (doc[j] == '{' || doc[j] == '[' || doc[j] == '"') {
		return 0
	}
	k := bytes.IndexByte(doc[i+1:], ']')
	if k < 0 {
		return 0
	}
	inner := doc[i+1 : i+1+k]
	// Forward searches are vectorised, backward ones are not: ask first
	// whether anything structural is there at all (the hot case: no).
	if bytes.IndexByte(inner, '[') < 0 && bytes.IndexByte(inner, '{') < 0 &&
		bytes.IndexByte(inner, '"') < 0 && bytes.IndexByte(inner, '}') < 0 {
		return i + 2 + k
	}
	last := max(bytes.LastIndexByte(inner, '['), bytes.LastIndexByte(inner, '{'),
		bytes.LastIndexByte(inner, '"'), bytes.LastIndexByte(inner, '}'))
	f.close, f.last = i+1+k, i+1+last
	return 0
}

func isNumberByte(c byte) bool {
	return c >= '0' && c <= '9' || c == '-' || c == '+' || c == '.' || c == 'e' || c == 'E'
}

// validMaxDepth is encoding/json's nesting limit, which Valid keeps.
const validMaxDepth = 10000

// Valid reports whether doc is one JSON value with only white space around
// it, exactly as json.Valid does — strings are not checked for UTF-8, and
// nesting may go 10000 deep, as there — in a fraction of its time: one pass
// of plain byte loops instead of encoding/json's state machine, and nothing
// allocated.
func Valid(doc []byte) bool {
	var open [validMaxDepth/64 + 1]uint64
	i := validEnd(doc, SkipSpace(doc, 0), validMaxDepth, open[:])
	return i >= 0 && SkipSpace(doc, i) == len(doc)
}

// validValueEnd is validEnd for a value nested at most MaxDepth deep (a
// member's, in a checked walk): its stack of open containers is 40 bytes,
// not Valid's 1.3 KB, cleared on every call.
func validValueEnd(doc []byte, i int) int {
	var open [MaxDepth/64 + 1]uint64
	return validEnd(doc, i, MaxDepth, open[:])
}

// validEnd returns the index just past the JSON value starting at doc[i],
// nested at most maxDepth deep, or -1 if none starts there. open holds one
// bit per level of nesting, set for an object: at least maxDepth bits.
func validEnd(doc []byte, i, maxDepth int, open []uint64) int {
	depth := 0
	for {
		// doc[i] starts a value.
		if i >= len(doc) {
			return -1
		}
		switch c := doc[i]; c {
		case '{', '[':
			if depth == maxDepth {
				return -1
			}
			if c == '{' {
				open[depth/64] |= 1 << (depth % 64)
			} else {
				open[depth/64] &^= 1 << (depth % 64)
			}
			depth++
			i = SkipSpace(doc, i+1)
			if i < len(doc) && doc[i] == c+2 { // '{'+2 == '}', '['+2 == ']'
				depth--
				i++
				break
			}
			if c == '{' {
				if i = validName(doc, i); i < 0 {
					return -1
				}
			}
			continue
		case '"':
			if i = validStringEnd(doc, i); i < 0 {
				return -1
			}
		case 't':
			if i = literalEnd(doc, i, "true"); i < 0 {
				return -1
			}
		case 'f':
			if i = literalEnd(doc, i, "false"); i < 0 {
				return -1
			}
		case 'n':
			if i = literalEnd(doc, i, "null"); i < 0 {
				return -1
			}
		default:
			if i = NumberEnd(doc, i); i < 0 {
				return -1
			}
		}
		// A value ended: close the containers it ends, up to the next one.
		for {
			if depth == 0 {
				return i
			}
			i = SkipSpace(doc, i)
			if i >= len(doc) {
				return -1
			}
			object := open[(depth-1)/64]&(1<<((depth-1)%64)) != 0
			c := doc[i]
			if c == ',' {
				i = SkipSpace(doc, i+1)
				if object {
					if i = validName(doc, i); i < 0 {
						return -1
					}
				}
				break
			}
			if object && c != '}' || !object && c != ']' {
				return -1
			}
			depth--
			i++
		}
	}
}

// validName checks a member's name and its colon at doc[i] and returns where
// its value starts, or -1.
func validName(doc []byte, i int) int {
	if i >= len(doc) || doc[i] != '"' {
		return -1
	}
	if i = validStringEnd(doc, i); i < 0 {
		return -1
	}
	if i = SkipSpace(doc, i); i >= len(doc) || doc[i] != ':' {
		return -1
	}
	return SkipSpace(doc, i+1)
}

// validStringEnd returns the index just past the string at doc[i] ('"'),
// its escapes checked, or -1.
func validStringEnd(doc []byte, i int) int {
	j := plainRun(doc, i+1)
	if j-i-1 == shortRun {
		j = longRun(doc, j)
	}
	for ; j < len(doc); j++ {
		if !stringStop[doc[j]] {
			continue
		}
		switch c := doc[j]; {
		case c == '"':
			return j + 1
		case c < 0x20:
			return -1
		default: // '\\'
			j++
			if j >= len(doc) {
				return -1
			}
			switch doc[j] {
			case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
			case 'u':
				if j+4 >= len(doc) || !isHex(doc[j+1]) || !isHex(doc[j+2]) || !isHex(doc[j+3]) || !isHex(doc[j+4]) {
					return -1
				}
				j += 4
			default:
				return -1
			}
			if k := plainRun(doc, j+1); k-j-1 == shortRun {
				j = longRun(doc, k) - 1
			} else {
				j = k - 1
			}
		}
	}
	return -1
}

// stringStop marks the bytes a string's scan stops at: its end, an escape,
// and the control characters it may not hold.
var stringStop = func() (t [256]bool) {
	for c := range 0x20 {
		t[c] = true
	}
	t['"'], t['\\'] = true, true
	return t
}()

func isHex(c byte) bool { return c >= '0' && c <= '9' || c >= 'a' && c <= 'f' || c >= 'A' && c <= 'F' }

// literalEnd returns the index just past lit at doc[i], or -1.
func literalEnd(doc []byte, i int, lit string) int {
	if len(doc)-i < len(lit) || string(doc[i:i+len(lit)]) != lit {
		return -1
	}
	return i + len(lit)
}

// ValidNumber reports whether tok is exactly one JSON number.
func ValidNumber(tok []byte) bool { return NumberEnd(tok, 0) == len(tok) }

// NumberEnd returns the index just past the JSON number starting at b[i],
// -?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)?, or -1 if none starts there.
// What follows the number is the caller's to check.
func NumberEnd(b []byte, i int) int {
	if i < len(b) && b[i] == '-' {
		i++
	}
	switch {
	case i < len(b) && b[i] == '0':
		i++
	case i < len(b) && b[i] >= '1' && b[i] <= '9':
		i = digits(b, i+1)
	default:
		return -1
	}
	if i < len(b) && b[i] == '.' {
		d := digits(b, i+1)
		if d == i+1 {
			return -1
		}
		i = d
	}
	if i < len(b) && (b[i] == 'e' || b[i] == 'E') {
		i++
		if i < len(b) && (b[i] == '+' || b[i] == '-') {
			i++
		}
		d := digits(b, i)
		if d == i {
			return -1
		}
		i = d
	}
	return i
}

func digits(b []byte, i int) int {
	for i < len(b) && b[i] >= '0' && b[i] <= '9' {
		i++
	}
	return i
}
