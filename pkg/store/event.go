package store

import (
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
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
// the SQS body is exactly EncodeEvent(e). The local bus sends EncodeEvent(e)
// to its subscription queues directly.

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

// DecodeEvent decodes a message received from a bus subscription queue.
func DecodeEvent(m Message) (Event, error) {
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
