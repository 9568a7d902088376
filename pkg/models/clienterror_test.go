package models

import (
	"context"
	"strings"
	"testing"

	"github.com/sluice-gateway/sluice/pkg/auth"
	"github.com/sluice-gateway/sluice/pkg/logevent"
)

// TestEventFailKeepsOnlyRequestErrorsFromTheProvider: the client, and so
// the log event, sees a provider's text only when it is about the request.
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
