package logevent

import (
	"context"
	"fmt"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/sluice-gateway/sluice/pkg/api"
	"github.com/sluice-gateway/sluice/pkg/auth"
	"github.com/sluice-gateway/sluice/pkg/ids"
)

var teamKey = auth.Principal{TeamID: "team-1", Key: &auth.KeyInfo{Token: "tok", KeyAlias: "alias"}, Team: &auth.Team{TeamID: "team-1", TeamAlias: "ta"}}

func TestNewNamesTheCaller(t *testing.T) {
	ev := New(api.WithRequestID(context.Background(), "req_x"), teamKey, CallEmbedding)
	want := &Event{
		ID: "req_x", TraceID: "req_x", CallType: CallEmbedding, Status: StatusSuccess, RequestTags: []string{},
		Metadata: Metadata{UserAPIKeyHash: "tok", UserAPIKeyAlias: "alias", UserAPIKeyTeamID: "team-1", UserAPIKeyTeamAlias: "ta", RequestID: "req_x"},
	}
	if diff := cmp.Diff(want, ev); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
}

func TestNewTagsABatchLine(t *testing.T) {
	ctx := WithBatchLine(api.WithRequestID(context.Background(), "req_y"), "batch_abc", "line-7")
	md := New(ctx, teamKey, CallCompletion).Metadata
	if md.BatchID != "batch_abc" || md.CustomID != "line-7" || md.RequestID != "req_y" {
		t.Errorf("metadata %+v", md)
	}
}

// The lines of a batch share a request id; their events do not share an
// id, for the destinations deduplicate on it.
func TestBatchLinesSharingARequestGetDistinctIDs(t *testing.T) {
	ctx := api.WithRequestID(context.Background(), "req_shared")
	seen := map[string]bool{}
	for _, custom := range []string{"a", "b", "a"} {
		ev := New(WithBatchLine(ctx, "batch_abc", custom), teamKey, CallEmbedding)
		if !ids.Valid(ids.BatchRequest, ev.ID) || ev.TraceID != ev.ID || seen[ev.ID] {
			t.Errorf("line %s: id %q trace %q (seen before: %v)", custom, ev.ID, ev.TraceID, seen[ev.ID])
		}
		seen[ev.ID] = true
	}
}

func TestFailRecordsWhatTheClientSaw(t *testing.T) {
	ev := New(context.Background(), teamKey, CallEmbedding)
	ev.CustomLLMProvider = "openai"
	ev.Fail(fmt.Errorf("route: %w", api.InvalidValue("input", "'input' must not be empty.")))
	want := &ErrorInfo{ErrorCode: "400", ErrorClass: "invalid_value", LLMProvider: "openai", ErrorMessage: "'input' must not be empty."}
	if diff := cmp.Diff(want, ev.ErrorInformation); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
	if ev.Status != StatusFailure || ev.ErrorStr != "'input' must not be empty." {
		t.Errorf("status %q error %q", ev.Status, ev.ErrorStr)
	}
}

func TestFailOfAnUnclassifiedErrorSaysNoMore(t *testing.T) {
	ev := New(context.Background(), teamKey, CallEmbedding)
	ev.Fail(fmt.Errorf("dial tcp 10.0.0.7:443: secret detail"))
	if ev.ErrorInformation.ErrorCode != "500" || ev.ErrorStr == "" || ev.ErrorStr == "dial tcp 10.0.0.7:443: secret detail" {
		t.Errorf("%+v %q", ev.ErrorInformation, ev.ErrorStr)
	}
}
