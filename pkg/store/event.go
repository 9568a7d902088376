package store

import (
	"encoding/base64"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"unicode/utf8"

	"github.com/sluice-gateway/sluice/pkg/jsonscan"
)

// Events cross the bus as queue messages, and both adapters encode them the
// same way so that the delivery worker decodes a Message into an Event without
// knowing which backend carried it. The encoding is one JSON object:
//
//	{"attributes":{"team":"t1","status":"success"},"body":"<the body as text>"}
//
// A body that is not valid UTF-8 travels base64-encoded as "body_base64"
// instead of "body" (SNS and SQS carry text only; a JSON log event, the usual
// body, stays readable and is not inflated by base64). Empty attributes and an
// empty body are omitted.
//
// The AWS bus publishes EncodeEvent(e) as the SNS message (setting
// e.Attributes as SNS message attributes too, for subscription filter
// policies) and subscribes the delivery queue with raw message delivery, so
// the SQS body is exactly EncodeEvent(e). The local bus sends
// EncodeEventBinary(e) to its subscription queues directly: they carry
// bytes, so the body goes as it is. DecodeEvent reads both forms.

type wireEvent struct {
	Attributes map[string]string `json:"attributes,omitempty"`
	Body       string            `json:"body,omitempty"`
	BodyBase64 []byte            `json:"body_base64,omitempty"`
}

// EncodeEvent encodes an event as the body of a bus subscription message:
// the attributes by name, then the body as a JSON string (escaped as
// encoding/json escapes it, HTML characters kept), or body_base64.
func EncodeEvent(e Event) []byte {
	valid := utf8.Valid(e.Body)
	size := 32 + len(e.Body) + len(e.Body)/8
	for k, v := range e.Attributes {
		size += len(k) + len(v) + 6
	}
	b := make([]byte, 0, size)
	b = append(b, '{')
	if len(e.Attributes) > 0 {
		b = append(b, `"attributes":{`...)
		for i, k := range slices.Sorted(maps.Keys(e.Attributes)) {
			if i > 0 {
				b = append(b, ',')
			}
			b = jsonscan.AppendString(b, k)
			b = append(b, ':')
			b = jsonscan.AppendString(b, e.Attributes[k])
		}
		b = append(b, '}')
	}
	if len(e.Body) > 0 {
		if len(e.Attributes) > 0 {
			b = append(b, ',')
		}
		if valid {
			b = append(b, `"body":`...)
			b = jsonscan.AppendString(b, e.Body)
		} else {
			b = append(b, `"body_base64":"`...)
			b = base64.StdEncoding.AppendEncode(b, e.Body)
			b = append(b, '"')
		}
	}
	return append(b, '}')
}

// EncodeEventBinary encodes an event for a queue that carries bytes, not
// text: the local bus's subscription queues, which hand the body over as
// it is instead of escaping it into a JSON string and unescaping it on
// receipt (two passes over every log event). The form: binaryEventV1, the
// number of attributes, each name and value length-prefixed (uvarints), in
// name order, then the body. DecodeEvent reads it, and EncodeEvent's form.
func EncodeEventBinary(e Event) []byte {
	return AppendEventBinary(make([]byte, 0, EventBinarySize(e)), e)
}

// EventBinarySize bounds the length of e's binary form.
func EventBinarySize(e Event) int {
	size := 1 + binary.MaxVarintLen64 + len(e.Body)
	for k, v := range e.Attributes {
		size += 2*binary.MaxVarintLen64 + len(k) + len(v)
	}
	return size
}

// AppendEventBinary appends e in EncodeEventBinary's form to b.
func AppendEventBinary(b []byte, e Event) []byte {
	b = append(b, binaryEventV1)
	b = binary.AppendUvarint(b, uint64(len(e.Attributes)))
	for _, k := range slices.Sorted(maps.Keys(e.Attributes)) {
		b = binary.AppendUvarint(b, uint64(len(k)))
		b = append(b, k...)
		b = binary.AppendUvarint(b, uint64(len(e.Attributes[k])))
		b = append(b, e.Attributes[k]...)
	}
	return append(b, e.Body...)
}

