package passthrough

import (
	"net/url"
	"strings"

	"github.com/sluice-gateway/sluice/pkg/api"
)

// endpoint is a validated passthrough path: the part after the prefix, in
// its escaped form exactly as the client sent it, and its decoded segments.
type endpoint struct {
	escaped string   // e.g. "/v1/messages"; always starts with "/"
	raw     []string // escaped segments
	segs    []string // decoded segments (a segment may contain '/' from %2F)
}

// splitPrefix cuts the escaped request path into the prefix's first segment
// and the rest ("/vertex-ai/v1/x" → "vertex-ai", "/v1/x").
func splitPrefix(escaped string) (prefix, rest string) {
	p := strings.TrimPrefix(escaped, "/")
	i := strings.IndexByte(p, '/')
	if i < 0 {
		return p, ""
	}
	return p[:i], p[i:] // the rest keeps its slash: no new string
}

// parseEndpoint validates the escaped path after the prefix. It works on the
// escaped form so that legitimate encoded characters (a Bedrock ARN's %2F, a
// model id's %3A) pass unchanged, and refuses, also when they only appear
// after decoding: dot segments ("." and "..", plain, %2e-encoded, or formed
// by an encoded slash), empty segments, backslashes, control characters
// (CR, LF, NUL, ...), malformed escapes, and absolute-URL forms ("//host",
// "scheme:"). A refused path never reaches an upstream.
func parseEndpoint(rest string) (endpoint, error) {
	if rest == "" || rest == "/" {
		return endpoint{}, api.NotFound("Name the provider endpoint after the prefix, e.g. /anthropic/v1/messages.")
	}
	if rest[0] != '/' {
		return endpoint{}, badPath(rest, "it must start with '/'")
	}
	// The escaped and the decoded segments in one allocation.
	n := strings.Count(rest, "/")
	both := make([]string, 2*n)
	raw := both[:0:n]
	for seg := range strings.SplitSeq(rest[1:], "/") {
		raw = append(raw, seg)
	}
	ep := endpoint{escaped: rest, raw: raw, segs: both[n:]}
	for i, seg := range raw {
		if seg == "" {
			if i == len(raw)-1 {
				continue // a trailing slash: some APIs use one (PUT /sessions/)
			}
			return endpoint{}, badPath(rest, "it has an empty segment ('//')")
		}
		dec := seg // without an escape, the segment is its own decoding
		if strings.IndexByte(seg, '%') >= 0 {
			var err error
			if dec, err = url.PathUnescape(seg); err != nil {
				return endpoint{}, badPath(rest, "it has a malformed percent-escape")
			}
		}
		if reason := badSegment(dec); reason != "" {
			return endpoint{}, badPath(rest, reason)
		}
		if i == 0 && strings.ContainsRune(dec, ':') {
			return endpoint{}, badPath(rest, "its first segment looks like a URL scheme")
		}
		ep.segs[i] = dec
	}
	return ep, nil
}

// badSegment says what is wrong with a decoded segment, or "".
func badSegment(dec string) string {
	for i := 0; i < len(dec); i++ {
		switch c := dec[i]; {
		case c < 0x20 || c == 0x7f:
			return "it contains a control character (CR, LF, NUL, ...)"
		case c == '\\':
			return "it contains a backslash"
		}
	}
	if strings.IndexByte(dec, '/') < 0 { // the usual segment: one part
		if dec == "." || dec == ".." {
			return "it contains a '.' or '..' segment"
		}
		return ""
	}
	// An encoded slash splits the segment once decoded: each part must be a
	// plain name too.
	for part := range strings.SplitSeq(dec, "/") {
		switch part {
		case ".", "..":
			return "it contains a '.' or '..' segment"
		case "":
			if dec != "" {
				return "an encoded slash in it forms an empty or absolute segment"
			}
		}
	}
	return ""
}

func badPath(p, reason string) *api.Error {
	const max = 200
	if len(p) > max {
		p = p[:max] + "..."
	}
	return api.InvalidValue("path", "The passthrough path %q is refused: %s.", p, reason)
}

// segment returns the i-th decoded segment, or "".
func (e endpoint) segment(i int) string {
	if i < 0 || i >= len(e.segs) {
		return ""
	}
	return e.segs[i]
}

