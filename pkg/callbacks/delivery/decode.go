package delivery

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"

	"github.com/sluice-gateway/sluice/pkg/logevent"
	"github.com/sluice-gateway/sluice/pkg/store"
)

// MaxEventsPerMessage bounds the log events one bus message may carry.
const MaxEventsPerMessage = 1000

// EncodeEvents encodes log events as one bus event body: each event as a
// JSON object on its own line (one event is simply its JSON). The emitter
// groups several events into one publish this way.
func EncodeEvents(events []*logevent.Event) ([]byte, error) {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	for _, ev := range events {
		if err := enc.Encode(ev); err != nil {
			return nil, fmt.Errorf("encode log event %s: %w", ev.ID, err)
		}
	}
	return bytes.TrimSuffix(buf.Bytes(), []byte("\n")), nil
}

// DecodeMessage decodes a delivery queue message: a bus event
// (store.EncodeEvent) whose body holds one or more log events as JSON
// objects, whitespace- or newline-separated. Every event needs an id.
func DecodeMessage(m store.Message) ([]*logevent.Event, error) {
	e, err := store.DecodeEvent(m)
	if err != nil {
		return nil, err
	}
	return decodeEvents(m.ID, e.Body)
}

func decodeEvents(msgID string, body []byte) ([]*logevent.Event, error) {
	dec := json.NewDecoder(bytes.NewReader(body))
	var out []*logevent.Event
	for {
		ev := new(logevent.Event)
		err := dec.Decode(ev)
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return nil, fmt.Errorf("message %s: log event %d: %w", msgID, len(out)+1, err)
		}
		if ev.ID == "" {
			return nil, fmt.Errorf("message %s: log event %d has no id", msgID, len(out)+1)
		}
		if len(out) == MaxEventsPerMessage {
			return nil, fmt.Errorf("message %s: more than %d log events", msgID, MaxEventsPerMessage)
		}
		out = append(out, ev)
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("message %s: no log event", msgID)
	}
	return out, nil
}
