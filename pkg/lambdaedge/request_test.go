package lambdaedge

import (
	"context"
	"encoding/base64"
	"io"
	"net/url"
	"slices"
	"strings"
	"testing"

	"github.com/aws/aws-lambda-go/events"
	"github.com/awslabs/aws-lambda-go-api-proxy/core"
	"github.com/google/go-cmp/cmp"
)

// restEvent is a REST API proxy event as API Gateway sends it for
// POST https://abc123.execute-api.us-east-1.amazonaws.com/prod{path}.
func restEvent(method, path string) events.APIGatewayProxyRequest {
	return events.APIGatewayProxyRequest{
		Resource:   path,
		Path:       path,
		HTTPMethod: method,
		Headers: map[string]string{
			"Host":          "abc123.execute-api.us-east-1.amazonaws.com",
			"Authorization": "Bearer sk-test",
			"Accept":        "application/json",
		},
		MultiValueHeaders: map[string][]string{
			"Host":          {"abc123.execute-api.us-east-1.amazonaws.com"},
			"Authorization": {"Bearer sk-test"},
			"Accept":        {"application/json"},
		},
		RequestContext: events.APIGatewayProxyRequestContext{
			AccountID:    "123456789012",
			Stage:        "prod",
			RequestID:    "c6af9ac6-7b61-11e6-9a41-93e8deadbeef",
			DomainName:   "abc123.execute-api.us-east-1.amazonaws.com",
			APIID:        "abc123",
			HTTPMethod:   method,
			Path:         "/prod" + path,
			ResourcePath: path,
			Identity:     events.APIGatewayRequestIdentity{SourceIP: "203.0.113.7", UserAgent: "curl/8.5.0"},
		},
	}
}

func TestNewRequest(t *testing.T) {
	e := restEvent("post", "/v1/files/file-abc%2Fdef/content")
	e.MultiValueHeaders["X-Tag"] = []string{"a", "b"}
	e.MultiValueQueryStringParameters = map[string][]string{"limit": {"10"}, "after": {"file a&b"}, "tag": {"x", "y"}}
	e.QueryStringParameters = map[string]string{"limit": "10", "after": "file a&b", "tag": "y"}
	raw := []byte{0, 1, 2, 0xff, 'h', 'i'}
	e.Body = base64.StdEncoding.EncodeToString(raw)
	e.IsBase64Encoded = true

	r, err := NewRequest(context.Background(), &e)
	if err != nil {
		t.Fatal(err)
	}
	if r.Method != "POST" {
		t.Errorf("Method = %q", r.Method)
	}
	if r.URL.Path != "/v1/files/file-abc/def/content" || r.URL.EscapedPath() != "/v1/files/file-abc%2Fdef/content" {
		t.Errorf("path = %q, escaped %q", r.URL.Path, r.URL.EscapedPath())
	}
	wantQuery := url.Values{"limit": {"10"}, "after": {"file a&b"}, "tag": {"x", "y"}}
	if diff := cmp.Diff(wantQuery, r.URL.Query()); diff != "" {
		t.Errorf("query mismatch (-want +got):\n%s", diff)
	}
	if got := r.Header.Values("X-Tag"); !slices.Equal(got, []string{"a", "b"}) {
		t.Errorf("X-Tag = %q", got)
	}
	if r.Host != "abc123.execute-api.us-east-1.amazonaws.com" || r.Header.Get("Host") != "" {
		t.Errorf("Host = %q, header %q", r.Host, r.Header.Get("Host"))
	}
	if r.RemoteAddr != "203.0.113.7" {
		t.Errorf("RemoteAddr = %q", r.RemoteAddr)
	}
	if r.RequestURI != r.URL.RequestURI() {
		t.Errorf("RequestURI = %q", r.RequestURI)
	}
	if r.ContentLength != int64(len(raw)) {
		t.Errorf("ContentLength = %d, want %d", r.ContentLength, len(raw))
	}
	body, err := io.ReadAll(r.Body)
	if err != nil || string(body) != string(raw) {
		t.Errorf("body = %q, %v", body, err)
	}
	rc, ok := ProxyRequestContext(r.Context())
	if !ok || rc.Stage != "prod" || rc.RequestID != e.RequestContext.RequestID {
		t.Errorf("ProxyRequestContext = %+v, %v", rc, ok)
	}
}

