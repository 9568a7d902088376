package ui_test

import (
	"net/http"
	"net/http/httptest"
	"regexp"
	"strings"
	"testing"

	"github.com/sluice-gateway/sluice/pkg/ui"
)

func serve(t *testing.T, h *ui.Handler, path, asset string) *httptest.ResponseRecorder {
	t.Helper()
	mux := http.NewServeMux()
	mux.HandleFunc("GET /ui", func(w http.ResponseWriter, r *http.Request) {
		if err := h.Serve(w, r); err != nil {
			http.Error(w, err.Error(), 404)
		}
	})
	mux.HandleFunc("GET /ui/{asset}", func(w http.ResponseWriter, r *http.Request) {
		if err := h.Serve(w, r); err != nil {
			http.Error(w, err.Error(), 404)
		}
	})
	w := httptest.NewRecorder()
	mux.ServeHTTP(w, httptest.NewRequest("GET", path, nil))
	return w
}

// The page and each asset are served with their type and a CSP of
// default-src 'self'; an unknown asset is a 404.
func TestServesTheAssetsUnderTheCSP(t *testing.T) {
	h, err := ui.New()
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct{ path, ctype, holds string }{
		{"/ui", "text/html; charset=utf-8", `<label for="key">API key</label>`},
		{"/ui/app.js", "text/javascript; charset=utf-8", "sessionStorage"},
		{"/ui/app.css", "text/css; charset=utf-8", ":root"},
	} {
		w := serve(t, h, tc.path, "")
		if w.Code != 200 || w.Header().Get("Content-Type") != tc.ctype || !strings.Contains(w.Body.String(), tc.holds) {
			t.Errorf("%s: %d %q", tc.path, w.Code, w.Header().Get("Content-Type"))
		}
		if csp := w.Header().Get("Content-Security-Policy"); !strings.HasPrefix(csp, "default-src 'self'") || strings.Contains(csp, "unsafe") {
			t.Errorf("%s: CSP %q", tc.path, csp)
		}
		if w.Header().Get("ETag") == "" || w.Header().Get("X-Content-Type-Options") != "nosniff" {
			t.Errorf("%s: headers %v", tc.path, w.Header())
		}
	}
	if w := serve(t, h, "/ui/nope.js", ""); w.Code != 404 {
		t.Errorf("an unknown asset: %d", w.Code)
	}
}

// The bundle is small, and names no other host: no CDN, no font service.
func TestTheBundleIsSmallAndSelfContained(t *testing.T) {
	h, err := ui.New()
	if err != nil {
		t.Fatal(err)
	}
	if n := h.Size(); n > 200<<10 {
		t.Errorf("the page's assets are %d bytes, want under 200 KiB", n)
	}
	t.Logf("bundle: %d bytes", h.Size())
	url := regexp.MustCompile(`(?i)(https?:)?//[a-z0-9.-]+\.[a-z]{2,}`)
	for _, p := range []string{"/ui", "/ui/app.js", "/ui/app.css"} {
		body := serve(t, h, p, "").Body.String()
		for _, m := range url.FindAllString(body, -1) {
			if m != "http://www.w3.org" { // the SVG namespace, not a request
				t.Errorf("%s names another host: %s", p, m)
			}
		}
	}
}
