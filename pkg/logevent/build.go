package logevent

import (
	"context"
	"strconv"

	"github.com/sluice-gateway/sluice/pkg/api"
	"github.com/sluice-gateway/sluice/pkg/auth"
	"github.com/sluice-gateway/sluice/pkg/ids"
)

type batchLineKey struct{}

type batchLine struct{ batchID, customID string }

// WithBatchLine returns ctx marking the calls made with it as one line of a
// batch: their events carry the batch id and the line's custom_id in
// their metadata.
func WithBatchLine(ctx context.Context, batchID, customID string) context.Context {
	return context.WithValue(ctx, batchLineKey{}, batchLine{batchID: batchID, customID: customID})
}

// New starts the log event of a call of callType made by p: its metadata
// names the request (api.RequestID), the key and team, and, for a batch line
// (WithBatchLine), the batch and the line. Its id is unique to the call —
// the destinations' idempotency keys derive from it: the request's id for a
// call of its own, a fresh batch_req_ id for each batch line (the lines of a
// batch share one request). It is a success until Fail says otherwise.
func New(ctx context.Context, p auth.Principal, callType string) *Event {
	requestID := api.RequestID(ctx)
	id := requestID
	line, isLine := ctx.Value(batchLineKey{}).(batchLine)
	if isLine {
		id = ids.New(ids.BatchRequest)
	}
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
			RequestID:           requestID,
		},
	}
	if isLine {
		e.Metadata.BatchID, e.Metadata.CustomID = line.batchID, line.customID
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