func TestNewRequestEdges(t *testing.T) {
	for _, tc := range []struct {
		name    string
		event   func(*events.APIGatewayProxyRequest)
		path    string // want r.URL.Path
		query   string // want r.URL.RawQuery
		body    string
		wantErr bool
	}{
		{name: "single-value maps only", event: func(e *events.APIGatewayProxyRequest) {
			e.MultiValueHeaders = nil
			e.QueryStringParameters = map[string]string{"b": "2", "a": "1"}
		}, path: "/p", query: "a=1&b=2"},
		{name: "decoded query char in path stays in the path", event: func(e *events.APIGatewayProxyRequest) {
			e.Path = "/gemini/v1/x?key=evil#frag"
		}, path: "/gemini/v1/x?key=evil#frag"},
		{name: "bare percent and space", event: func(e *events.APIGatewayProxyRequest) {
			e.Path = "/a b/100%"
		}, path: "/a b/100%"},
		{name: "colon in passthrough path", event: func(e *events.APIGatewayProxyRequest) {
			e.Path = "/gemini/v1beta/models/gemini-2.0-flash:generateContent"
		}, path: "/gemini/v1beta/models/gemini-2.0-flash:generateContent"},
		{name: "plain body", event: func(e *events.APIGatewayProxyRequest) {
			e.Body = `{"a":1}`
		}, path: "/p", body: `{"a":1}`},
		{name: "base64 with line breaks", event: func(e *events.APIGatewayProxyRequest) {
			e.Body = "aGVs\r\nbG8=\n"
			e.IsBase64Encoded = true
		}, path: "/p", body: "hello"},
		{name: "no method", event: func(e *events.APIGatewayProxyRequest) { e.HTTPMethod = "" }, wantErr: true},
		{name: "method with a space", event: func(e *events.APIGatewayProxyRequest) { e.HTTPMethod = "GET /x" }, wantErr: true},
		{name: "relative path", event: func(e *events.APIGatewayProxyRequest) { e.Path = "v1/models" }, wantErr: true},
		{name: "empty path", event: func(e *events.APIGatewayProxyRequest) { e.Path = "" }, wantErr: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := restEvent("GET", "/p")
			tc.event(&e)
			r, err := NewRequest(context.Background(), &e)
			if tc.wantErr {
				if err == nil {
					t.Fatalf("NewRequest succeeded: %s %s", r.Method, r.URL)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if r.URL.Path != tc.path || r.URL.RawQuery != tc.query {
				t.Errorf("path %q query %q, want %q %q", r.URL.Path, r.URL.RawQuery, tc.path, tc.query)
			}
			b, err := io.ReadAll(r.Body)
			if err != nil || string(b) != tc.body || r.ContentLength != int64(len(tc.body)) {
				t.Errorf("body %q (length %d), %v; want %q", b, r.ContentLength, err, tc.body)
			}
		})
	}
}

// TestNewRequestMatchesAPIProxy holds NewRequest to aws-lambda-go-api-proxy's
// conversion (what the buffered edge of most Go Lambdas uses) on everything
// a handler reads, so a route sees the same request buffered or streamed.
func TestNewRequestMatchesAPIProxy(t *testing.T) {
	upload := restEvent("POST", "/v1/files")
	upload.Body = base64.StdEncoding.EncodeToString([]byte("--b\r\nContent-Disposition: form-data; name=\"purpose\"\r\n\r\nbatch\r\n--b--\r\n"))
	upload.IsBase64Encoded = true
	upload.MultiValueHeaders["Content-Type"] = []string{"multipart/form-data; boundary=b"}
	list := restEvent("GET", "/v1/files")
	list.MultiValueQueryStringParameters = map[string][]string{"purpose": {"batch"}, "limit": {"2"}, "order": {"asc"}}
	passthrough := restEvent("POST", "/anthropic/v1/messages")
	passthrough.Body = `{"model":"claude","max_tokens":5,"messages":[]}`
	passthrough.MultiValueHeaders["Anthropic-Version"] = []string{"2023-06-01"}
	passthrough.MultiValueHeaders["Accept"] = []string{"text/event-stream", "application/json"}

	for name, e := range map[string]events.APIGatewayProxyRequest{"upload": upload, "list": list, "passthrough": passthrough} {
		t.Run(name, func(t *testing.T) {
			ours, err := NewRequest(context.Background(), &e)
			if err != nil {
				t.Fatal(err)
			}
			theirs, err := (&core.RequestAccessor{}).EventToRequest(e)
			if err != nil {
				t.Fatal(err)
			}
			if ours.Method != theirs.Method || ours.URL.EscapedPath() != theirs.URL.EscapedPath() || ours.RemoteAddr != theirs.RemoteAddr {
				t.Errorf("ours %s %s from %s, api-proxy %s %s from %s", ours.Method, ours.URL.EscapedPath(), ours.RemoteAddr,
					theirs.Method, theirs.URL.EscapedPath(), theirs.RemoteAddr)
			}
			if diff := cmp.Diff(theirs.URL.Query(), ours.URL.Query()); diff != "" {
				t.Errorf("query mismatch (-api-proxy +ours):\n%s", diff)
			}
			theirs.Header.Del("Host") // a server keeps Host in r.Host
			if diff := cmp.Diff(theirs.Header, ours.Header); diff != "" {
				t.Errorf("header mismatch (-api-proxy +ours):\n%s", diff)
			}
			a, _ := io.ReadAll(ours.Body)
			b, _ := io.ReadAll(theirs.Body)
			if string(a) != string(b) {
				t.Errorf("body %q, api-proxy %q", a, b)
			}
		})
	}
}

// FuzzNewRequest feeds arbitrary events: NewRequest never panics, and what it
// accepts is a request a server could have parsed, whose path is the event's.
func FuzzNewRequest(f *testing.F) {
	f.Add("GET", "/v1/models", "limit", "10", "QWxhZGRpbg==", true)
	f.Add("POST", "/gemini/v1/x:gen?key=1", "key", "a b", "{}", false)
	f.Add("DELETE", "/v1/files/%zz%2F", "", "", "", false)
	f.Add("PUT", "/\x00\xff", "k\x00", "\xff", "!!!", true)
	f.Fuzz(func(t *testing.T, method, path, qk, qv, body string, b64 bool) {
		e := events.APIGatewayProxyRequest{
			HTTPMethod: method, Path: path, Body: body, IsBase64Encoded: b64,
			MultiValueQueryStringParameters: map[string][]string{qk: {qv}},
			MultiValueHeaders:               map[string][]string{"X-A": {qv}},
		}
		r, err := NewRequest(context.Background(), &e)
		if err != nil {
			return
		}
		if _, err := url.ParseRequestURI(r.RequestURI); err != nil {
			t.Fatalf("RequestURI %q does not parse: %v", r.RequestURI, err)
		}
		if got, _ := url.PathUnescape(escapePath(path)); got != r.URL.Path {
			t.Fatalf("path %q became %q", path, r.URL.Path)
		}
		if !strings.HasPrefix(r.URL.Path, "/") {
			t.Fatalf("path %q", r.URL.Path)
		}
		if r.URL.Query().Get(qk) != qv && qk != "" {
			t.Fatalf("query %q=%q became %q", qk, qv, r.URL.RawQuery)
		}
		n, err := io.Copy(io.Discard, r.Body)
		if err == nil && n != r.ContentLength {
			t.Fatalf("read %d body bytes, ContentLength %d", n, r.ContentLength)
		}
	})
}
