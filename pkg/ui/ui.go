// Package ui serves the admin page at /ui: static assets embedded in the
// binary (no CDN, no build step), a client of sluice's own API like any
// other (ARCHITECTURE §12). The page keeps the key in the tab's session
// storage and calls the API with it; this package only hands out files.
package ui

import (
	"bytes"
	"crypto/sha256"
	"embed"
	"encoding/hex"
	"fmt"
	"io/fs"
	"net/http"
	"path"
	"strings"
	"time"

	"github.com/sluice-gateway/sluice/pkg/api"
)

//go:embed assets
var assets embed.FS

// CSP is the page's Content-Security-Policy: nothing but sluice's own
// origin — no inline script or style, no CDN, no other host to call.
const CSP = "default-src 'self'; img-src 'self' data:; frame-ancestors 'none'; base-uri 'none'; form-action 'self'"

// asset is one embedded file, ready to serve.
type asset struct {
	body  []byte
	ctype string
	etag  string
}

// Handler serves the page: GET /ui is index.html, GET /ui/<name> an asset.
type Handler struct {
	files map[string]asset
}

// contentTypes are the page's asset types by extension. A table, not
// mime.TypeByExtension: that reads the system's MIME database on first use
// into maps of ~2,000 entries (0.4 MB of pointerful heap the garbage
// collector would scan every cycle of the process's life) to name three.
var contentTypes = map[string]string{
	".html": "text/html; charset=utf-8",
	".js":   "text/javascript; charset=utf-8",
	".css":  "text/css; charset=utf-8",
	".svg":  "image/svg+xml",
	".png":  "image/png",
	".ico":  "image/vnd.microsoft.icon",
	".json": "application/json",
}

// New reads the embedded assets once.
func New() (*Handler, error) {
	h := &Handler{files: map[string]asset{}}
	err := fs.WalkDir(assets, "assets", func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		b, err := assets.ReadFile(p)
		if err != nil {
			return err
		}
		sum := sha256.Sum256(b)
		ct, ok := contentTypes[path.Ext(p)]
		if !ok {
			return fmt.Errorf("%s: no content type for %q (add it to contentTypes)", p, path.Ext(p))
		}
		h.files[strings.TrimPrefix(p, "assets/")] = asset{body: b, ctype: ct, etag: `"` + hex.EncodeToString(sum[:8]) + `"`}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("ui: read the embedded assets: %w", err)
	}
	return h, nil
}

// Size is the bytes of every asset the page loads (its bundle).
func (h *Handler) Size() int {
	n := 0
	for _, a := range h.files {
		n += len(a.body)
	}
	return n
}

// Serve answers GET /ui and GET /ui/{asset...}.
func (h *Handler) Serve(w http.ResponseWriter, r *http.Request) error {
	name := r.PathValue("asset")
	if name == "" {
		name = "index.html"
	}
	a, ok := h.files[name]
	if !ok {
		return api.NotFound("No such page asset: %s", name)
	}
	hd := w.Header()
	hd.Set("Content-Security-Policy", CSP)
	hd.Set("X-Content-Type-Options", "nosniff")
	hd.Set("Referrer-Policy", "no-referrer")
	hd.Set("Content-Type", a.ctype)
	hd.Set("Cache-Control", "no-cache") // revalidated by ETag: a new release shows at once
	hd.Set("ETag", a.etag)
	http.ServeContent(w, r, name, time.Time{}, bytes.NewReader(a.body))
	return nil
}
