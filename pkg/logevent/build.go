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

// New starts the log event of a call of callType made by p: its metadata
// names the request (api.RequestID), the key and team, and, for a batch line
// (WithBatchLine), the batch and the line. Its id is the request's id, which
// is unique to the call — the destinations' idempotency keys derive from it;
// the batch engine gives each line's call a request id of its own (the
// line's response.request_id in the output file), so the event of a line is
// found from the output. It is a success until Fail says otherwise.
func New(ctx context.Context, p auth.Principal, callType string) *Event {
	e := new(Event)
	e.Reset(ctx, p, callType)
	return e
}

// Reset makes e the start of a call's log event, as New does: a caller
// that holds the event in a larger structure of the call's (pkg/modelcall)
// saves an allocation a call.
func (e *Event) Reset(ctx context.Context, p auth.Principal, callType string) {
	id := api.RequestID(ctx)
	line, isLine := ctx.Value(batchLineKey{}).(batchLine)
	// Cleared, then set: a composite literal would be built on the stack
	// and copied whole.
	*e = Event{}
	e.ID, e.TraceID, e.CallType, e.Status = id, id, callType, StatusSuccess
	e.RequestTags = []string{}
	md := &e.Metadata
	md.UserAPIKeyHash, md.UserAPIKeyAlias = p.KeyToken(), p.KeyAlias()
	md.UserAPIKeyTeamID, md.UserAPIKeyTeamAlias = p.TeamID, p.TeamAlias()
	md.RequestID = id
	if isLine {
		e.Metadata.BatchID, e.Metadata.CustomID = line.batchID, line.customID
	}
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
