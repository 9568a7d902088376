package oai

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strconv"
	"unicode/utf8"

	"github.com/sluice-gateway/sluice/pkg/api"
	"github.com/sluice-gateway/sluice/pkg/jsonscan"
)

// MaxEmbeddingInputs is OpenAI's cap on inputs in one embeddings request.
const MaxEmbeddingInputs = 2048

// InputKind is the form of an embeddings request's input.
type InputKind int

// Forms of embeddings input (OpenAI accepts all four).
const (
	InputString      InputKind = iota + 1 // "text"
	InputStrings                          // ["text", ...]
	InputTokens                           // [1, 2, 3]: one input as token ids
	InputTokenArrays                      // [[1, 2], [3]]
)

// EmbeddingRequest is a validated POST /v1/embeddings body. Only the members
// sluice needs are decoded; the body itself is kept and forwarded as it came.
type EmbeddingRequest struct {
	Model string
	// Input is the raw JSON of input (a slice of the body).
	Input      json.RawMessage
	InputKind  InputKind
	InputCount int
	// EncodingFormat is as given: "", EncodingFloat or EncodingBase64.
	EncodingFormat string
	Dimensions     int // 0: not given
	User           string
	// MockResponse is LiteLLM's mock_response: answer from it instead of
	// calling a provider (nil: not given).
	MockResponse *Mock

	doc
}

// Encoding is the encoding the client expects its vectors in.
func (r *EmbeddingRequest) Encoding() string {
	if r.EncodingFormat == EncodingBase64 {
		return EncodingBase64
	}
	return EncodingFloat
}

// Extras returns the members named of the request body that sluice does not
// model: LiteLLM's provider-specific extras, such as input_type, which
// providers that translate the request read. Absent and null members are
// left out; a member given twice is a 400 naming it (a provider could read
// either copy).
func (r *EmbeddingRequest) Extras(names ...string) (Extras, error) {
	var x Extras
	err := jsonscan.Members(r.body, func(name, v []byte) error {
		for _, want := range names {
			if string(name) != want {
				continue
			}
			if _, dup := x[want]; dup {
				return api.InvalidValue(want, "'%s' is given more than once.", want)
			}
			if jsonscan.Null(v) {
				continue
			}
			if x == nil {
				x = Extras{}
			}
			x[want] = v
		}
		return nil
	})
	if err != nil {
		var ae *api.Error // declared here: errors.As moves it to the heap
		if errors.As(err, &ae) {
			return nil, err
		}
		// Parse validated the body; only a request not built by it lands here.
		return nil, api.InvalidJSON("Request body must be a JSON object.")
	}
	return x, nil
}

// Extras are raw JSON values of request members, by name.
type Extras map[string]json.RawMessage

// String returns the string member name; given is false when it is absent.
// Another type is a 400 naming it.
func (x Extras) String(name string) (value string, given bool, err error) {
	v, ok := x[name]
	if !ok {
		return "", false, nil
	}
	return stringField(field{name, v})
}

// Bool returns the boolean member name; given is false when it is absent.
// Another type is a 400 naming it.
func (x Extras) Bool(name string) (value, given bool, err error) {
	switch v, ok := x[name]; {
	case !ok:
		return false, false, nil
	case string(v) == "true":
		return true, true, nil
	case string(v) == "false":
		return false, true, nil
	}
	return false, false, api.InvalidValue(name, "Invalid type for '%s': expected a boolean.", name)
}

// ModerationRequest is a validated POST /v1/moderations body.
type ModerationRequest struct {
	// Model is "" when the client named none; the moderations endpoint
	// picks the default before routing.
	Model string
	// Input is the raw JSON of input (a slice of the body).
	Input      json.RawMessage
	InputCount int
	// Multimodal is true for an array of {type: text|image_url} parts.
	Multimodal bool

	doc
}

// doc is a request body with the span of its model member.
type doc struct {
	body       []byte
	modelStart int // span of the model value; modelStart < 0 when absent
	modelEnd   int
}

