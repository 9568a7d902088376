// Package batchinput owns the rules for a Batch API input file (JSONL): what
// one line must hold and the file's caps. The files API applies them while
// an upload streams (a bad line → 400, nothing stored); the batch engine
// applies them again at plan time, through the same Validator, so both agree
// on line numbers, byte offsets and what a line means.
//
// Only checks that need one line at a time live here. Checks that need the
// whole file or the configuration (unique custom_id, url equal to the batch's
// endpoint, a model the gateway knows) belong to the batch's planning step.
package batchinput

import (
	"fmt"
	"slices"
	"strings"
)

// Caps on an input file, as OpenAI sets them.
const (
	// MaxLines is the most requests one input file may hold.
	MaxLines = 50_000
	// MaxBytes is the largest input file (200 MiB).
	MaxBytes = 200 << 20
	// DefaultMaxLineBytes bounds one line, and so the memory validating it
	// takes. Every line becomes one request to a provider, so it is the JSON
	// request-body limit the gateway applies to direct calls (10 MiB).
	DefaultMaxLineBytes = 10 << 20
)

// endpoints are the url values a line may name, and a batch's endpoint: the
// one declaration of the accepted batch endpoints. The gateway's model
// operations (server.Services.Operations) are exactly these — the
// composition root refuses to start otherwise — and docs/batches.md lists
// them (a test holds it to this).
var endpoints = []string{"/v1/chat/completions", "/v1/embeddings", "/v1/completions", "/v1/responses", "/v1/moderations", "/v1/messages"}

// Endpoints returns the batch endpoints a line's url may name.
func Endpoints() []string { return slices.Clone(endpoints) }

// IsEndpoint reports whether url is one of Endpoints.
func IsEndpoint(url string) bool { return slices.Contains(endpoints, url) }

// Line is one validated request line.
type Line struct {
	// Number is the 1-based physical line number.
	Number int
	// Offset is the byte offset of the line's first byte in the file; End is
	// the offset just past its line terminator (the next line's Offset).
	Offset, End int64
	CustomID    string
	Method      string
	URL         string
	// Body is the raw JSON object of "body" and Raw the whole line (without
	// its terminator). Both alias the validator's buffer: they are valid only
	// during the OnLine call.
	Body []byte
	Raw  []byte
}

// LineError is a line that breaks the rules.
type LineError struct {
	Line   int
	Reason string
}

func (e *LineError) Error() string { return fmt.Sprintf("line %d: %s", e.Line, e.Reason) }

// Limit names a file-wide cap.
type Limit string

// The file-wide caps a LimitError can name.
const (
	LimitLines Limit = "lines"
	LimitBytes Limit = "bytes"
)

// LimitError is a file over one of its caps.
type LimitError struct {
	Limit Limit
	Max   int64
}

func (e *LimitError) Error() string {
	if e.Limit == LimitLines {
		return fmt.Sprintf("the file holds more than %d requests", e.Max)
	}
	return fmt.Sprintf("the file is larger than %d bytes (%s)", e.Max, humanBytes(e.Max))
}

func humanBytes(n int64) string {
	switch {
	case n >= 1<<20 && n%(1<<20) == 0:
		return fmt.Sprintf("%d MiB", n>>20)
	case n >= 1<<10 && n%(1<<10) == 0:
		return fmt.Sprintf("%d KiB", n>>10)
	}
	return fmt.Sprintf("%d B", n)
}

func quoteList(list []string) string {
	q := make([]string, len(list))
	for i, s := range list {
		q[i] = fmt.Sprintf("%q", s)
	}
	return strings.Join(q, ", ")
}
