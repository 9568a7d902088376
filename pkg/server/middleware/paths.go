package middleware

import (
	"net/http"
	"path"
	"strings"

	"github.com/sluice-gateway/sluice/pkg/api"
)

// AWSPrefixes are the path prefixes whose errors are in AWS's JSON error
// shape (api.WriteAWSError): those whose clients are AWS SDKs (/bedrock).
type AWSPrefixes []string

// WriteError renders err in the shape r's path prefix uses.
func (a AWSPrefixes) WriteError(w http.ResponseWriter, r *http.Request, err error) {
	for _, p := range a {
		if r.URL.Path == p || strings.HasPrefix(r.URL.Path, p+"/") {
			api.WriteAWSError(w, r, err)
			return
		}
	}
	api.WriteError(w, r, err)
}

// Refuse answers err for a request no route handler serves (an unknown
// route, a method not allowed), in the shape of its path's prefix.
func (a AWSPrefixes) Refuse(w http.ResponseWriter, r *http.Request, err error) {
	r = api.StartRequest(w, r)
	a.WriteError(w, r, err)
}

// UncleanPath is the 400 for a request whose path has dot segments or
// empty segments, nil for a clean one: the router answers it instead of
// letting the mux redirect such paths, as a gateway has no use for them and
// passthrough must never forward them. It is checked before every route's
// handler.
func UncleanPath(r *http.Request) error {
	if p := r.URL.Path; !canonicalPath(p) {
		return api.InvalidValue("path", "The request path %q is not in canonical form (no '.', '..' or empty segments).", p)
	}
	return nil
}

// canonicalPath reports whether p is a path that path.Clean leaves as it
// is (but for a trailing slash). An absolute path with neither a dot nor an
// empty segment is, without Clean's pass over it.
func canonicalPath(p string) bool {
	if p == "" {
		return false
	}
	if p[0] == '/' && strings.IndexByte(p, '.') < 0 && !strings.Contains(p, "//") {
		return true
	}
	clean := path.Clean(p)
	if strings.HasSuffix(p, "/") && clean != "/" {
		clean += "/"
	}
	return clean == p
}