// Raw returns the body as the client sent it.
func (d doc) Raw() []byte { return d.body }

// Body returns the request body with its model member set to model (JSON
// encoded). Everything else is the client's bytes, unchanged; when the model
// is already model, the body itself is returned without a copy.
func (d doc) Body(model string) []byte {
	if d.modelStart >= 0 && plainLiteral(d.body[d.modelStart:d.modelEnd], model) {
		return d.body // the usual case: the model goes on under its own name
	}
	lit := jsonscan.AppendString(nil, model)
	if d.modelStart >= 0 {
		if bytes.Equal(d.body[d.modelStart:d.modelEnd], lit) {
			return d.body
		}
		out := make([]byte, 0, len(d.body)-(d.modelEnd-d.modelStart)+len(lit))
		out = append(out, d.body[:d.modelStart]...)
		out = append(out, lit...)
		return append(out, d.body[d.modelEnd:]...)
	}
	// No model member: insert one first.
	open := bytes.IndexByte(d.body, '{')
	rest := d.body[open+1:]
	out := make([]byte, 0, len(d.body)+len(lit)+10)
	out = append(out, d.body[:open+1]...)
	out = append(out, `"model":`...)
	out = append(out, lit...)
	if len(bytes.TrimSpace(rest)) > 0 && bytes.TrimSpace(rest)[0] != '}' {
		out = append(out, ',')
	}
	return append(out, rest...)
}

// plainLiteral reports whether lit is the JSON string s written without
// escapes, as quote would write it.
func plainLiteral(lit []byte, s string) bool {
	if len(lit) != len(s)+2 || lit[0] != '"' || lit[len(lit)-1] != '"' || string(lit[1:len(lit)-1]) != s {
		return false
	}
	for i := 0; i < len(s); i++ {
		if c := s[i]; c < 0x20 || c == '"' || c == '\\' || c == '<' || c == '>' || c == '&' || c >= utf8.RuneSelf {
			return false // quote escapes it, or may
		}
	}
	return true
}

// fields are the spans of the top-level members a parser asked for: a few,
// searched in order (a map cost its allocations and a hash a member).
type fields []field

// field is a member the parser asked for: its name, and its value (nil
// when absent), what the typed readers (stringField, ...) take.
type field struct {
	name  string
	value []byte
}

// get returns the value of the member name, and whether it was given.
func (f fields) get(name string) ([]byte, bool) {
	for _, m := range f {
		if m.name == name {
			return m.value, true
		}
	}
	return nil, false
}

// member returns the member name, its value nil when absent.
func (f fields) member(name string) field {
	v, _ := f.get(name)
	return field{name, v}
}

// parseTop validates body as one JSON object and returns the values of the
// wanted members (absent ones are missing) and the span of
// model. A wanted member given twice is refused: a provider could read
// either copy.
func parseTop(body []byte, wanted ...string) (fields, doc, error) {
	return parseTopInto(make(fields, 0, len(wanted)), body, wanted...)
}

// parseTopInto is parseTop appending to f, which a caller that keeps no
// fields can have on its stack.
func parseTopInto(f fields, body []byte, wanted ...string) (fields, doc, error) {
	d := doc{body: body, modelStart: -1, modelEnd: -1}
	i := jsonscan.SkipSpace(body, 0)
	if i == len(body) {
		return nil, d, api.InvalidJSON("Request body is empty; expected a JSON object.")
	}
	// The walk checks the values as it goes (one crossing of the body, not
	// a validation and then a walk); when it could not tell, or failed,
	// Valid decides, so that invalid JSON is refused as such before
	// anything the walk found.
	valid, err := jsonscan.MembersChecked(body, func(name, v []byte) error {
		for _, w := range wanted {
			if string(name) != w {
				continue
			}
			if _, dup := f.get(w); dup {
				return api.InvalidValue(w, "'%s' is given more than once.", w)
			}
			f = append(f, field{w, v})
			if w == "model" {
				d.modelStart, d.modelEnd = jsonscan.Span(body, v)
			}
		}
		return nil
	})
	if valid && err == nil {
		return f, d, nil
	}
	if !jsonscan.Valid(body) {
		return nil, d, invalidJSON(body)
	}
	if body[i] != '{' {
		return nil, d, api.InvalidJSON("Request body must be a JSON object.")
	}
	if err != nil {
		return nil, d, membersError(err)
	}
	return f, d, nil
}

