package logevent

import (
	"context"
	"strconv"

	"github.com/sluice-gateway/sluice/pkg/api"
	"github.com/sluice-gateway/sluice/pkg/auth"
)

type batchLineKey struct{}

type batchLine struct{ batchID, customID string }

// WithBatchLine returns ctx marking the calls made with it as one line of a
// batch: their events carry the batch id and the line's custom_id in
// their metadata.
func WithBatchLine(ctx context.Context, batchID, customID string) context.Context {
	return context.WithValue(ctx, batchLineKey{}, batchLine{batchID: batchID, customID: customID})
}

// New starts the log event of a call of callType made by p: its id is the
// request's (api.RequestID), its metadata names the key and team, and, for
// a batch line (WithBatchLine), the batch and the line. It is a success
// until Fail says otherwise.
func New(ctx context.Context, p auth.Principal, callType string) *Event {
	id := api.RequestID(ctx)
	e := &Event{
		ID:          id,
		TraceID:     id,
		CallType:    callType,
		Status:      StatusSuccess,
		RequestTags: []string{},
		Metadata: Metadata{
			UserAPIKeyHash:      p.KeyToken(),
			UserAPIKeyAlias:     p.KeyAlias(),
			UserAPIKeyTeamID:    p.TeamID,
			UserAPIKeyTeamAlias: p.TeamAlias(),
			RequestID:           id,
		},
	}
	if l, ok := ctx.Value(batchLineKey{}).(batchLine); ok {
		e.Metadata.BatchID, e.Metadata.CustomID = l.batchID, l.customID
	}
	return e
}

// Fail marks e as a failure caused by err, as the client saw it: its
// status, code and message (api.AsError), never more — a provider's text
// reaches the event only where the client was shown it too, for events go
// to the team's logging destinations.
func (e *Event) Fail(err error) {
	ae := api.AsError(err)
	e.Status = StatusFailure
	e.ErrorStr = ae.Message
	e.ErrorInformation = &ErrorInfo{
		ErrorCode:    strconv.Itoa(ae.Status),
		ErrorClass:   ae.Code,
		LLMProvider:  e.CustomLLMProvider,
		ErrorMessage: ae.Message,
	}
}
