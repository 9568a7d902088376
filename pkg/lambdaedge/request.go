// Package lambdaedge is where AWS Lambda meets sluice's http.Handler: API
// Gateway REST API proxy events become *http.Request values, and the
// handler's answer goes back buffered (events.APIGatewayProxyResponse) or
// streamed (API Gateway's response-streaming format); SQS events become
// per-message calls with partial batch failures. It is the only package
// besides functions/* that imports aws-lambda-go, so the capability packages
// run unchanged in the local process and in Lambda.
package lambdaedge

import (
	"context"
	"encoding/base64"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"sort"
	"strings"

	"github.com/aws/aws-lambda-go/events"
)

type proxyContextKey struct{}

// ProxyRequestContext returns the API Gateway request context (stage,
// request id, caller identity, ...) of the event a request came from.
func ProxyRequestContext(ctx context.Context) (events.APIGatewayProxyRequestContext, bool) {
	rc, ok := ctx.Value(proxyContextKey{}).(events.APIGatewayProxyRequestContext)
	return rc, ok
}

// NewRequest turns a REST API proxy event into the request a net/http server
// would have built for the same call: method, path (REST APIs deliver it
// still percent-encoded), multi-value query and headers, Host, the caller's
// address, and the body, base64-decoded as it is read when API Gateway
// encoded it (binary media types). The event's request context is reachable
// with ProxyRequestContext. An event that cannot be a request is an error.
func NewRequest(ctx context.Context, e *events.APIGatewayProxyRequest) (*http.Request, error) {
	method := strings.ToUpper(e.HTTPMethod)
	if method == "" || !validMethod(method) {
		return nil, fmt.Errorf("lambdaedge: event has no valid httpMethod (%q)", e.HTTPMethod)
	}
	if !strings.HasPrefix(e.Path, "/") {
		return nil, fmt.Errorf("lambdaedge: event path %q does not start with /", e.Path)
	}
	u, err := url.ParseRequestURI(escapePath(e.Path))
	if err != nil {
		return nil, fmt.Errorf("lambdaedge: event path %q: %w", e.Path, err)
	}
	u.RawQuery = encodeQuery(e.MultiValueQueryStringParameters, e.QueryStringParameters)

	var body io.Reader = strings.NewReader(e.Body)
	size := int64(len(e.Body))
	if e.IsBase64Encoded {
		body = base64.NewDecoder(base64.StdEncoding, body)
		size = decodedLen(e.Body)
	}
	r, err := http.NewRequestWithContext(context.WithValue(ctx, proxyContextKey{}, e.RequestContext), method, "/", body)
	if err != nil {
		return nil, fmt.Errorf("lambdaedge: build request: %w", err)
	}
	r.URL = u
	r.RequestURI = u.RequestURI()
	r.ContentLength = size
	if size == 0 {
		r.Body = http.NoBody
	}
	if len(e.MultiValueHeaders) > 0 {
		for k, vs := range e.MultiValueHeaders {
			for _, v := range vs {
				r.Header.Add(k, v)
			}
		}
	} else {
		for k, v := range e.Headers {
			r.Header.Add(k, v)
		}
	}
	// As on a server, Host lives in r.Host, not in the header map.
	r.Host = r.Header.Get("Host")
	r.Header.Del("Host")
	if r.Host == "" {
		r.Host = e.RequestContext.DomainName
	}
	r.RemoteAddr = e.RequestContext.Identity.SourceIP
	return r, nil
}

// validMethod reports whether m is an HTTP token (RFC 9110 §5.6.2).
func validMethod(m string) bool {
	for i := 0; i < len(m); i++ {
		c := m[i]
		if c <= ' ' || c >= 0x7f || strings.IndexByte(`"(),/:;<=>?@[\]{}`, c) >= 0 {
			return false
		}
	}
	return true
}

// escapePath percent-encodes what can never appear literally in an encoded
// path — '?', '#', spaces, control and non-ASCII bytes, a '%' that starts no
// escape — so that a path that arrives decoded (a test event, a custom
// integration) cannot smuggle a query or fragment in, while an encoded path
// (what REST APIs send) passes byte for byte.
func escapePath(p string) string {
	const hex = "0123456789ABCDEF"
	var b strings.Builder
	for i := 0; i < len(p); i++ {
		c := p[i]
		switch {
		case c == '%' && i+2 < len(p) && ishex(p[i+1]) && ishex(p[i+2]):
			b.WriteByte(c)
		case c == '%' || c == '?' || c == '#' || c <= ' ' || c >= 0x7f:
			b.WriteByte('%')
			b.WriteByte(hex[c>>4])
			b.WriteByte(hex[c&15])
		default:
			b.WriteByte(c)
		}
	}
	return b.String()
}

func ishex(c byte) bool {
	return '0' <= c && c <= '9' || 'a' <= c && c <= 'f' || 'A' <= c && c <= 'F'
}

// encodeQuery rebuilds the query string from the event's decoded parameters,
// keeping every value of a repeated key in order. API Gateway fills both maps;
// the multi-value one is the complete one.
func encodeQuery(multi map[string][]string, single map[string]string) string {
	q := url.Values{}
	if len(multi) > 0 {
		for k, vs := range multi {
			q[k] = append(q[k], vs...)
		}
	} else {
		for k, v := range single {
			q.Set(k, v)
		}
	}
	if len(q) == 0 {
		return ""
	}
	keys := make([]string, 0, len(q))
	for k := range q {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var b strings.Builder
	for _, k := range keys {
		for _, v := range q[k] {
			if b.Len() > 0 {
				b.WriteByte('&')
			}
			b.WriteString(url.QueryEscape(k))
			b.WriteByte('=')
			b.WriteString(url.QueryEscape(v))
		}
	}
	return b.String()
}

// decodedLen is the length of the standard-base64 text s once decoded (the
// decoder skips line breaks, so they are not counted). A malformed s makes
// reading the body fail, so a wrong length is never acted on.
func decodedLen(s string) int64 {
	n := int64(len(s)) - int64(strings.Count(s, "\n")) - int64(strings.Count(s, "\r"))
	s = strings.TrimRight(s, "\r\n")
	for i := 0; i < 2 && strings.HasSuffix(s, "="); i++ {
		s = s[:len(s)-1]
		n--
	}
	return n * 6 / 8
}
