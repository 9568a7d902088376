package messages

import (
	"context"
	"net/http/httptest"
	"testing"

	"github.com/sluice-gateway/sluice/pkg/ctxvalue"
	"github.com/sluice-gateway/sluice/pkg/providers/anthropic"
)

// TestWithHeadersOnlyWhatANativeCallWouldNotSend: the client's Anthropic
// headers ride in the context only when they ask for something a native
// deployment does not send anyway (a beta, another version); the version
// it sends (anthropic.APIVersion), or none, costs the call no layer.
func TestWithHeadersOnlyWhatANativeCallWouldNotSend(t *testing.T) {
	for _, tc := range []struct {
		version, beta string
		want          *headers
	}{
		{"", "", nil},
		{anthropic.APIVersion, "", nil},
		{"2023-01-01", "", &headers{"2023-01-01", ""}},
		{"", "b-1", &headers{"", "b-1"}},
		{anthropic.APIVersion, "b-1", &headers{anthropic.APIVersion, "b-1"}},
	} {
		r := httptest.NewRequest("POST", "/v1/messages", nil)
		if tc.version != "" {
			r.Header.Set("Anthropic-Version", tc.version)
		}
		if tc.beta != "" {
			r.Header.Set("Anthropic-Beta", tc.beta)
		}
		ctx := context.Background()
		got := withHeaders(ctx, r)
		switch hs := ctxvalue.From[headers](got); {
		case tc.want == nil && got != ctx:
			t.Errorf("%q %q: a layer (%v), want none", tc.version, tc.beta, hs)
		case tc.want != nil && (hs == nil || *hs != *tc.want):
			t.Errorf("%q %q: carried %v, want %v", tc.version, tc.beta, hs, *tc.want)
		}
	}
}
