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

// Listening reports whether anyone wants a team's events (the team's
// callbacks or gateway-wide ones). Events nobody listens to are not published.
type Listening func(ctx context.Context, teamID string) (bool, error)

// Emitter publishes log events on the bus.
type Emitter struct {
	bus        store.Bus
	blobs      store.Blobs
	listening  Listening
	claimCheck int // bodies above this many bytes go to the blob store
}

// NewEmitter builds an emitter. listening may be nil: nobody listens.
func NewEmitter(bus store.Bus, blobs store.Blobs, listening Listening, claimCheckBytes int) *Emitter {
	return &Emitter{bus: bus, blobs: blobs, listening: listening, claimCheck: claimCheckBytes}
}

// Start begins publishing ev and returns a function that waits for the
// publish to finish. A Lambda is frozen once it answers, so the handler must
// call the returned function before it returns; meanwhile it can write its
// answer. Failures are logged, never returned: logging must not fail a call.
func (e *Emitter) Start(ctx context.Context, ev *Event) (wait func()) {
	if e == nil || e.listening == nil {
		return func() {}
	}
	// The request may be cancelled (client gone) while we publish: keep going.
	ctx = context.WithoutCancel(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		if err := e.publish(ctx, ev); err != nil {
			slog.ErrorContext(ctx, "log event not published", "event_id", ev.ID, "team", ev.Metadata.UserAPIKeyTeamID, "error", err)
		}
	}()
	return func() { <-done }
}

// Emit publishes ev and waits for it.
func (e *Emitter) Emit(ctx context.Context, ev *Event) { e.Start(ctx, ev)() }

func (e *Emitter) publish(ctx context.Context, ev *Event) error {
	team := ev.Metadata.UserAPIKeyTeamID
	ok, err := e.listening(ctx, team)
	if err != nil {
		return fmt.Errorf("check listeners for team %s: %w", team, err)
	}
	if !ok {
		return nil
	}
	body, err := e.encode(ctx, ev)
	if err != nil {
		return err
	}
	return e.bus.Publish(ctx, store.Event{
		Attributes: map[string]string{AttrTeam: team, AttrStatus: ev.Status},
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
