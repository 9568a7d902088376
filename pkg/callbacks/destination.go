package callbacks

import (
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"
)

// What the destination packages (langfuse, langsmith, gcsbucket) share:
// how a failure is classified. A permanent failure is one that sending the
// same event again cannot fix (the destination refused it as invalid, the
// credentials are refused, the address is not allowed): the delivery worker
// dead-letters the event at once. Anything else (a 5xx, a 429, a timeout, a
// connection that failed) is retried with backoff.

// permanentError marks an error retrying cannot fix.
type permanentError struct{ err error }

func (e permanentError) Error() string { return e.err.Error() }
func (e permanentError) Unwrap() error { return e.err }

// Permanent marks err as one that retrying cannot fix (nil stays nil).
func Permanent(err error) error {
	if err == nil {
		return nil
	}
	return permanentError{err: err}
}

// IsPermanent reports whether err is permanent: marked so, or a connection
// the Guard refused.
func IsPermanent(err error) bool {
	var p permanentError
	return errors.As(err, &p) || errors.Is(err, ErrRefusedAddress)
}

// StatusError is a destination's non-success HTTP answer.
type StatusError struct {
	Destination string
	Status      int
	Message     string // the start of the answer's body, for the logs
	RetryAfter  time.Duration
}

func (e *StatusError) Error() string {
	return fmt.Sprintf("%s answered %d: %s", e.Destination, e.Status, e.Message)
}

// Drain reads what is left of an answer's body, within a bound, and closes
// it, so its connection can serve the next request.
func Drain(resp *http.Response) {
	io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10))
	resp.Body.Close()
}

// maxErrorBody bounds how much of an error answer is read.
const maxErrorBody = 2 << 10

// ResponseError turns a non-success answer into an error: permanent for the
// statuses a retry cannot change (400, 401, 403, 404, 405, 413, 422 and the
// redirects, which are never followed), retryable for the rest (408, 409,
// 425, 429, 5xx, ...). It reads a bounded part of the body; the caller
// closes it.
func ResponseError(destination string, resp *http.Response) error {
	b, _ := io.ReadAll(io.LimitReader(resp.Body, maxErrorBody))
	e := &StatusError{Destination: destination, Status: resp.StatusCode, Message: strings.TrimSpace(string(b))}
	if s := resp.Header.Get("Retry-After"); s != "" {
		if secs, err := time.ParseDuration(s + "s"); err == nil && secs > 0 {
			e.RetryAfter = secs
		}
	}
	return ClassifyStatus(e.Status, e)
}

// ClassifyStatus marks err permanent when status is one a retry cannot
// change (see ResponseError).
func ClassifyStatus(status int, err error) error {
	switch {
	case status >= 300 && status < 400,
		status == http.StatusBadRequest, status == http.StatusUnauthorized, status == http.StatusForbidden,
		status == http.StatusNotFound, status == http.StatusMethodNotAllowed,
		status == http.StatusRequestEntityTooLarge, status == http.StatusUnprocessableEntity:
		return Permanent(err)
	}
	return err
}

// EventTime turns a log event's epoch seconds (startTime, endTime, ...)
// into a time, to the microsecond.
func EventTime(sec float64) time.Time {
	if sec <= 0 {
		return time.Time{}
	}
	return time.UnixMicro(int64(sec*1e6 + 0.5)).UTC()
}