// membersError is the error of a walk over a request's members: a problem
// the walk named, else the JSON's. (Its own function: the error the walk
// named is found through a variable errors.As moves to the heap, which
// only a failed walk should pay for.)
func membersError(err error) error {
	var ae *api.Error
	if errors.As(err, &ae) {
		return err
	}
	return api.InvalidJSON("Request body is not valid JSON: %v.", err)
}

// invalidJSON describes why body is not valid JSON (only on the error path).
func invalidJSON(body []byte) error {
	var v any
	err := json.Unmarshal(body, &v)
	var syntax *json.SyntaxError
	switch {
	case errors.As(err, &syntax):
		return api.InvalidJSON("Request body is not valid JSON: %s (at byte %d).", syntax.Error(), syntax.Offset)
	case errors.Is(err, io.ErrUnexpectedEOF):
		return api.InvalidJSON("Request body is not valid JSON: it ends too early.")
	case err != nil:
		return api.InvalidJSON("Request body is not valid JSON: %v.", err)
	}
	return api.InvalidJSON("Request body is not valid JSON.")
}

// stringField decodes an optional string member; absent and null give "".
func stringField(m field) (string, bool, error) {
	name, v := m.name, m.value
	if jsonscan.Null(v) {
		return "", false, nil
	}
	if v[0] != '"' {
		return "", false, api.InvalidValue(name, "Invalid type for '%s': expected a string.", name)
	}
	s, err := jsonscan.String(v)
	if err != nil {
		return "", false, api.InvalidValue(name, "Invalid string for '%s'.", name)
	}
	return s, true, nil
}

// modelField decodes the model member m; required: absent is a 400.
func modelField(m field, required bool) (string, error) {
	model, given, err := stringField(m)
	if err != nil {
		return "", err
	}
	if !given {
		if required {
			return "", api.MissingParam("model")
		}
		return "", nil
	}
	if model == "" {
		return "", api.InvalidValue("model", "'model' must not be empty.")
	}
	return model, nil
}

// ParseEmbeddingRequest validates an embeddings request body: a JSON object
// with a model, an input in one of OpenAI's four forms (at most
// MaxEmbeddingInputs inputs, none empty), and optional encoding_format
// (float|base64), dimensions (a positive integer), user and LiteLLM's
// mock_response (a string, or an array of at most MaxMockDimensions
// numbers). Every problem is a 400 naming the field. The returned request
// keeps body.
func ParseEmbeddingRequest(body []byte) (*EmbeddingRequest, error) {
	var members [6]field
	f, d, err := parseTopInto(members[:0], body, "model", "input", "encoding_format", "dimensions", "user", "mock_response")
	if err != nil {
		return nil, err
	}
	req := &EmbeddingRequest{doc: d}
	if req.Model, err = modelField(f.member("model"), true); err != nil {
		return nil, err
	}
	in, ok := f.get("input")
	if !ok || jsonscan.Null(in) {
		return nil, api.MissingParam("input")
	}
	req.Input = in
	if req.InputKind, req.InputCount, err = embeddingInput(in); err != nil {
		return nil, err
	}
	if req.EncodingFormat, err = encodingField(f); err != nil {
		return nil, err
	}
	if v, ok := f.get("dimensions"); ok && !jsonscan.Null(v) {
		n, err := strconv.ParseInt(string(v), 10, 32)
		if err != nil || n < 1 {
			return nil, api.InvalidValue("dimensions", "'dimensions' must be a positive integer, not %s.", truncate(string(v), 40))
		}
		req.Dimensions = int(n)
	}
	if req.User, _, err = stringField(f.member("user")); err != nil {
		return nil, err
	}
	if v, ok := f.get("mock_response"); ok && !jsonscan.Null(v) {
		if req.MockResponse, err = parseMock(v); err != nil {
			return nil, err
		}
	}
	return req, nil
}

