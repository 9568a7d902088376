package batchinput

import (
	"bytes"
	"encoding/json"
	"fmt"

	"github.com/sluice-gateway/sluice/pkg/api"
)

// parseLine checks one line (terminator and a trailing CR already removed)
// and fills l's request fields. It returns the reason the line is bad, or "".
//
// A line is checked in two fast passes that allocate nothing on the good
// path: valid (json.Valid's rules) over the whole line, then a walk over the top-level
// members that skips values it does not need. Member names match exactly
// (case-sensitive, as OpenAI's parser does), not as encoding/json's
// case-insensitive field matching would; the last of duplicate members wins.
func parseLine(data []byte, l *Line) string {
	first := firstNonSpace(data)
	if first < 0 {
		return "the line is empty; every line must be a JSON object"
	}
	if !valid(data) {
		var raw json.RawMessage
		err := json.Unmarshal(data, &raw)
		if se, ok := err.(*json.SyntaxError); ok {
			return fmt.Sprintf("not valid JSON: %s (at byte %d of the line)", se.Error(), se.Offset)
		}
		return "not valid JSON"
	}
	if data[first] != '{' {
		return "the line must be a JSON object"
	}
	var customID, method, url, body []byte
	walkMembers(data, first, func(key, value []byte) {
		switch string(key) {
		case `"custom_id"`:
			customID = value
		case `"method"`:
			method = value
		case `"url"`:
			url = value
		case `"body"`:
			body = value
		}
	})
	var ok bool
	switch {
	case customID == nil:
		return "missing 'custom_id'"
	case customID[0] != '"':
		return "'custom_id' must be a string, got " + jsonKind(customID)
	}
	if l.CustomID, ok = unquote(customID); !ok || l.CustomID == "" {
		return "'custom_id' must not be empty"
	}
	switch {
	case method == nil:
		return "missing 'method'"
	case method[0] != '"':
		return "'method' must be \"POST\", got " + jsonKind(method)
	}
	if l.Method, _ = unquote(method); l.Method != "POST" {
		return fmt.Sprintf("'method' must be \"POST\", got %s", api.Quote(l.Method))
	}
	switch {
	case url == nil:
		return "missing 'url'"
	case url[0] != '"':
		return "'url' must be a string, got " + jsonKind(url)
	}
	if l.URL, _ = unquote(url); !IsEndpoint(l.URL) {
		return fmt.Sprintf("'url' must be one of %s; got %s", quoteList(endpoints), api.Quote(l.URL))
	}
	switch {
	case body == nil:
		return "missing 'body'"
	case body[0] != '{':
		return "'body' must be a JSON object, got " + jsonKind(body)
	}
	l.Body = body
	return ""
}

// walkMembers calls fn with the raw key (quotes included) and raw value of
// each member of the object starting at data[i]. data must be valid JSON.
// Keys with escapes are unescaped first, so "custom\u005fid" matches too.
func walkMembers(data []byte, i int, fn func(key, value []byte)) {
	i++ // '{'
	for {
		i = skipSpace(data, i)
		if data[i] == '}' {
			return
		}
		kEnd := skipString(data, i)
		key := data[i:kEnd]
		if bytes.IndexByte(key, '\\') >= 0 {
			if s, ok := unquote(key); ok {
				key, _ = json.Marshal(s)
			}
		}
		i = skipSpace(data, kEnd) + 1 // ':'
		i = skipSpace(data, i)
		vEnd := skipValue(data, i)
		fn(key, data[i:vEnd])
		i = skipSpace(data, vEnd)
		if data[i] == '}' {
			return
		}
		i++ // ','
	}
}

func isSpace(c byte) bool { return c == ' ' || c == '\t' || c == '\r' || c == '\n' }

func skipSpace(data []byte, i int) int {
	for i < len(data) && isSpace(data[i]) {
		i++
	}
	return i
}

func firstNonSpace(data []byte) int {
	if i := skipSpace(data, 0); i < len(data) {
		return i
	}
	return -1
}

// skipString returns the index just past the string starting at data[i].
// It jumps from quote to quote (bytes.IndexByte is vectorised): a quote ends
// the string unless an odd run of backslashes escapes it.
func skipString(data []byte, i int) int {
	for j := i + 1; ; {
		k := bytes.IndexByte(data[j:], '"')
		if k < 0 {
			return len(data)
		}
		q := j + k
		bs := 0
		for p := q - 1; p > i && data[p] == '\\'; p-- {
			bs++
		}
		if bs%2 == 0 {
			return q + 1
		}
		j = q + 1
	}
}

// skipValue returns the index just past the (valid) value at data[i].
func skipValue(data []byte, i int) int {
	switch data[i] {
	case '"':
		return skipString(data, i)
	case '{', '[':
		depth := 0
		for ; i < len(data); i++ {
			switch data[i] {
			case '"':
				i = skipString(data, i) - 1
			case '{', '[':
				depth++
			case '}', ']':
				if depth--; depth == 0 {
					return i + 1
				}
			}
		}
		return len(data)
	}
	for i < len(data) && !isSpace(data[i]) && data[i] != ',' && data[i] != '}' && data[i] != ']' {
		i++
	}
	return i
}

// unquote decodes a raw JSON string value.
func unquote(raw []byte) (string, bool) {
	if bytes.IndexByte(raw, '\\') < 0 {
		return string(raw[1 : len(raw)-1]), true
	}
	var s string
	if err := json.Unmarshal(raw, &s); err != nil {
		return "", false
	}
	return s, true
}

// jsonKind names the type of a raw JSON value for an error message.
func jsonKind(raw []byte) string {
	switch raw[0] {
	case '"':
		return "a string"
	case '{':
		return "an object"
	case '[':
		return "an array"
	case 't', 'f':
		return "a boolean"
	case 'n':
		return "null"
	}
	return "a number"
}
