package providers

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net/http"
	"net/url"
	"strings"
)

// Target is a URL a deployment posts its calls to (its api_base and an
// operation's path), parsed once when the deployment opens: a call's
// request is then built without parsing the URL again or allocating a
// header map, three allocations of the seven http.NewRequestWithContext
// spends on a relayed call.
type Target struct {
	url *url.URL
	err error // why the URL does not parse, returned by every Post
}

// NewTarget parses rawURL. A URL that does not parse is not refused here
// but by every Post, with url.Parse's error, as http.NewRequest would.
func NewTarget(rawURL string) Target {
	u, err := url.Parse(rawURL)
	if err != nil {
		return Target{err: err}
	}
	// As http.NewRequest normalises it (host: is host).
	if strings.LastIndexByte(u.Host, ':') > strings.LastIndexByte(u.Host, ']') {
		u.Host = strings.TrimSuffix(u.Host, ":")
	}
	return Target{url: u}
}

// Post builds a POST of body to t under ctx, as http.NewRequestWithContext
// would with a *bytes.Reader (its length and GetBody set, so the transport
// can resend it on a connection that died idle), with header as its
// headers. header is shared by the calls, so it must not be modified once
// calls are made: neither Send nor the transport writes a request's
// headers. The URL is shared too, and nothing writes it either (a
// RoundTripper must not modify its request).
func (t Target) Post(ctx context.Context, header http.Header, body []byte) (*http.Request, error) {
	if t.err != nil {
		return nil, t.err
	}
	if ctx == nil {
		return nil, errors.New("net/http: nil Context")
	}
	r := http.Request{
		Method: http.MethodPost, URL: t.url, Host: t.url.Host,
		Proto: "HTTP/1.1", ProtoMajor: 1, ProtoMinor: 1,
		Header: header, ContentLength: int64(len(body)),
		Body: http.NoBody, GetBody: noBody,
	}
	if len(body) > 0 {
		// The transport writes a body it knows to be in memory (a
		// *bytes.Reader behind io.NopCloser) with the headers, in one
		// write; any other reader gets a write of its own.
		r.Body = io.NopCloser(bytes.NewReader(body))
		r.GetBody = func() (io.ReadCloser, error) {
			return io.NopCloser(bytes.NewReader(body)), nil
		}
	}
	return r.WithContext(ctx), nil
}

func noBody() (io.ReadCloser, error) { return http.NoBody, nil }
