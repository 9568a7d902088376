package api

import (
	"errors"
	"io"
	"net/http"
)

// BodyBudget is a request body that draws on its process's budget for
// request bodies held whole in memory: the local server's bodies do
// (pkg/gateway), so that slow clients together cannot make it hold more than
// the budget. A reader that keeps a body in memory charges each byte of
// buffer it adds before allocating it; the request's charges are given back
// when it ends. Charge fails with an *Error: 503 with Retry-After while the
// budget is spent, 413 when the body alone would need more than the whole
// budget. Bodies without a budget (a Lambda's, whole in its event) charge
// nothing.
type BodyBudget interface {
	Charge(n int64) error
}

// Sizes of ReadBody's buffers.
const (
	// smallBody is the largest declared length read into a buffer of
	// exactly that size allocated before the bytes arrive: the common body
	// (a few KB of JSON) costs one allocation, and a client that sends
	// nothing holds no more than this.
	smallBody = 32 << 10
	// firstChunk is the first buffer of a body of unknown length.
	firstChunk = 4 << 10
)

// ReadBody reads a request body whole, at most limit bytes (413 beyond): a
// model call's (kept whole because retries and fallbacks resend it) or a
// passthrough body that must be read before it is sent. The buffer grows
// with the bytes that arrive, never to a declared Content-Length ahead of
// them, and is charged to the body's BodyBudget as it grows. A body the
// server refused as it arrived (408: too slow) keeps its error; a client
// that left while it was read is a 499 (ClientGone).
func ReadBody(w http.ResponseWriter, r *http.Request, limit int64) ([]byte, error) {
	if limit <= 0 {
		limit = DefaultJSONLimit
	}
	if r.ContentLength > limit {
		return nil, TooLarge("Request body is larger than the limit of %d bytes.", limit)
	}
	if r.Body == nil {
		return nil, nil
	}
	budget, _ := r.Body.(BodyBudget)
	var body io.Reader = r.Body
	if r.ContentLength < 0 {
		// A declared length (at most limit, checked above) bounds the
		// read by itself: readAll reads no more than it.
		body = http.MaxBytesReader(w, r.Body, limit)
	}
	b, err := readAll(body, r.ContentLength, limit, budget)
	if err == nil {
		return b, nil
	}
	var (
		e        *Error
		tooLarge *http.MaxBytesError
	)
	switch {
	case errors.As(err, &e):
		return nil, err
	case errors.As(err, &tooLarge):
		return nil, TooLarge("Request body is larger than the limit of %d bytes.", limit)
	}
	if gone := ClientGone(r.Context(), err); gone != err {
		return nil, gone
	}
	e = InvalidJSON("The request body could not be read completely.")
	e.Err = err
	return nil, e
}

// readAll reads body: length bytes when length >= 0 (the server has checked
// that no more follow), else up to EOF. A small body is read into one buffer
// of its size; any other into one that doubles as it fills, up to length
// (or limit+1: body, a MaxBytesReader, fails before it gives limit+1 bytes),
// so that it never holds more than twice what arrived. budget, when not nil,
// is charged what each buffer adds before it is allocated.
func readAll(body io.Reader, length, limit int64, budget BodyBudget) ([]byte, error) {
	if length >= 0 && length <= smallBody {
		if err := charge(budget, length); err != nil {
			return nil, err
		}
		b := make([]byte, length)
		_, err := io.ReadFull(body, b)
		return b, err
	}
	size, most := int64(firstChunk), limit+1
	if length >= 0 {
		size, most = smallBody, length
	}
	if err := charge(budget, size); err != nil {
		return nil, err
	}
	b := make([]byte, 0, size)
	for {
		if int64(len(b)) == most && length >= 0 {
			return b, nil
		}
		if len(b) == cap(b) {
			next := min(2*int64(cap(b)), most)
			if err := charge(budget, next-int64(cap(b))); err != nil {
				return nil, err
			}
			nb := make([]byte, len(b), next)
			copy(nb, b)
			b = nb
		}
		n, err := body.Read(b[len(b):cap(b)])
		b = b[:len(b)+n]
		switch {
		case err == io.EOF && length >= 0 && int64(len(b)) < length:
			return nil, io.ErrUnexpectedEOF
		case err == io.EOF:
			return b, nil
		case err != nil:
			return nil, err
		}
	}
}

func charge(budget BodyBudget, n int64) error {
	if budget == nil || n == 0 {
		return nil
	}
	return budget.Charge(n)
}
