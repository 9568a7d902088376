package logevent

import (
	"context"
	"fmt"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/sluice-gateway/sluice/pkg/api"
	"github.com/sluice-gateway/sluice/pkg/auth"
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

// A batch line's event is found from the output file: its id is the line's
// request id.
func TestBatchLineEventIsItsRequest(t *testing.T) {
	ev := New(WithBatchLine(api.WithRequestID(context.Background(), "req_line"), "batch_abc", "a"), teamKey, CallEmbedding)
	if ev.ID != "req_line" || ev.TraceID != "req_line" {
		t.Errorf("id %q trace %q, want the line's request id", ev.ID, ev.TraceID)
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

// Reset of an event already filled in (every field set) leaves what New
// builds: nothing of the previous call stays.
func TestResetOfAUsedEventIsNew(t *testing.T) {
	ctx := api.WithRequestID(context.Background(), "req_z")
	used := &Event{ID: "old", TraceID: "old", CallType: CallResponses, Stream: true, ResponseCost: 1, Status: StatusFailure,
		CustomLLMProvider: "openai", TotalTokens: 3, PromptTokens: 1, CompletionTokens: 2, StartTime: 1, EndTime: 2,
		CompletionStartTime: 1.5, ResponseTime: 0.5, Model: "m", ModelID: "d", ModelGroup: "g", APIBase: "http://x",
		Metadata:    Metadata{UserAPIKeyHash: "k", UserAPIKeyAlias: "a", UserAPIKeyTeamID: "t", UserAPIKeyTeamAlias: "ta", RequesterIPAddress: "ip", RequestID: "old", BatchID: "b", CustomID: "c"},
		RequestTags: []string{"x"}, EndUser: "u", Messages: []byte(`[]`), Response: []byte(`{}`), ModelParameters: []byte(`{}`),
		ErrorStr: "e", ErrorInformation: &ErrorInfo{ErrorCode: "500"}, Passthrough: &Passthrough{Method: "POST"}, FinishReason: "stop",
		UsageEstimated: true, CostUnknown: true, CostEstimated: true, CachedTokens: 1, NativeBatch: true,
		BudgetAlert: &BudgetAlert{Type: "soft_budget_crossed"}, ClaimCheck: "claimcheck/old"}
	used.Reset(ctx, teamKey, CallEmbedding)
	if diff := cmp.Diff(New(ctx, teamKey, CallEmbedding), used); diff != "" {
		t.Errorf("(-new +reset):\n%s", diff)
	}
}
