package modelcall

import (
	"context"
	"errors"
	"testing"

	"github.com/sluice-gateway/sluice/pkg/api"
	"github.com/sluice-gateway/sluice/pkg/logevent"
)

// A provider call cut short because the caller left is the caller's 499,
// in the event and in what the operation returns: not the "could not reach
// the provider" 502 the router made of the cancelled call.
func TestFailAfterTheCallerLeftIsA499(t *testing.T) {
	calls, b, _ := newCalls()
	ctx, cancel := context.WithCancel(context.Background())
	c := calls.Begin(ctx, teamKey, logevent.CallEmbedding)
	cancel()
	cause := api.Upstream(context.Canceled, "The gateway could not reach the provider of model 'm'.")
	err := c.Fail(cause)
	if e := api.AsError(err); e.Status != api.StatusClientClosed || !errors.Is(err, cause) {
		t.Errorf("Fail returned %v", err)
	}
	if evs := b.published(); len(evs) != 1 || evs[0].ErrorInformation.ErrorCode != "499" {
		t.Errorf("events %+v", evs)
	}
}