// joinURL builds the upstream URL by joining the escaped path onto the fixed
// base: scheme and host always come from base, never from the path.
func joinURL(base *url.URL, escapedPath, rawQuery string) *url.URL {
	b := newURLBase(base)
	return b.join(escapedPath, rawQuery)
}

// urlBase is a base URL's parts as joinURL reads them, read once: an
// upstream whose base is fixed keeps its own, so a call only appends its
// path (and escapes and unescapes nothing of the base's).
type urlBase struct {
	scheme, host string
	rawPath      string // the base's escaped path, without a trailing slash
	path         string // rawPath decoded
	decodes      bool   // rawPath decoded (parseBase validated it)
}

func newURLBase(base *url.URL) urlBase {
	b := urlBase{scheme: base.Scheme, host: base.Host, rawPath: strings.TrimSuffix(base.EscapedPath(), "/")}
	p, err := url.PathUnescape(b.rawPath)
	b.path, b.decodes = p, err == nil
	return b
}

// join is joinURL's result for this base. Decoding the base and the path
// apart decodes their join: an escape never spans the two.
func (b *urlBase) join(escapedPath, rawQuery string) *url.URL {
	ep := b.rawPath + escapedPath
	p, err := escapedPath, error(nil) // without an escape, the path is its own decoding
	if strings.IndexByte(escapedPath, '%') >= 0 {
		p, err = url.PathUnescape(escapedPath)
	}
	switch {
	case err != nil || !b.decodes:
		// Both parts were validated; keep the raw form rather than guess.
		p = ep
	case b.path != "":
		p = b.path + p
	}
	return &url.URL{Scheme: b.scheme, Host: b.host, Path: p, RawPath: ep, RawQuery: rawQuery}
}

// credentialParams are query parameters that carry a credential: the sluice
// key (?key=, as Google SDKs send API keys), Google OAuth tokens, and a
// presigned AWS request's signature. They are never forwarded.
var credentialParams = []string{"key", "access_token", "oauth_token", "$httpheaders"}

// forwardQuery returns the raw query without credential parameters, keeping
// every other parameter byte for byte and in order. Parameters are split at
// '&' and at ';' (which some servers and proxies also take for a separator),
// and names compared as isCredentialParam reads them, so "k%65y=", "KEY=",
// ";key=" or "key[]=" cannot smuggle a key through.
func forwardQuery(raw string) (string, error) {
	if raw == "" {
		return "", nil
	}
	if strings.ContainsFunc(raw, func(r rune) bool { return r < 0x20 || r == 0x7f }) {
		return "", api.InvalidValue("query", "The query string contains a control character.")
	}
	var b strings.Builder
	kept := 0
	for part := range strings.SplitSeq(raw, "&") {
		if part == "" {
			continue
		}
		var sub strings.Builder
		subs := 0
		for p := range strings.SplitSeq(part, ";") {
			name, _, _ := strings.Cut(p, "=")
			dec, err := url.QueryUnescape(name)
			if err != nil {
				return "", api.InvalidValue("query", "The query parameter %q has a malformed percent-escape.", truncate(name, 100))
			}
			if isCredentialParam(dec) {
				continue
			}
			if subs > 0 {
				sub.WriteByte(';')
			}
			sub.WriteString(p)
			subs++
		}
		if subs == 0 || sub.Len() == 0 {
			continue
		}
		if kept > 0 {
			b.WriteByte('&')
		}
		b.WriteString(sub.String())
		kept++
	}
	return b.String(), nil
}

// isCredentialParam reports whether a decoded query parameter name is one a
// provider, a framework or a proxy could read as a credential parameter: in
// any case, padded with spaces, decoded once more (a proxy that decodes
// twice), prefixed with '$' (Google's system parameters), or as an array or
// map member (key[], key[0], key.x: PHP, Rails, qs).
func isCredentialParam(name string) bool {
	n := name
	for range 3 {
		d, err := url.QueryUnescape(n)
		if err != nil || d == n {
			break
		}
		n = d
	}
	n = strings.ToLower(strings.TrimSpace(n))
	if i := strings.IndexAny(n, "[."); i >= 0 {
		n = strings.TrimSpace(n[:i])
	}
	n = strings.TrimLeft(n, "$")
	for _, c := range credentialParams {
		if n == strings.TrimLeft(c, "$") {
			return true
		}
	}
	return strings.HasPrefix(n, "x-amz-")
}

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "..."
}
