package passthrough

import (
	"net/http"
	"testing"
)

func TestCopyResponseHeaderKeepsClientsOffTheProviderHost(t *testing.T) {
	src := http.Header{
		"Content-Type":              {"application/json"},
		"Anthropic-Ratelimit-Left":  {"9"},
		"X-Goog-Upload-Url":         {"https://generativelanguage.googleapis.com/upload/v1beta/files?upload_id=x"},
		"X-Goog-Upload-Control-Url": {"https://generativelanguage.googleapis.com/upload/x"},
		"Location":                  {"https://generativelanguage.googleapis.com/v1beta/files/abc"},
		"X-Request-Id":              {"upstream-id"},
		"Connection":                {"close, X-Private"},
		"X-Private":                 {"hop"},
		"Transfer-Encoding":         {"chunked"},
	}
	dst := http.Header{}
	copyResponseHeader(dst, src)
	for _, k := range []string{"X-Goog-Upload-Url", "X-Goog-Upload-Control-Url", "Location", "X-Request-Id", "X-Private", "Transfer-Encoding", "Connection"} {
		if _, ok := dst[k]; ok {
			t.Errorf("%s was relayed", k)
		}
	}
	for _, k := range []string{"Content-Type", "Anthropic-Ratelimit-Left"} {
		if dst.Get(k) == "" {
			t.Errorf("%s was dropped", k)
		}
	}
	// A relative Location stays: it points back at sluice.
	dst = http.Header{}
	copyResponseHeader(dst, http.Header{"Location": {"/v1beta/files/abc"}})
	if dst.Get("Location") != "/v1beta/files/abc" {
		t.Errorf("relative Location = %q", dst.Get("Location"))
	}
}
