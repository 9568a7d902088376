package store

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"unicode/utf8"
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

// EncodeEvent encodes an event as the body of a bus subscription message.
func EncodeEvent(e Event) []byte {
	w := wireEvent{Attributes: e.Attributes}
	if utf8.Valid(e.Body) {
		w.Body = string(e.Body)
	} else {
		w.BodyBase64 = e.Body
	}
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false) // bodies are JSON; \u003c escapes only inflate them
	if err := enc.Encode(w); err != nil {
		// Strings, bytes and a map of strings always encode.
		panic(fmt.Sprintf("store: encode event: %v", err))
	}
	return bytes.TrimSuffix(buf.Bytes(), []byte("\n"))
}

// DecodeEvent decodes a message received from a bus subscription queue.
func DecodeEvent(m Message) (Event, error) {
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
