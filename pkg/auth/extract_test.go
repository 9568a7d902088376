package auth

import (
	"net/http/httptest"
	"strings"
	"testing"
)

func TestExtractKey(t *testing.T) {
	for _, tc := range []struct {
		name       string
		headers    map[string]string
		target     string
		allowQuery bool
		want       string
	}{
		{name: "none", want: ""},
		{name: "bearer", headers: map[string]string{"Authorization": "Bearer sk-a"}, want: "sk-a"},
		{name: "bearer lowercase scheme", headers: map[string]string{"Authorization": "bearer sk-a"}, want: "sk-a"},
		{name: "sluice header wins", headers: map[string]string{"X-Sluice-Api-Key": "sk-s", "X-Litellm-Api-Key": "sk-l", "Authorization": "Bearer sk-b"}, want: "sk-s"},
		{name: "litellm header before bearer", headers: map[string]string{"X-Litellm-Api-Key": "sk-l", "Authorization": "Bearer sk-b"}, want: "sk-l"},
		{name: "sigv4 authorization skipped", headers: map[string]string{"Authorization": "AWS4-HMAC-SHA256 Credential=AKID/20240101/us-east-1/bedrock/aws4_request, SignedHeaders=host, Signature=abc", "X-Api-Key": "sk-x"}, want: "sk-x"},
		{name: "api-key before x-api-key", headers: map[string]string{"Api-Key": "sk-1", "X-Api-Key": "sk-2"}, want: "sk-1"},
		{name: "x-goog-api-key", headers: map[string]string{"X-Goog-Api-Key": "sk-g"}, want: "sk-g"},
		{name: "ocp-apim", headers: map[string]string{"Ocp-Apim-Subscription-Key": "sk-o"}, want: "sk-o"},
		{name: "empty bearer skipped", headers: map[string]string{"Authorization": "Bearer ", "X-Api-Key": "sk-x"}, want: "sk-x"},
		{name: "query ignored off passthrough", target: "/v1/models?key=sk-q", want: ""},
		{name: "query on passthrough", target: "/gemini/v1beta/models?key=sk-q", allowQuery: true, want: "sk-q"},
		{name: "header before query", headers: map[string]string{"X-Goog-Api-Key": "sk-g"}, target: "/gemini/x?key=sk-q", allowQuery: true, want: "sk-g"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			target := tc.target
			if target == "" {
				target = "/"
			}
			r := httptest.NewRequest("GET", target, nil)
			for k, v := range tc.headers {
				r.Header.Set(k, v)
			}
			if got := ExtractKey(r, tc.allowQuery); got != tc.want {
				t.Errorf("ExtractKey = %q, want %q", got, tc.want)
			}
		})
	}
}

func FuzzExtractKey(f *testing.F) {
	f.Add("Bearer sk-abc", "", "", "/x?key=sk-q", true)
	f.Add("AWS4-HMAC-SHA256 Credential=x", "sk-x", "", "/", false)
	f.Add("", "", "sk-goog", "/?key=%zz", true)
	f.Fuzz(func(t *testing.T, authz, xapi, goog, target string, allowQuery bool) {
		r := httptest.NewRequest("GET", "/", nil)
		if u, err := r.URL.Parse(target); err == nil {
			r.URL = u
		}
		r.Header["Authorization"] = []string{authz}
		r.Header["X-Api-Key"] = []string{xapi}
		r.Header["X-Goog-Api-Key"] = []string{goog}
		got := ExtractKey(r, allowQuery)
		if got == "" {
			return
		}
		// The answer must be the first non-empty candidate, in order.
		candidates := []string{bearer(strings.TrimSpace(authz)), strings.TrimSpace(xapi), strings.TrimSpace(goog)}
		if allowQuery {
			candidates = append(candidates, strings.TrimSpace(r.URL.Query().Get("key")))
		}
		for _, c := range candidates {
			if c != "" {
				if got != c {
					t.Fatalf("ExtractKey = %q, want the first candidate %q", got, c)
				}
				return
			}
		}
		t.Fatalf("ExtractKey = %q, which came from none of the places keys arrive in", got)
	})
}
