package models

import (
	"context"
	"net/http"
	"time"

	"github.com/sluice-gateway/sluice/pkg/api"
	"github.com/sluice-gateway/sluice/pkg/logevent"
)

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

// Failed closes a call that ends in err before any answer was written: it
// sets the overhead header, records the failure and its times on ev,
// publishes ev, and returns err for the middleware to render. rep may be nil
// (no provider called).
func Failed(ctx context.Context, h http.Header, events *logevent.Emitter, start time.Time, rep *Reply, ev *logevent.Event, err error) error {
	api.SetOverhead(h, ctx)
	ev.Fail(err)
	ev.SetTimes(start, time.Time{}, time.Now())
	events.Start(ctx, ev)()
	return err
}
