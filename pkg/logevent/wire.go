package logevent

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
)

// The body of a bus event is one or more log events, each a JSON object on
// a line of its own: the emitter groups the events of one team and outcome
// this way (one event is simply its JSON), and the delivery worker reads
// them back with DecodeEvents.

// MaxEventsPerMessage bounds the log events one bus event carries.
const MaxEventsPerMessage = 1000

// marshal encodes ev without HTML escapes (bodies are JSON; \u003c only
// inflates them).
func marshal(ev *Event) ([]byte, error) {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(ev); err != nil {
		return nil, fmt.Errorf("encode log event %s: %w", ev.ID, err)
	}
	return bytes.TrimSuffix(buf.Bytes(), []byte("\n")), nil
}

// EncodeEvents encodes events as one bus event body.
func EncodeEvents(events []*Event) ([]byte, error) {
	var body []byte
	for i, ev := range events {
		line, err := marshal(ev)
		if err != nil {
			return nil, err
		}
		if i > 0 {
			body = append(body, '\n')
		}
		body = append(body, line...)
	}
	return body, nil
}

// DecodeEvents decodes a bus event body: one or more log events as JSON
// objects, whitespace- or newline-separated, at most MaxEventsPerMessage,
// each with an id.
func DecodeEvents(body []byte) ([]*Event, error) {
	dec := json.NewDecoder(bytes.NewReader(body))
	var out []*Event
	for {
		ev := new(Event)
		err := dec.Decode(ev)
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return nil, fmt.Errorf("log event %d: %w", len(out)+1, err)
		}
		if ev.ID == "" {
			return nil, fmt.Errorf("log event %d has no id", len(out)+1)
		}
		if len(out) == MaxEventsPerMessage {
			return nil, fmt.Errorf("more than %d log events", MaxEventsPerMessage)
		}
		out = append(out, ev)
	}
	if len(out) == 0 {
		return nil, errors.New("no log event")
	}
	return out, nil
}
