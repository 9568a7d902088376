package passthrough

import (
	"net/http"
	"net/url"
	"strconv"
	"strings"
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
	copyResponseHeader(dst, src, nil)
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
	copyResponseHeader(dst, http.Header{"Location": {"/v1beta/files/abc"}}, nil)
	if dst.Get("Location") != "/v1beta/files/abc" {
		t.Errorf("relative Location = %q", dst.Get("Location"))
	}
}

// TestNoRedirectLeavesSluice: a Location is relayed only when every value
// is a path on sluice's own origin; any form a client could follow to
// another host — where it would present its sluice key — is dropped.
func TestNoRedirectLeavesSluice(t *testing.T) {
	for _, tc := range []struct {
		name  string
		value []string
		kept  bool
	}{
		{"path", []string{"/v1beta/files/abc"}, true},
		{"path with query", []string{"/v1/messages?beta=true"}, true},
		{"two paths", []string{"/a", "/b"}, true},
		{"absolute URL", []string{"https://other-host/x"}, false},
		{"scheme-relative", []string{"//other-host/x"}, false},
		{"backslash after the slash", []string{`/\other-host/x`}, false},
		{"backslash later", []string{`/x\..\..\\other-host`}, false},
		{"tab between the slashes", []string{"/\t/other-host/x"}, false},
		{"scheme without slashes", []string{"https:other-host"}, false},
		{"relative path", []string{"x/y"}, false},
		{"non-ASCII", []string{"/\uff0fother-host"}, false},
		{"empty", []string{""}, false},
		{"a second, foreign Location", []string{"/v1/files/abc", "//other-host/x"}, false},
		{"a foreign one first", []string{"https://other-host/x", "/v1/files/abc"}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dst := http.Header{}
			copyResponseHeader(dst, http.Header{"Location": tc.value, "Content-Type": {"text/html"}}, nil)
			if _, kept := dst["Location"]; kept != tc.kept {
				t.Errorf("Location %q kept = %v, want %v", tc.value, kept, tc.kept)
			}
			if dst.Get("Content-Type") != "text/html" {
				t.Error("the other headers were lost")
			}
		})
	}
}

// TestRedirectsThroughTheRelay: the same, on a real answer, where a second
// Location arrives as a second header line.
func TestRedirectsThroughTheRelay(t *testing.T) {
	for name, values := range map[string][]string{
		"scheme-relative": {"//other-host/x"},
		"backslash":       {`/\other-host/x`},
		"second header":   {"/v1/files/abc", "https://other-host/x"},
	} {
		t.Run(name, func(t *testing.T) {
			up := newUpstream(t, func(w http.ResponseWriter, r *http.Request, body []byte) {
				w.Header()["Location"] = values
				w.WriteHeader(http.StatusFound)
			})
			h := newHarness(t, allPrefixes(up.srv.URL), nil, nil)
			h.own(t, Gemini, "files/abc", "team-a")
			client := h.srv.Client()
			client.CheckRedirect = func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }
			resp, err := client.Get(h.srv.URL + "/gemini/v1beta/files/abc")
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			if resp.StatusCode != http.StatusFound || len(resp.Header["Location"]) != 0 {
				t.Errorf("%d, Location %q relayed", resp.StatusCode, resp.Header["Location"])
			}
		})
	}
}

// FuzzLeavesOrigin: whatever a kept Location says, resolving it against
// sluice's URL stays on sluice's host, also read as a browser reads it
// (backslashes as slashes, tabs and newlines removed).
func FuzzLeavesOrigin(f *testing.F) {
	for _, s := range []string{"/a", "//h/x", `/\h`, "/\t/h", "https://h", "/%2F%2Fh", "/a/../..//h", "/:@h"} {
		f.Add(s)
	}
	base, _ := url.Parse("https://sluice.example/gemini/v1beta/files")
	f.Fuzz(func(t *testing.T, v string) {
		if leavesOrigin(v) {
			return
		}
		browser := strings.NewReplacer(`\`, "/", "\t", "", "\n", "", "\r", "").Replace(v)
		for _, form := range []string{v, browser} {
			u, err := url.Parse(form)
			if err != nil {
				continue // a client cannot follow it at all
			}
			if got := base.ResolveReference(u); got.Host != base.Host || got.Scheme != base.Scheme {
				t.Fatalf("kept Location %q leads to %s", v, got)
			}
		}
	})
}

// TestOneCallsHeadersNeverReachTheNext: the outbound header maps are
// reused (headerPool); a header one call sent is not in the next call's.
func TestOneCallsHeadersNeverReachTheNext(t *testing.T) {
	up := newUpstream(t, nil)
	h := newHarness(t, allPrefixes(up.srv.URL), nil, nil)
	for i, headers := range [][]string{
		{"X-Sluice-Api-Key", "sk-sluice-key", "Anthropic-Beta", "first-call", "X-First", "1"},
		{"X-Sluice-Api-Key", "sk-sluice-key", "Anthropic-Version", "2023-06-01"},
	} {
		resp, body := h.do(t, "POST", "/anthropic/v1/messages", strings.NewReader(`{"model":"x"}`), headers...)
		if resp.StatusCode != 200 {
			t.Fatalf("call %d: %d %s", i, resp.StatusCode, body)
		}
	}
	got := up.last(t).Header
	for _, k := range []string{"Anthropic-Beta", "X-First"} {
		if v, ok := got[k]; ok {
			t.Errorf("the second call sent the first's %s: %q", k, v)
		}
	}
	if got.Get("Anthropic-Version") != "2023-06-01" || got.Get("X-Api-Key") == "" {
		t.Errorf("the second call's own headers are missing: %v", got)
	}
}

func TestHeaderPoolHandsOutEmptyMaps(t *testing.T) {
	var p headerPool
	h := p.get()
	h.Set("X-Kept", "v")
	p.put(h)
	if got := p.get(); len(got) != 0 {
		t.Errorf("get = %v, want an empty map", got)
	}
	big := make(http.Header)
	for i := range maxPooledHeader + 1 {
		big["X-H"+strconv.Itoa(i)] = []string{"v"}
	}
	p.put(big)
	if len(big) != maxPooledHeader+1 {
		t.Error("a map over the bound was cleared: it should be left to the collector")
	}
}
