package anthropic

import "github.com/sluice-gateway/sluice/pkg/jsonscan"

// Usage is the counts of a Messages usage object: the one schema of
// Anthropic's usage, which the /anthropic passthrough's meter (and Claude
// on Vertex AI and Bedrock's InvokeModel) decodes.
type Usage struct {
	InputTokens              int64 `json:"input_tokens"`
	OutputTokens             int64 `json:"output_tokens"`
	CacheCreationInputTokens int64 `json:"cache_creation_input_tokens"`
	CacheReadInputTokens     int64 `json:"cache_read_input_tokens"`
}

// Fields are u's counts for jsonscan.Counts.
func (u *Usage) Fields() []jsonscan.CountField {
	return []jsonscan.CountField{
		{Name: "input_tokens", Dst: &u.InputTokens}, {Name: "output_tokens", Dst: &u.OutputTokens},
		{Name: "cache_creation_input_tokens", Dst: &u.CacheCreationInputTokens}, {Name: "cache_read_input_tokens", Dst: &u.CacheReadInputTokens},
	}
}

// Decode decodes a usage object into u as json.Unmarshal would (the
// relay-path decoder: no reflection; a fuzz test holds it to encoding/json).
func (u *Usage) Decode(v []byte) bool { return jsonscan.Counts(v, u.Fields()) }

// ParseError reads an error object, an error answer's or an error event's
// "error": {"type":"overloaded_error","message":"Overloaded"}.
func ParseError(obj []byte) (typ, message string) {
	s := jsonscan.Strings(obj, "type", "message")
	return s[0], s[1]
}
