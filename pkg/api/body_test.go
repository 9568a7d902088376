package api

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// budgetBody is a request body with a budget (as the local server's are)
// that records what it is charged and refuses beyond max (when max > 0).
type budgetBody struct {
	io.Reader
	charges []int64
	max     int64
}

func (b *budgetBody) Close() error { return nil }

func (b *budgetBody) Charge(n int64) error {
	var total int64
	for _, c := range b.charges {
		total += c
	}
	if b.max > 0 && total+n > b.max {
		e := Unavailable("budget spent")
		e.RetryAfter = 1
		return e
	}
	b.charges = append(b.charges, n)
	return nil
}

func (b *budgetBody) charged() (total int64) {
	for _, c := range b.charges {
		total += c
	}
	return total
}

// stalled yields its bytes, then fails with err.
type stalled struct {
	data []byte
	err  error
}

func (s *stalled) Read(p []byte) (int, error) {
	if len(s.data) == 0 {
		return 0, s.err
	}
	n := copy(p, s.data)
	s.data = s.data[n:]
	return n, nil
}

func requestWith(body io.ReadCloser, length int64) *http.Request {
	r := httptest.NewRequest("POST", "/", nil)
	r.Body, r.ContentLength = body, length
	return r
}

// The reproduction: a body that declares 32 MiB and sends one byte
// holds one small buffer, not 32 MiB.
func TestReadBodyGrowsWithWhatArrived(t *testing.T) {
	errStop := errors.New("the client sends nothing more")
	b := &budgetBody{Reader: &stalled{data: []byte("{"), err: errStop}}
	_, err := ReadBody(httptest.NewRecorder(), requestWith(b, 32<<20), 64<<20)
	if AsError(err).Status != http.StatusBadRequest || !errors.Is(err, errStop) {
		t.Errorf("err = %v", err)
	}
	if got := b.charged(); got != smallBody {
		t.Errorf("a body that sent 1 byte of a declared 32 MiB held %d bytes", got)
	}
}

func TestReadBodyReadsWholeBodies(t *testing.T) {
	for _, tc := range []struct {
		name   string
		size   int
		length int64 // -1: unknown (chunked)
	}{
		{"empty", 0, 0},
		{"small", 700, 700},
		{"at the small size", smallBody, smallBody},
		{"larger, declared", 100<<10 + 3, 100<<10 + 3},
		{"larger, chunked", 100<<10 + 3, -1},
		{"small, chunked", 10, -1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			want := bytes.Repeat([]byte("abcdefg"), tc.size/7+1)[:tc.size]
			b := &budgetBody{Reader: io.MultiReader(bytes.NewReader(want[:tc.size/2]), bytes.NewReader(want[tc.size/2:]))}
			got, err := ReadBody(httptest.NewRecorder(), requestWith(b, tc.length), 1<<20)
			if err != nil || !bytes.Equal(got, want) {
				t.Fatalf("%d bytes, %v", len(got), err)
			}
			if tc.length >= 0 && cap(got) != tc.size {
				t.Errorf("a declared body of %d bytes is kept in a buffer of %d", tc.size, cap(got))
			}
			if b.charged() != int64(cap(got)) {
				t.Errorf("charged %d for a buffer of %d", b.charged(), cap(got))
			}
		})
	}
}

// The common body, a few KB of JSON, costs one buffer: its declared length
// bounds it without a limit's reader.
func TestReadBodySmallBodyAllocations(t *testing.T) {
	data := []byte(strings.Repeat("x", 3000))
	rd := bytes.NewReader(data)
	b := &budgetBody{Reader: rd}
	r := requestWith(b, int64(len(data)))
	w := httptest.NewRecorder()
	allocs := testing.AllocsPerRun(100, func() {
		rd.Reset(data)
		b.charges = b.charges[:0]
		if _, err := ReadBody(w, r, 1<<20); err != nil {
			t.Fatal(err)
		}
	})
	if allocs > 1 {
		t.Errorf("%.0f allocations to read a 3 KB body, want 1", allocs)
	}
}

func TestReadBodyErrors(t *testing.T) {
	cancelled, cancel := context.WithCancel(context.Background())
	cancel()
	slow := RequestTimeout("too slow")
	for _, tc := range []struct {
		name   string
		body   io.Reader
		max    int64
		length int64
		ctx    context.Context
		status int
	}{
		{"the server's verdict on the body stays", &stalled{data: []byte("{"), err: slow}, 0, 100, cancelled, 408},
		{"a client that hung up", &stalled{data: []byte("{"), err: io.ErrUnexpectedEOF}, 0, 100, cancelled, StatusClientClosed},
		{"a body cut short, client still there", &stalled{data: []byte("{"), err: io.ErrUnexpectedEOF}, 0, 100, context.Background(), 400},
		{"a body shorter than declared", strings.NewReader("{}"), 0, 100 << 10, context.Background(), 400},
		{"the budget is spent", strings.NewReader("{}"), 1, 2, context.Background(), 503},
		{"the budget is spent while growing", strings.NewReader(strings.Repeat("x", 100<<10)), 40 << 10, -1, context.Background(), 503},
		{"over the limit, chunked", strings.NewReader(strings.Repeat("x", 2<<20)), 0, -1, context.Background(), 413},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := requestWith(&budgetBody{Reader: tc.body, max: tc.max}, tc.length).WithContext(tc.ctx)
			_, err := ReadBody(httptest.NewRecorder(), r, 1<<20)
			if e := AsError(err); e.Status != tc.status {
				t.Errorf("%d %v, want %d", e.Status, err, tc.status)
			}
		})
	}
}

func TestDecodeJSONBodyFailures(t *testing.T) {
	cancelled, cancel := context.WithCancel(context.Background())
	cancel()
	for _, tc := range []struct {
		name   string
		err    error
		ctx    context.Context
		status int
		code   string
	}{
		{"too slow", RequestTimeout("too slow"), cancelled, 408, "request_timeout"},
		{"the client hung up", io.ErrUnexpectedEOF, cancelled, StatusClientClosed, "client_closed"},
		{"cut short", io.ErrUnexpectedEOF, context.Background(), 400, "invalid_json"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := requestWith(io.NopCloser(&stalled{data: []byte(`{"model":`), err: tc.err}), 100).WithContext(tc.ctx)
			var v sample
			e := AsError(DecodeJSON(httptest.NewRecorder(), r, 0, &v))
			if e.Status != tc.status || e.Code != tc.code {
				t.Errorf("%d %s, want %d %s", e.Status, e.Code, tc.status, tc.code)
			}
		})
	}
}

// DecodeJSON holds what it reads: a body with a budget is charged it.
func TestDecodeJSONChargesTheBudget(t *testing.T) {
	body := `{"model":"m","n":1}`
	b := &budgetBody{Reader: strings.NewReader(body)}
	var v sample
	if err := DecodeJSON(httptest.NewRecorder(), requestWith(b, int64(len(body))), 0, &v); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(sample{Model: "m", N: 1}, v); diff != "" || b.charged() != int64(len(body)) {
		t.Errorf("decoded %s; charged %d", diff, b.charged())
	}
	b = &budgetBody{Reader: strings.NewReader(body), max: 5}
	if e := AsError(DecodeJSON(httptest.NewRecorder(), requestWith(b, int64(len(body))), 0, &v)); e.Status != 503 {
		t.Errorf("over the budget: %d", e.Status)
	}
}
