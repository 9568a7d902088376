package oai

import (
	"github.com/sluice-gateway/sluice/pkg/api"
	"github.com/sluice-gateway/sluice/pkg/jsonscan"
)

// CompletionRequest is a validated POST /v1/completions body (the legacy
// text completions). sluice only forwards it, to OpenAI-family providers:
// it checks what it routes and meters by — model, prompt, stream,
// stream_options — and keeps the body.
type CompletionRequest struct {
	Model string
	// Prompt is the raw JSON of prompt (a slice of the body).
	Prompt       []byte
	Stream       bool
	IncludeUsage bool // stream_options.include_usage

	doc
	streamOptions []byte
}

// ParseCompletionRequest validates a completions request body: a JSON
// object with a model, a prompt (a string, an array of strings, of token
// ids or of token-id arrays) and optional stream and stream_options.
func ParseCompletionRequest(body []byte) (*CompletionRequest, error) {
	f, d, err := parseTop(body, "model", "prompt", "stream", "stream_options")
	if err != nil {
		return nil, err
	}
	r := &CompletionRequest{doc: d}
	if r.Model, err = modelField(f.member("model"), true); err != nil {
		return nil, err
	}
	p, ok := f.get("prompt")
	if !ok || jsonscan.Null(p) {
		return nil, api.MissingParam("prompt")
	}
	if p[0] != '"' && p[0] != '[' {
		return nil, api.InvalidValue("prompt", "'prompt' must be a string, an array of strings, an array of token ids, or an array of token-id arrays.")
	}
	r.Prompt = p
	if r.Stream, _, err = boolField(f.member("stream")); err != nil {
		return nil, err
	}
	if v, ok := f.get("stream_options"); ok && !jsonscan.Null(v) {
		if !r.Stream {
			return nil, api.InvalidValue("stream_options", "The 'stream_options' parameter is only allowed when 'stream' is enabled.")
		}
		if r.IncludeUsage, err = streamOptions(v); err != nil {
			return nil, err
		}
		r.streamOptions = v
	}
	return r, nil
}

// Forward returns the body for an OpenAI-family provider, as
// ChatRequest.Forward does.
func (r *CompletionRequest) Forward(model string, includeUsage bool) []byte {
	if !includeUsage || !r.Stream || r.IncludeUsage {
		return r.doc.Body(model)
	}
	return rebuild(r.doc, model, true, r.streamOptions, nil)
}

// ResponsesRequest is a validated POST /v1/responses body (OpenAI's
// Responses API), forwarded to OpenAI-family providers: sluice checks model,
// input and stream and keeps the body. The answer's usage is in its own
// shape (ParseResponseUsage).
type ResponsesRequest struct {
	Model string
	// Input is the raw JSON of input; nil when absent (a request may
	// continue a previous response instead).
	Input  []byte
	Stream bool

	doc
}

// ParseResponsesRequest validates a responses request body: a JSON object
// with a model, an optional input (a string or an array of input items) and
// an optional stream.
func ParseResponsesRequest(body []byte) (*ResponsesRequest, error) {
	f, d, err := parseTop(body, "model", "input", "stream")
	if err != nil {
		return nil, err
	}
	r := &ResponsesRequest{doc: d}
	if r.Model, err = modelField(f.member("model"), true); err != nil {
		return nil, err
	}
	if in, ok := f.get("input"); ok && !jsonscan.Null(in) {
		if in[0] != '"' && in[0] != '[' {
			return nil, api.InvalidValue("input", "'input' must be a string or an array of input items.")
		}
		r.Input = in
	}
	if r.Stream, _, err = boolField(f.member("stream")); err != nil {
		return nil, err
	}
	return r, nil
}

// Forward returns the body for an OpenAI-family provider: the client's
// bytes with model set to model.
func (r *ResponsesRequest) Forward(model string) []byte { return r.doc.Body(model) }

// rebuild rebuilds the object d with model set and the members strip names
// left out; with usage, stream_options.include_usage is set true
// (streamOptions is its current raw value, nil when absent or null).
func rebuild(d doc, model string, usage bool, streamOptions []byte, strip []string) []byte {
	body := d.body
	out := make([]byte, 0, len(body)+len(model)+40)
	out = append(out, '{')
	sep := false
	member := func(name, value []byte) {
		if sep {
			out = append(out, ',')
		}
		sep = true
		out = append(out, name...)
		out = append(out, ':')
		out = append(out, value...)
	}
	if usage && streamOptions == nil {
		member([]byte(`"stream_options"`), []byte(`{"include_usage":true}`))
	}
	prev := jsonscan.SkipSpace(body, 0) + 1
	jsonscan.Members(body, func(name, v []byte) error { // validated by the parse
		_, end := jsonscan.Span(body, v)
		nameStart := jsonscan.SkipSpace(body, prev)
		if body[nameStart] == ',' {
			nameStart = jsonscan.SkipSpace(body, nameStart+1)
		}
		nameEnd, _ := jsonscan.StringEnd(body, nameStart)
		prev = end
		lit := body[nameStart:nameEnd]
		for _, s := range strip {
			if string(name) == s {
				return nil
			}
		}
		switch string(name) {
		case "model":
			member(lit, jsonscan.AppendString(nil, model))
		case "stream_options":
			switch {
			case !usage:
				member(lit, v)
			case !jsonscan.Null(v):
				member(lit, withIncludeUsage(v))
			} // null: replaced by the member put first
		default:
			member(lit, v)
		}
		return nil
	})
	return append(out, '}')
}
