package middleware

import (
	"path"
	"strings"
	"testing"
)

// canonicalPathByClean is the rule canonicalPath takes a short cut to.
func canonicalPathByClean(p string) bool {
	clean := path.Clean(p)
	if strings.HasSuffix(p, "/") && clean != "/" {
		clean += "/"
	}
	return p != "" && clean == p
}

func TestCanonicalPath(t *testing.T) {
	for _, p := range []string{"", "/", "/v1/embeddings", "/v1/files/", "//v1", "/v1//x", "/v1/./x", "/v1/../x", "/v1/.", "/v1/..", "/a.b/c", "/.well-known/x", "*", "v1/x", "/v1/x/"} {
		if got, want := canonicalPath(p), canonicalPathByClean(p); got != want {
			t.Errorf("canonicalPath(%q) = %v, want %v", p, got, want)
		}
	}
}

func FuzzCanonicalPath(f *testing.F) {
	for _, p := range []string{"/v1/embeddings", "/v1/../x", "//", "/a/./b/"} {
		f.Add(p)
	}
	f.Fuzz(func(t *testing.T, p string) {
		if got, want := canonicalPath(p), canonicalPathByClean(p); got != want {
			t.Fatalf("canonicalPath(%q) = %v, want %v", p, got, want)
		}
	})
}