// encodingField reads encoding_format: "", EncodingFloat or EncodingBase64.
func encodingField(f fields) (string, error) {
	switch v, _ := f.get("encoding_format"); string(v) {
	case `"float"`: // the usual literals: the constants, not a decoded copy
		return EncodingFloat, nil
	case `"base64"`:
		return EncodingBase64, nil
	}
	format, given, err := stringField(f.member("encoding_format"))
	if err != nil {
		return "", err
	}
	if given && format != EncodingFloat && format != EncodingBase64 {
		return "", api.InvalidValue("encoding_format", "'encoding_format' must be 'float' or 'base64', not %q.", format)
	}
	return format, nil
}

const inputTypeMessage = "'input' must be a string, an array of strings, an array of token ids (integers), or an array of token-id arrays."

// embeddingInput checks input's form and counts its inputs.
func embeddingInput(in []byte) (InputKind, int, error) {
	switch in[0] {
	case '"':
		if len(in) == 2 {
			return 0, 0, api.InvalidValue("input", "'input' must not be an empty string.")
		}
		return InputString, 1, nil
	case '[':
	default:
		return 0, 0, api.InvalidValue("input", inputTypeMessage)
	}
	var (
		kind  InputKind
		count int
	)
	err := jsonscan.Elements(in, func(el []byte) error {
		var (
			k   InputKind
			bad error
		)
		switch {
		case el[0] == '"':
			k = InputStrings
			if len(el) == 2 {
				bad = api.InvalidValue("input", "'input[%d]' is an empty string; every input must be non-empty.", count)
			}
		case el[0] == '[':
			k = InputTokenArrays
			bad = tokenArray(el, count)
		case isNonNegativeInteger(el):
			k = InputTokens
		case el[0] == '-' || (el[0] >= '0' && el[0] <= '9'):
			bad = api.InvalidValue("input", "'input[%d]' is %s; token ids are non-negative integers.", count, truncate(string(el), 40))
		default:
			bad = api.InvalidValue("input", inputTypeMessage)
		}
		if bad == nil && kind != 0 && k != kind {
			bad = api.InvalidValue("input", "'input' mixes kinds of items; "+inputTypeMessage)
		}
		kind = k
		count++
		return bad
	})
	if err != nil {
		return 0, 0, elementsError(err, "'input' is not a valid JSON array.")
	}
	if count == 0 {
		return 0, 0, api.InvalidValue("input", "'input' must not be an empty array.")
	}
	if kind == InputTokens {
		return InputTokens, 1, nil
	}
	if count > MaxEmbeddingInputs {
		return 0, 0, api.InvalidValue("input", "'input' has %d items; at most %d inputs are allowed in one request.", count, MaxEmbeddingInputs)
	}
	return kind, count, nil
}

// tokenArray checks one element of an array of token arrays.
func tokenArray(el []byte, index int) error {
	n := 0
	err := jsonscan.Elements(el, func(v []byte) error {
		if !isNonNegativeInteger(v) {
			return api.InvalidValue("input", "'input[%d]' must be an array of token ids (non-negative integers).", index)
		}
		n++
		return nil
	})
	switch {
	case err != nil:
		return elementsError(err, fmt.Sprintf("'input[%d]' is not a valid JSON array.", index))
	case n == 0:
		return api.InvalidValue("input", "'input[%d]' is an empty token array; every input must be non-empty.", index)
	}
	return nil
}

