package models

import (
	"context"
	"strings"
	"testing"

	"github.com/sluice-gateway/sluice/pkg/api"
	"github.com/sluice-gateway/sluice/pkg/auth"
	"github.com/sluice-gateway/sluice/pkg/logevent"
)

func TestEventFailKeepsOnlyRequestErrorsFromTheProvider(t *testing.T) {
	target := Target{ModelGroup: "m"}
	for _, tc := range []struct {
		status   int
		msg      string
		withText bool
	}{
		{400, "input is too long", true},
		{404, "The model `x` does not exist", true},
		{401, "Incorrect API key provided: sk-abc***xyz", false},
		{429, "Rate limit reached in organization org-secret", false},
		{503, "overloaded", false},
	} {
		pe := &ProviderError{Provider: "openai", Status: tc.status, Message: tc.msg}
		ev := logevent.New(context.Background(), auth.Principal{}, "aembedding")
		ev.Fail(clientError(pe, target))
		if ev.Status != "failure" || ev.ErrorInformation == nil {
			t.Fatalf("%d: %+v", tc.status, ev)
		}
		has := strings.Contains(ev.ErrorInformation.ErrorMessage, tc.msg) || strings.Contains(ev.ErrorStr, tc.msg)
		if has != tc.withText {
			t.Errorf("%d: provider text in event = %v, want %v (%+v, %q)", tc.status, has, tc.withText, ev.ErrorInformation, ev.ErrorStr)
		}
	}
}

func TestEventDescribesTheCall(t *testing.T) {
	ctx := api.WithRequestID(context.Background(), "req_x")
	p := auth.Principal{TeamID: "team-1", Key: &auth.KeyInfo{Token: "tok", KeyAlias: "alias"}, Team: &auth.Team{TeamID: "team-1", TeamAlias: "ta"}}
	ev := logevent.New(ctx, p, "aembedding")
	rep := &Reply{Target: Target{ModelGroup: "small", DeploymentID: "d", Provider: "azure", Model: "dep", APIBase: "https://r"}}
	rep.Describe(ev)
	if ev.ID != "req_x" || ev.Model != "dep" || ev.ModelGroup != "small" || ev.ModelID != "d" || ev.CustomLLMProvider != "azure" || ev.APIBase != "https://r" ||
		ev.Metadata.UserAPIKeyHash != "tok" || ev.Metadata.UserAPIKeyAlias != "alias" || ev.Metadata.UserAPIKeyTeamAlias != "ta" || ev.Metadata.RequestID != "req_x" {
		t.Errorf("%+v", ev)
	}
}
