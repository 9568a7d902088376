package passthrough

import (
	"net/http"
	"net/textproto"
	"slices"
	"strings"
	"sync"
)

// droppedRequestHeader reports the headers that never go upstream (canonical
// names):
//   - every header a client credential can arrive in — the sluice key or a
//     provider credential of the client's own (LiteLLM leaked these, #20432,
//     #38114, LIT-3550): the injected credential is the only one sent;
//   - hop-by-hop headers (RFC 9110 §7.6.1), which describe the client's
//     connection, not the upstream's;
//   - headers the transport sets itself (Host, Content-Length);
//   - Accept-Encoding, so that answers arrive uncompressed and their usage
//     can be read as they stream by;
//   - forwarding headers, which would tell the provider about sluice's
//     network and which an API Gateway adds (they broke LiteLLM's SigV4).
//
// Switches, not maps: a string switch compares lengths and bytes, where a map
// hashes every name of every call.
func droppedRequestHeader(k string) bool {
	switch k {
	case "Authorization", "Api-Key", "X-Api-Key", "X-Goog-Api-Key",
		"Ocp-Apim-Subscription-Key", "X-Sluice-Api-Key", "X-Litellm-Api-Key",
		"Proxy-Authorization", "Cookie", "X-Goog-Iam-Authorization-Token",
		"X-Goog-Iam-Authority-Selector",

		"Connection", "Proxy-Connection", "Keep-Alive", "Te", "Trailer",
		"Transfer-Encoding", "Upgrade", "Expect",

		"Host", "Content-Length", "Accept-Encoding",

		"Forwarded", "X-Forwarded-For", "X-Forwarded-Host", "X-Forwarded-Proto",
		"X-Forwarded-Port", "X-Real-Ip":
		return true
	}
	return false
}

// hopByHop reports the response headers that describe sluice's connection to
// the upstream and are not relayed.
func hopByHop(k string) bool {
	switch k {
	case "Connection", "Proxy-Connection", "Keep-Alive", "Te", "Trailer",
		"Transfer-Encoding", "Upgrade", "Proxy-Authenticate":
		return true
	}
	return false
}

// outboundHeader returns the headers to forward: the client's, minus the
// dropped ones, minus every header the client's Connection header names,
// minus X-Amz-* (SigV4 material of the client's own signature — including a
// session token — which sluice replaces with its own). Provider headers
// (anthropic-version, anthropic-beta, x-goog-*, x-amzn-bedrock-*) pass.
// The headers are written into out, an empty map.
func outboundHeader(out, in http.Header) http.Header {
	var named map[string]bool
	for _, v := range in["Connection"] {
		for f := range strings.SplitSeq(v, ",") {
			if f = strings.TrimSpace(f); f != "" {
				if named == nil {
					named = map[string]bool{}
				}
				named[textproto.CanonicalMIMEHeaderKey(f)] = true
			}
		}
	}
	for k, vs := range in {
		// Keys are canonical when they come from net/http; an edge adapter
		// that fills the map by hand must not slip a credential past us.
		ck := textproto.CanonicalMIMEHeaderKey(k)
		if dropped(ck, named) {
			continue
		}
		if prev, ok := out[ck]; ok {
			out[ck] = append(prev[:len(prev):len(prev)], vs...)
		} else {
			out[ck] = vs
		}
	}
	return out
}

// maxPooledHeader bounds the outbound header maps kept for reuse: a map
// does not shrink when cleared, and a request with many headers is rare.
const maxPooledHeader = 32

// headerPool reuses the outbound requests' header maps: a fresh map (~390
// B, pointerful) on every call was a third of what the relay allocated.
// A map goes back only once its call is over — the transport has answered
// and the answer's body is closed — so nothing reads it any more.
type headerPool struct{ pool sync.Pool }

// get returns an empty header map.
func (p *headerPool) get() http.Header {
	if h, ok := p.pool.Get().(http.Header); ok {
		return h
	}
	return make(http.Header, 8)
}

// put empties h and keeps it for another call, unless it grew large.
func (p *headerPool) put(h http.Header) {
	if len(h) > maxPooledHeader {
		return
	}
	clear(h)
	p.pool.Put(h)
}

// dropped reports whether a request header never goes upstream, under its
// canonical name or spelled with '_' for '-' (x_api_key): servers and proxies
// that fold the two (CGI and WSGI environments, nginx with
// underscores_in_headers) would read it as the header it imitates.
func dropped(name string, named map[string]bool) bool {
	drops := func(k string) bool { return droppedRequestHeader(k) || named[k] || strings.HasPrefix(k, "X-Amz-") }
	return drops(name) ||
		strings.IndexByte(name, '_') >= 0 && drops(textproto.CanonicalMIMEHeaderKey(strings.ReplaceAll(name, "_", "-")))
}

// redirectingHeader reports the headers that would send the client to the provider's own host, where
// its SDK would present the credential it holds — its sluice key — to the
// provider: Gemini's resumable-upload URLs, and a Location that leaves
// sluice's origin (leavesOrigin). They are not relayed; such a flow fails
// cleanly instead of leaking the key.
func redirectingHeader(k string) bool {
	return k == "X-Goog-Upload-Url" || k == "X-Goog-Upload-Control-Url"
}

// leavesOrigin reports whether a Location value could lead the client away
// from the origin it called, sluice. Only an absolute path cannot: no scheme,
// no authority ("//host"), no backslash (clients that parse URLs as browsers
// do read "/\host" as "//host"), no control character, space or non-ASCII
// byte (which parsers strip, stop at or normalise).
func leavesOrigin(v string) bool {
	if !strings.HasPrefix(v, "/") || strings.HasPrefix(v, "//") {
		return true
	}
	for i := 0; i < len(v); i++ {
		if c := v[i]; c <= ' ' || c >= 0x7f || c == '\\' {
			return true
		}
	}
	return false
}

// copyResponseHeader relays the upstream's headers, minus hop-by-hop ones,
// the redirecting ones, a Location unless every value of it is a path on
// sluice's origin, the upstream's own X-Request-Id (sluice's request id is
// the one returned), and any header whose name or value holds one of
// secrets (echoSet): an upstream, or a debugging proxy before it, that
// echoes the request's headers must not hand sluice's credential to the
// client.
func copyResponseHeader(dst, src http.Header, secrets *echoSet) {
	var named map[string]bool
	for _, v := range src["Connection"] {
		for f := range strings.SplitSeq(v, ",") {
			if f = strings.TrimSpace(f); f != "" {
				if named == nil {
					named = map[string]bool{}
				}
				named[textproto.CanonicalMIMEHeaderKey(f)] = true
			}
		}
	}
	for k, vs := range src {
		if hopByHop(k) || named[k] || k == "X-Request-Id" || redirectingHeader(k) ||
			k == "Location" && (len(vs) == 0 || slices.ContainsFunc(vs, leavesOrigin)) || secrets.revealedIn(k, vs) {
			continue
		}
		dst[k] = vs
	}
}
