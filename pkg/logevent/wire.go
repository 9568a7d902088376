package logevent

import (
	"errors"
	"fmt"

	"github.com/sluice-gateway/sluice/pkg/jsonscan"
)

// The body of a bus event is one or more log events, each a JSON object on
// a line of its own: the emitter groups the events of one team and outcome
// this way (one event is simply its JSON), and the delivery worker reads
// them back with DecodeEvents.

// MaxEventsPerMessage bounds the log events one bus event carries.
const MaxEventsPerMessage = 1000

// marshal encodes ev (appendEvent: no HTML escapes, which only inflate
// JSON bodies).
func marshal(ev *Event) ([]byte, error) {
	b, err := appendEvent(make([]byte, 0, 1024+len(ev.Messages)+len(ev.Response)), ev)
	if err != nil {
		return nil, fmt.Errorf("encode log event %s: %w", ev.ID, err)
	}
	return b, nil
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
	var out []*Event
	for i := jsonscan.SkipSpace(body, 0); i < len(body); i = jsonscan.SkipSpace(body, i) {
		end, err := jsonscan.ValueEnd(body, i)
		if err != nil {
			return nil, fmt.Errorf("log event %d: %w", len(out)+1, err)
		}
		ev, err := decodeEvent(body[i:end])
		if err != nil {
			return nil, fmt.Errorf("log event %d: %w", len(out)+1, err)
		}
		i = end
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