// elementsError is the error of a walk over input's elements: a problem a
// callback named, else the structure's.
func elementsError(err error, malformed string) error {
	var ae *api.Error
	if errors.As(err, &ae) {
		return err
	}
	return api.InvalidValue("input", "%s", malformed)
}

// ParseModerationRequest validates a moderations request body: a JSON object
// with an optional model and an input that is a string, a non-empty array of
// strings, or a non-empty array of multimodal parts ({"type":"text","text"}
// or {"type":"image_url","image_url":{"url"}}).
func ParseModerationRequest(body []byte) (*ModerationRequest, error) {
	var members [2]field
	f, d, err := parseTopInto(members[:0], body, "model", "input")
	if err != nil {
		return nil, err
	}
	req := &ModerationRequest{doc: d}
	if req.Model, err = modelField(f.member("model"), false); err != nil {
		return nil, err
	}
	in, ok := f.get("input")
	if !ok || jsonscan.Null(in) {
		return nil, api.MissingParam("input")
	}
	req.Input = in
	if req.InputCount, req.Multimodal, err = moderationInput(in); err != nil {
		return nil, err
	}
	return req, nil
}

const moderationInputMessage = "'input' must be a string, an array of strings, or an array of parts like {\"type\":\"text\",\"text\":\"...\"} and {\"type\":\"image_url\",\"image_url\":{\"url\":\"...\"}}."

func moderationInput(in []byte) (count int, multimodal bool, err error) {
	switch in[0] {
	case '"':
		return 1, false, nil
	case '[':
	default:
		return 0, false, api.InvalidValue("input", moderationInputMessage)
	}
	var strs, parts int
	err = jsonscan.Elements(in, func(el []byte) error {
		var bad error
		switch el[0] {
		case '"':
			strs++
		case '{':
			parts++
			bad = moderationPart(el, strs+parts-1)
		default:
			bad = api.InvalidValue("input", moderationInputMessage)
		}
		if bad == nil && strs > 0 && parts > 0 {
			bad = api.InvalidValue("input", "'input' mixes strings and parts; "+moderationInputMessage)
		}
		return bad
	})
	switch {
	case err != nil:
		return 0, false, elementsError(err, "'input' is not a valid JSON array.")
	case strs+parts == 0:
		return 0, false, api.InvalidValue("input", "'input' must not be an empty array.")
	}
	return strs + parts, parts > 0, nil
}

// moderationPart checks one multimodal part.
func moderationPart(el []byte, index int) error {
	var p struct {
		Type     *string `json:"type"`
		Text     *string `json:"text"`
		ImageURL *struct {
			URL *string `json:"url"`
		} `json:"image_url"`
	}
	if err := json.Unmarshal(el, &p); err != nil {
		return api.InvalidValue("input", "'input[%d]' has a member of the wrong type: %s", index, moderationInputMessage)
	}
	switch {
	case p.Type == nil:
		return api.InvalidValue("input", "'input[%d].type' is required ('text' or 'image_url').", index)
	case *p.Type == "text":
		if p.Text == nil {
			return api.InvalidValue("input", "'input[%d].text' is required for a text part.", index)
		}
	case *p.Type == "image_url":
		if p.ImageURL == nil || p.ImageURL.URL == nil || *p.ImageURL.URL == "" {
			return api.InvalidValue("input", "'input[%d].image_url.url' is required for an image_url part.", index)
		}
	default:
		return api.InvalidValue("input", "'input[%d].type' must be 'text' or 'image_url', not %q.", index, truncate(*p.Type, 40))
	}
	return nil
}

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "…"
}

// isNonNegativeInteger reports whether v is a JSON integer ≥ 0 (no fraction,
// exponent or sign).
func isNonNegativeInteger(v []byte) bool {
	if len(v) == 0 {
		return false
	}
	for _, c := range v {
		if c < '0' || c > '9' {
			return false
		}
	}
	return true
}
