package models

import (
	"context"
	"errors"
	"net/http"
	"strconv"
	"time"

	"github.com/sluice-gateway/sluice/pkg/api"
	"github.com/sluice-gateway/sluice/pkg/auth"
	"github.com/sluice-gateway/sluice/pkg/logevent"
)

// NewEvent starts the log event of a call made by p for model.
func NewEvent(ctx context.Context, p auth.Principal, callType, model string) *logevent.Event {
	id := api.RequestID(ctx)
	return &logevent.Event{
		ID:          id,
		TraceID:     id,
		CallType:    callType,
		Status:      logevent.StatusSuccess,
		Model:       model,
		ModelGroup:  model,
		RequestTags: []string{},
		Metadata: logevent.Metadata{
			UserAPIKeyHash:      p.KeyToken(),
			UserAPIKeyAlias:     p.KeyAlias(),
			UserAPIKeyTeamID:    p.TeamID,
			UserAPIKeyTeamAlias: p.TeamAlias(),
			RequestID:           id,
		},
	}
}

// Describe records in ev the deployment rep went to.
func (rep *Reply) Describe(ev *logevent.Event) {
	if rep == nil {
		return
	}
	t := rep.Target
	ev.ModelGroup = t.ModelGroup
	if t.Model != "" {
		ev.Model = t.Model
	}
	ev.ModelID = t.DeploymentID
	ev.CustomLLMProvider = t.Provider
	ev.APIBase = t.APIBase
}

// Fail marks ev as a failure caused by err, as the client saw it.
func Fail(ev *logevent.Event, err error) {
	e := api.AsError(err)
	ev.Status = logevent.StatusFailure
	ev.ErrorStr = e.Message
	info := &logevent.ErrorInfo{
		ErrorCode:    strconv.Itoa(e.Status),
		ErrorClass:   e.Code,
		LLMProvider:  ev.CustomLLMProvider,
		ErrorMessage: e.Message,
	}
	var pe *ProviderError
	if errors.As(err, &pe) && classify(pe) == failFatal && pe.Status >= 400 {
		// A provider's 4xx about the request: what it said, as the client
		// saw it. Other provider text (a refused credential, a 429 naming
		// sluice's account) stays in the gateway's own log: events go to
		// the team's logging destinations.
		info.ErrorMessage = pe.Error()
	}
	ev.ErrorInformation = info
}

// Failed closes a call that ends in err before any answer was written: it
// sets the overhead header, records the failure and its times on ev,
// publishes ev, and returns err for the middleware to render. rep may be nil
// (no provider called).
func Failed(ctx context.Context, h http.Header, events *logevent.Emitter, start time.Time, rep *Reply, ev *logevent.Event, err error) error {
	api.SetOverhead(h, ctx)
	Fail(ev, err)
	ev.SetTimes(start, time.Time{}, time.Now())
	events.Start(ctx, ev)()
	return err
}
