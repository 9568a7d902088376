package providers

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"reflect"
	"strings"
	"testing"
)

type ctxKey struct{}

// A Target's request is the one http.NewRequestWithContext builds for a
// *bytes.Reader body, with the given headers: the same URL, host, protocol,
// length, context, and body of the same type (the transport writes such a
// body with the headers), which GetBody gives again.
func TestTargetPostIsNewRequests(t *testing.T) {
	ctx := context.WithValue(context.Background(), ctxKey{}, 1)
	header := http.Header{"Content-Type": {"application/json"}}
	for _, tc := range []struct{ url, body string }{
		{"https://api.openai.com/v1/embeddings", `{"model":"m","input":"x"}`},
		{"http://127.0.0.1:8080/v1/chat/completions?api-version=1", `{}`},
		{"http://host:/v1/x", `{"a":1}`}, // an empty port goes, as in NewRequest
		{"http://[::1]:/v1/x", "x"},
		{"http://host/v1/empty", ""},
	} {
		t.Run(tc.url, func(t *testing.T) {
			want, err := http.NewRequestWithContext(ctx, http.MethodPost, tc.url, strings.NewReader(tc.body))
			if err != nil {
				t.Fatal(err)
			}
			got, err := NewTarget(tc.url).Post(ctx, header, []byte(tc.body))
			if err != nil {
				t.Fatal(err)
			}
			if got.Method != want.Method || got.URL.String() != want.URL.String() || got.Host != want.Host ||
				got.Proto != want.Proto || got.ProtoMajor != want.ProtoMajor || got.ProtoMinor != want.ProtoMinor ||
				got.ContentLength != want.ContentLength || got.Context() != ctx {
				t.Errorf("got %s %s host %q %s length %d, want %s %s host %q %s length %d",
					got.Method, got.URL, got.Host, got.Proto, got.ContentLength, want.Method, want.URL, want.Host, want.Proto, want.ContentLength)
			}
			if !reflect.DeepEqual(got.Header, header) {
				t.Errorf("header %v", got.Header)
			}
			if tc.body == "" && (got.Body != http.NoBody || want.Body != http.NoBody) {
				t.Errorf("an empty body is %T (NewRequest's %T), want http.NoBody", got.Body, want.Body)
			}
			for i := range 2 { // GetBody gives the body again once it was read
				if i == 1 {
					if got.Body, err = got.GetBody(); err != nil {
						t.Fatal(err)
					}
				}
				b, err := io.ReadAll(got.Body)
				if err != nil || string(b) != tc.body {
					t.Errorf("read %d: body %q, %v; want %q", i, b, err, tc.body)
				}
			}
		})
	}
}

// The body is of the type NewRequest gives a *bytes.Reader: the one the
// transport recognises as in memory and writes with the headers.
func TestTargetPostBodyIsKnownInMemory(t *testing.T) {
	body := []byte(`{"model":"m"}`)
	want, _ := http.NewRequest(http.MethodPost, "http://h/x", bytes.NewReader(body))
	got, err := NewTarget("http://h/x").Post(context.Background(), nil, body)
	if err != nil {
		t.Fatal(err)
	}
	if reflect.TypeOf(got.Body) != reflect.TypeOf(want.Body) {
		t.Errorf("body %T, NewRequest's %T", got.Body, want.Body)
	}
}

// A URL that does not parse fails every Post with url.Parse's error, as
// NewRequest would.
func TestTargetThatDoesNotParse(t *testing.T) {
	const bad = "http://host:port/v1\x7f"
	_, want := http.NewRequest(http.MethodPost, bad, nil)
	_, err := NewTarget(bad).Post(context.Background(), nil, []byte("{}"))
	if err == nil || want == nil || err.Error() != want.Error() {
		t.Errorf("error %v, want %v", err, want)
	}
}

// Requests of one Target share its URL and headers, and the transport
// sends them as they are: each call's own body arrives, with the headers.
func TestTargetPostsThroughTheTransport(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		w.Header().Set("Content-Type", "application/json")
		io.WriteString(w, r.Method+" "+r.URL.Path+" "+r.Header.Get("Authorization")+" "+string(b))
	}))
	t.Cleanup(srv.Close)
	target := NewTarget(srv.URL + "/v1/embeddings")
	header := http.Header{"Authorization": {"Bearer sk-up"}, "Content-Type": {"application/json"}}
	client := NewHTTPClient()
	for _, body := range []string{`{"input":"a"}`, `{"input":"b"}`} {
		req, err := target.Post(context.Background(), header, []byte(body))
		if err != nil {
			t.Fatal(err)
		}
		ans, err := Relay(client, "openai", req)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(ans.Body)
		ans.Body.Close()
		if want := "POST /v1/embeddings Bearer sk-up " + body; string(b) != want {
			t.Errorf("upstream saw %q, want %q", b, want)
		}
	}
	if len(header) != 2 || target.url.String() != srv.URL+"/v1/embeddings" {
		t.Errorf("the shared header %v or URL %v was written", header, target.url)
	}
}

// A call's request costs four allocations: the request, its body reader,
// the reader's closer and GetBody (http.NewRequestWithContext spent seven
// with the URL join, parse and header map).
func TestTargetPostAllocations(t *testing.T) {
	target := NewTarget("https://api.openai.com/v1/embeddings")
	header := http.Header{"Content-Type": {"application/json"}}
	body := []byte(`{"model":"m","input":"x"}`)
	ctx := context.Background()
	allocs := testing.AllocsPerRun(100, func() {
		if _, err := target.Post(ctx, header, body); err != nil {
			t.Fatal(err)
		}
	})
	if allocs > 4 {
		t.Errorf("%v allocations a request, want at most 4", allocs)
	}
}