// binaryEventV1 starts EncodeEventBinary's form: a control character, which
// no JSON text (EncodeEvent's form) starts with.
const binaryEventV1 = 0x01

// maxBinaryAttributes bounds the attributes a binary event may declare (SNS
// allows 10 message attributes; the emitter sets 2, dead letters 5).
const maxBinaryAttributes = 64

// decodeEventBinary reads EncodeEventBinary's form.
func decodeEventBinary(m Message) (Event, error) {
	rest := m.Body[1:]
	bad := func(what string) (Event, error) {
		return Event{}, fmt.Errorf("store: decode event %s: bad binary form: %s", m.ID, what)
	}
	n, k := binary.Uvarint(rest)
	if k <= 0 || n > maxBinaryAttributes {
		return bad("attribute count")
	}
	rest = rest[k:]
	field := func() (string, bool) {
		l, k := binary.Uvarint(rest)
		if k <= 0 || l > uint64(len(rest)-k) {
			return "", false
		}
		s := string(rest[k : k+int(l)])
		rest = rest[k+int(l):]
		return s, true
	}
	var e Event
	if n > 0 {
		e.Attributes = make(map[string]string, n)
	}
	for range n {
		name, ok := field()
		if !ok {
			return bad("attribute name")
		}
		value, ok := field()
		if !ok {
			return bad("attribute value")
		}
		if _, dup := e.Attributes[name]; dup {
			return bad("attribute " + strconv.Quote(name) + " twice")
		}
		e.Attributes[name] = value
	}
	if len(rest) > 0 {
		e.Body = append([]byte(nil), rest...)
	}
	return e, nil
}

// DecodeEvent decodes a message received from a bus subscription queue, in
// EncodeEvent's form or EncodeEventBinary's.
func DecodeEvent(m Message) (Event, error) {
	if len(m.Body) > 0 && m.Body[0] == binaryEventV1 {
		return decodeEventBinary(m)
	}
	if e, ok := decodeEventFast(m.Body); ok {
		return e, nil
	}
	return decodeEventJSON(m)
}

// decodeEventFast decodes the form EncodeEvent writes without reflection:
// each member once, by its exact name, attribute values strings. Anything
// else (ok false) goes to encoding/json, whose reading is the reference.
func decodeEventFast(doc []byte) (e Event, ok bool) {
	var seen [3]bool
	err := jsonscan.Members(doc, func(name, value []byte) error {
		switch string(name) {
		case "attributes":
			if seen[0] {
				return errFallback
			}
			seen[0] = true
			if jsonscan.Null(value) {
				return nil
			}
			e.Attributes = map[string]string{}
			return jsonscan.Members(value, func(k, v []byte) error {
				s, ok := jsonscan.Unquote(v)
				if !ok {
					return errFallback
				}
				if _, dup := e.Attributes[string(k)]; dup {
					return errFallback
				}
				e.Attributes[string(k)] = string(s)
				return nil
			})
		case "body":
			if seen[1] {
				return errFallback
			}
			seen[1] = true
			s, ok := jsonscan.Unquote(value)
			if !ok {
				return errFallback
			}
			if len(s) > 0 {
				e.Body = s
			}
			return nil
		case "body_base64":
			if seen[2] {
				return errFallback
			}
			seen[2] = true
			return json.Unmarshal(value, &e.Body)
		}
		return errFallback
	})
	if err != nil || seen[1] && seen[2] {
		return Event{}, false
	}
	if len(e.Attributes) == 0 {
		e.Attributes = nil
	}
	return e, true
}

var errFallback = errors.New("store: event not in EncodeEvent's form")

// decodeEventJSON decodes with encoding/json.
func decodeEventJSON(m Message) (Event, error) {
	var w wireEvent
	if err := json.Unmarshal(m.Body, &w); err != nil {
		return Event{}, fmt.Errorf("store: decode event %s: %w", m.ID, err)
	}
	if w.Body != "" && w.BodyBase64 != nil {
		return Event{}, errors.New("store: decode event " + m.ID + ": both body and body_base64 set")
	}
	e := Event{Attributes: w.Attributes, Body: w.BodyBase64}
	if w.Body != "" {
		e.Body = []byte(w.Body)
	}
	return e, nil
}
