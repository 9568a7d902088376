package auth

import (
	"net/http/httptest"
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
	f.Add("Bearer sk-abc", "", "", "/x?key=sk-q")
	f.Add("AWS4-HMAC-SHA256 Credential=x", "sk-x", "", "/")
	f.Add("", "", "sk-goog", "/%zz")
	f.Fuzz(func(t *testing.T, authz, xapi, goog, target string) {
		r := httptest.NewRequest("GET", "/", nil)
		if u, err := r.URL.Parse(target); err == nil {
			r.URL = u
		}
		r.Header.Set("Authorization", authz)
		r.Header.Set("X-Api-Key", xapi)
		r.Header.Set("X-Goog-Api-Key", goog)
		got := ExtractKey(r, true)
		if got != "" && got != bearer(r.Header.Get("Authorization")) && got != r.Header.Get("X-Api-Key") &&
			got != r.Header.Get("X-Goog-Api-Key") && got != r.URL.Query().Get("key") {
			// Every answer must come from one of the places keys may arrive in.
			for _, v := range []string{r.Header.Get("X-Api-Key"), r.Header.Get("X-Goog-Api-Key"), r.URL.Query().Get("key")} {
				if got == trimmed(v) {
					return
				}
			}
			t.Fatalf("ExtractKey returned %q, which came from nowhere", got)
		}
		if got != trimmed(got) {
			t.Fatalf("ExtractKey returned untrimmed %q", got)
		}
	})
}

func trimmed(s string) string {
	for len(s) > 0 && (s[0] == ' ' || s[0] == '\t') {
		s = s[1:]
	}
	for len(s) > 0 && (s[len(s)-1] == ' ' || s[len(s)-1] == '\t') {
		s = s[:len(s)-1]
	}
	return s
}
