package delivery

import (
	"fmt"

	"github.com/sluice-gateway/sluice/pkg/logevent"
	"github.com/sluice-gateway/sluice/pkg/store"
)

// Attributes of a dead letter (a bus event the delivery worker sends to the
// dead-letter queue), besides logevent.AttrTeam.
const (
	// AttrCallback names the one callback (Callback.ID) a dead letter's
	// events are for: re-driven, they go to it only.
	AttrCallback = "callback"
	// AttrError is the last error, for the operator.
	AttrError = "error"
	// AttrReceives is how many times the events' message was received.
	AttrReceives = "receives"
)

// Message is a delivery queue message, decoded.
type Message struct {
	Events []*logevent.Event
	// Callback, when set, is the one callback the events go to: the message
	// is a re-driven dead letter.
	Callback string
	// Name is the emitter's name of the message (logevent.AttrMessage),
	// empty when it has none: spend counts a named message once by it.
	Name string
}

// DecodeMessage decodes a delivery queue message: a bus event
// (store.EncodeEvent) whose body holds one or more log events
// (logevent.DecodeEvents), as the emitter publishes it or as the delivery
// worker dead-letters it.
func DecodeMessage(m store.Message) (Message, error) {
	e, err := store.DecodeEvent(m)
	if err != nil {
		return Message{}, err
	}
	events, err := logevent.DecodeEvents(e.Body)
	if err != nil {
		return Message{}, fmt.Errorf("message %s: %w", m.ID, err)
	}
	return Message{Events: events, Callback: e.Attributes[AttrCallback], Name: e.Attributes[logevent.AttrMessage]}, nil
}
