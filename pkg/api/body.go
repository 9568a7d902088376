package api

import (
	"errors"
	"fmt"
	"io"
	"net/http"
)

// ReadBody reads a model call's request body, at most limit bytes (413
// beyond), into one buffer sized from Content-Length when it is known: the
// body is kept whole because retries and fallbacks resend it.
func ReadBody(w http.ResponseWriter, r *http.Request, limit int64) ([]byte, error) {
	if limit <= 0 {
		limit = DefaultJSONLimit
	}
	if r.ContentLength > limit {
		return nil, TooLarge("Request body is larger than the limit of %d bytes.", limit)
	}
	body := http.MaxBytesReader(w, r.Body, limit)
	var (
		b   []byte
		err error
	)
	if r.ContentLength < 0 {
		b, err = io.ReadAll(body)
	} else {
		b = make([]byte, r.ContentLength)
		_, err = io.ReadFull(body, b)
	}
	var tooLarge *http.MaxBytesError
	switch {
	case err == nil:
		return b, nil
	case errors.As(err, &tooLarge):
		return nil, TooLarge("Request body is larger than the limit of %d bytes.", limit)
	case r.Context().Err() != nil:
		return nil, fmt.Errorf("read request body: %w", r.Context().Err())
	}
	e := InvalidJSON("The request body could not be read completely.")
	e.Err = err
	return nil, e
}
