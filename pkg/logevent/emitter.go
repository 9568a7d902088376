package logevent

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"log/slog"

	"github.com/sluice-gateway/sluice/pkg/store"
)

// Attributes set on every published event; subscribers filter on them.
const (
	AttrTeam   = "team_id"
	AttrStatus = "status"
)

// ClaimCheckPrefix is the blob key prefix for bodies too large for the bus.
const ClaimCheckPrefix = "claimcheck/"

// Listeners says whether anyone wants an event: a callback of its team, or a
// gateway-wide one, for its status (StatusSuccess or StatusFailure). Events
// nobody listens to are not published. It is asked for every event, before
// the publish starts, so implementations answer from a cache
// (pkg/callbacks.Listeners).
type Listeners interface {
	Listening(ctx context.Context, teamID, status string) (bool, error)
}

// ListeningFunc is a function used as Listeners.
type ListeningFunc func(ctx context.Context, teamID, status string) (bool, error)

// Listening calls f.
func (f ListeningFunc) Listening(ctx context.Context, teamID, status string) (bool, error) {
	return f(ctx, teamID, status)
}

// Emitter publishes log events on the bus.
type Emitter struct {
	bus        store.Bus
	blobs      store.Blobs
	listeners  Listeners
	claimCheck int // bodies above this many bytes go to the blob store
}

// NewEmitter builds an emitter. listeners may be nil: nobody listens.
func NewEmitter(bus store.Bus, blobs store.Blobs, listeners Listeners, claimCheckBytes int) *Emitter {
	return &Emitter{bus: bus, blobs: blobs, listeners: listeners, claimCheck: claimCheckBytes}
}

// Start begins publishing ev and returns a function that waits for the
// publish to finish. A Lambda is frozen once it answers, so the handler must
// call the returned function before it returns; meanwhile it can write its
// answer. Whether anyone listens is asked first, synchronously (the answer
// is cached); nothing is started for an event nobody wants. Failures are
// logged, never returned: logging must not fail a call.
func (e *Emitter) Start(ctx context.Context, ev *Event) (wait func()) {
	if e == nil || e.listeners == nil {
		return noWait
	}
	// The request may be cancelled (client gone) while we publish: keep going.
	ctx = context.WithoutCancel(ctx)
	team := ev.Metadata.UserAPIKeyTeamID
	ok, err := e.listeners.Listening(ctx, team, ev.Status)
	if err != nil {
		slog.ErrorContext(ctx, "log event not published: its listeners could not be read", "event_id", ev.ID, "team", team, "error", err)
		return noWait
	}
	if !ok {
		return noWait
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		if err := e.publish(ctx, ev); err != nil {
			slog.ErrorContext(ctx, "log event not published", "event_id", ev.ID, "team", team, "error", err)
		}
	}()
	return func() { <-done }
}

func noWait() {}

// Emit publishes ev and waits for it.
func (e *Emitter) Emit(ctx context.Context, ev *Event) { e.Start(ctx, ev)() }

func (e *Emitter) publish(ctx context.Context, ev *Event) error {
	body, err := e.encode(ctx, ev)
	if err != nil {
		return err
	}
	return e.bus.Publish(ctx, store.Event{
		Attributes: map[string]string{AttrTeam: ev.Metadata.UserAPIKeyTeamID, AttrStatus: ev.Status},
		Body:       body,
	})
}

// encode marshals ev; when it is larger than the claim-check threshold, the
// request and response move to a blob and the event carries its key.
func (e *Emitter) encode(ctx context.Context, ev *Event) ([]byte, error) {
	body, err := json.Marshal(ev)
	if err != nil {
		return nil, fmt.Errorf("encode log event %s: %w", ev.ID, err)
	}
	if e.claimCheck <= 0 || len(body) <= e.claimCheck || e.blobs == nil {
		return body, nil
	}
	payload, err := json.Marshal(ClaimedBodies{Messages: ev.Messages, Response: ev.Response})
	if err != nil {
		return nil, fmt.Errorf("encode claim-checked bodies of %s: %w", ev.ID, err)
	}
	key := ClaimCheckPrefix + ev.ID
	if _, err := e.blobs.Put(ctx, key, bytes.NewReader(payload)); err != nil {
		return nil, fmt.Errorf("store claim-checked bodies of %s: %w", ev.ID, err)
	}
	small := *ev
	small.Messages, small.Response, small.ClaimCheck = nil, nil, key
	return json.Marshal(&small)
}

// ClaimedBodies is what a claim-check blob holds.
type ClaimedBodies struct {
	Messages json.RawMessage `json:"messages,omitempty"`
	Response json.RawMessage `json:"response,omitempty"`
}
