package gemini

import (
	"github.com/sluice-gateway/sluice/pkg/jsonscan"
	"github.com/sluice-gateway/sluice/pkg/oai"
)

// UsageMetadata is a Gemini (and Vertex AI) answer's usageMetadata: the one
// schema the chat translator and the passthrough's meter decode.
type UsageMetadata struct {
	PromptTokenCount        int64 `json:"promptTokenCount"`
	ToolUsePromptTokenCount int64 `json:"toolUsePromptTokenCount"`
	CandidatesTokenCount    int64 `json:"candidatesTokenCount"`
	ThoughtsTokenCount      int64 `json:"thoughtsTokenCount"`
	CachedContentTokenCount int64 `json:"cachedContentTokenCount"`
	TotalTokenCount         int64 `json:"totalTokenCount"`
}

var usageMetadata = jsonscan.NewCountSchema[UsageMetadata]()

// Fields are u's counts for jsonscan.Counts, by its tags.
func (u *UsageMetadata) Fields() []jsonscan.CountField { return usageMetadata.Fields(u) }

// Decode decodes a usageMetadata object into u as json.Unmarshal would (the
// relay-path decoder: no reflection a call; a fuzz test holds it to
// encoding/json).
func (u *UsageMetadata) Decode(v []byte) bool { return usageMetadata.Decode(v, u) }

// OpenAI is the usage in OpenAI's shape: prompt tokens (tool-use prompt
// tokens included), completion tokens (thoughts included, as OpenAI counts
// reasoning), cached and reasoning details, and the total (the sum when
// Google gave none).
func (u *UsageMetadata) OpenAI() oai.Usage {
	o := oai.Usage{PromptTokens: u.PromptTokenCount + u.ToolUsePromptTokenCount, CompletionTokens: u.CandidatesTokenCount + u.ThoughtsTokenCount, TotalTokens: u.TotalTokenCount}
	o.PromptTokensDetails.CachedTokens = u.CachedContentTokenCount
	o.CompletionTokensDetails.ReasoningTokens = u.ThoughtsTokenCount
	if o.TotalTokens == 0 {
		o.TotalTokens = o.PromptTokens + o.CompletionTokens
	}
	return o
}

// ParseError reads an error object, an error answer's or a stream's
// "error": {"code":429,"message":"…","status":"RESOURCE_EXHAUSTED"}.
func ParseError(obj []byte) (status, message string) {
	s := jsonscan.Strings(obj, "status", "message")
	return s[0], s[1]
}
