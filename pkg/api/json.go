package api

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
)

// DefaultJSONLimit is the default cap on a JSON request body (10 MB).
const DefaultJSONLimit = 10 << 20

// WriteJSON writes v as JSON with status.
func WriteJSON(w http.ResponseWriter, status int, v any) {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false) // an API, not a web page: keep <, > and & readable
	if err := enc.Encode(v); err != nil {
		// Only a programming error (an unencodable type) gets here.
		http.Error(w, `{"error":{"message":"response encoding failed","type":"server_error","param":null,"code":"internal_error"}}`, http.StatusInternalServerError)
		return
	}
	h := w.Header()
	h.Set("Content-Type", "application/json")
	h.Set("Content-Length", fmt.Sprint(buf.Len()))
	w.WriteHeader(status)
	w.Write(buf.Bytes())
}

// DecodeJSON decodes the request body, at most limit bytes, into v. Every
// failure is an *Error naming the problem: an empty body, malformed JSON (with
// the byte offset), a field of the wrong type (naming the field), trailing
// data, a body over the limit (413), or the body's own failure (408: too
// slow; 499: the client left). The decoder holds the JSON value while it
// reads it: what it reads is charged to the body's BodyBudget.
func DecodeJSON(w http.ResponseWriter, r *http.Request, limit int64, v any) error {
	if limit <= 0 {
		limit = DefaultJSONLimit
	}
	budget, _ := r.Body.(BodyBudget)
	body := http.MaxBytesReader(w, &watchedBody{ReadCloser: r.Body, ctx: r.Context(), budget: budget}, limit)
	return decodeJSON(body, v)
}

// WatchBody returns r's body with its read errors passed through
// ClientGone, for a handler that parses the body as it arrives (a multipart
// form): a client that left is then a 499, not a malformed body.
func WatchBody(r *http.Request) io.ReadCloser {
	return &watchedBody{ReadCloser: r.Body, ctx: r.Context()}
}

// watchedBody is a request body whose read errors say whether the client
// left, and which charges what it reads to budget when the reader holds it.
type watchedBody struct {
	io.ReadCloser
	ctx    context.Context
	budget BodyBudget
}

func (b *watchedBody) Read(p []byte) (int, error) {
	n, err := b.ReadCloser.Read(p)
	if err != nil && err != io.EOF {
		err = ClientGone(b.ctx, err)
	}
	if n > 0 && b.budget != nil {
		if cerr := b.budget.Charge(int64(n)); cerr != nil {
			return n, cerr
		}
	}
	return n, err
}

func decodeJSON(body io.Reader, v any) error {
	dec := json.NewDecoder(body)
	if err := dec.Decode(v); err != nil {
		return jsonError(err)
	}
	// Exactly one JSON value: anything after it but whitespace is an error.
	if _, err := dec.Token(); err != io.EOF {
		if err != nil {
			return jsonError(err)
		}
		return InvalidJSON("Request body must contain a single JSON value; found data after it.")
	}
	return nil
}

func jsonError(err error) error {
	var (
		syntax    *json.SyntaxError
		typeErr   *json.UnmarshalTypeError
		tooLarge  *http.MaxBytesError
		invalidUn *json.InvalidUnmarshalError
	)
	var ae *Error
	switch {
	case errors.As(err, &ae):
		// The body's own failure (408, 499), or a custom UnmarshalJSON
		// that named its problem.
		return ae
	case errors.Is(err, io.EOF):
		return InvalidJSON("Request body is empty; expected a JSON object.")
	case errors.As(err, &tooLarge):
		return TooLarge("Request body is larger than the limit of %d bytes.", tooLarge.Limit)
	case errors.As(err, &syntax):
		return InvalidJSON("Request body is not valid JSON: %s (at byte %d).", syntax.Error(), syntax.Offset)
	case errors.Is(err, io.ErrUnexpectedEOF):
		return InvalidJSON("Request body is not valid JSON: it ends too early.")
	case errors.As(err, &typeErr):
		field := typeErr.Field
		if field == "" {
			return InvalidJSON("Request body must be a JSON %s, not %s.", goTypeName(typeErr.Type.Kind().String()), typeErr.Value)
		}
		e := InvalidValue(field, "Invalid type for '%s': expected %s, got %s.", field,
			goTypeName(typeErr.Type.Kind().String()), typeErr.Value)
		return e
	case errors.As(err, &invalidUn):
		return Internal(err)
	}
	return InvalidJSON("Request body is not valid JSON: %s.", strings.TrimPrefix(err.Error(), "json: "))
}

// goTypeName turns a reflect kind into the JSON word a client understands.
func goTypeName(kind string) string {
	switch kind {
	case "struct", "map":
		return "an object"
	case "slice", "array":
		return "an array"
	case "string":
		return "a string"
	case "bool":
		return "a boolean"
	case "int", "int8", "int16", "int32", "int64", "uint", "uint8", "uint16", "uint32", "uint64":
		return "an integer"
	case "float32", "float64":
		return "a number"
	}
	return kind
}

// List is the OpenAI list envelope.
type List[T any] struct {
	Object  string  `json:"object"`
	Data    []T     `json:"data"`
	FirstID *string `json:"first_id"`
	LastID  *string `json:"last_id"`
	HasMore bool    `json:"has_more"`
}

// NewList builds a page; id returns an element's id for first_id and last_id.
func NewList[T any](data []T, hasMore bool, id func(T) string) List[T] {
	l := List[T]{Object: "list", Data: data, HasMore: hasMore}
	if l.Data == nil {
		l.Data = []T{}
	}
	if len(data) > 0 {
		first, last := id(data[0]), id(data[len(data)-1])
		l.FirstID, l.LastID = &first, &last
	}
	return l
}
