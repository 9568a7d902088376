package bedrock

import (
	"net/http"
	"strconv"

	"github.com/sluice-gateway/sluice/pkg/jsonscan"
	"github.com/sluice-gateway/sluice/pkg/oai"
)

// ConverseUsage is Converse's TokenUsage (the "usage" of an answer and of a
// stream's metadata event): the one schema the chat translator and the
// /bedrock passthrough's meter decode.
type ConverseUsage struct {
	InputTokens           int64 `json:"inputTokens"`
	OutputTokens          int64 `json:"outputTokens"`
	TotalTokens           int64 `json:"totalTokens"`
	CacheReadInputTokens  int64 `json:"cacheReadInputTokens"`
	CacheWriteInputTokens int64 `json:"cacheWriteInputTokens"`
}

var converseUsage = jsonscan.NewCountSchema[ConverseUsage]()

// Fields are u's counts for jsonscan.Counts, by its tags.
func (u *ConverseUsage) Fields() []jsonscan.CountField { return converseUsage.Fields(u) }

// Decode decodes a TokenUsage object into u as json.Unmarshal would (the
// relay-path decoder: no reflection a call; a fuzz test holds it to
// encoding/json).
func (u *ConverseUsage) Decode(v []byte) bool { return converseUsage.Decode(v, u) }

// OpenAI is the usage in OpenAI's shape. Prompt tokens include the cache's
// reads and writes (which Bedrock counts apart, as Anthropic does), as
// LiteLLM reports them; reads are also the cached tokens.
func (u *ConverseUsage) OpenAI() oai.Usage {
	o := oai.Usage{PromptTokens: u.InputTokens + u.CacheReadInputTokens + u.CacheWriteInputTokens, CompletionTokens: u.OutputTokens,
		CacheReadInputTokens: u.CacheReadInputTokens, CacheCreationInputTokens: u.CacheWriteInputTokens}
	o.PromptTokensDetails.CachedTokens = u.CacheReadInputTokens
	o.TotalTokens = o.PromptTokens + o.CompletionTokens
	return o
}

// InvocationMetricsKey is the member Bedrock adds to the last chunk of
// InvokeModelWithResponseStream.
const InvocationMetricsKey = "amazon-bedrock-invocationMetrics"

// InvocationMetrics is that member's counts; InvokeModel's answer headers
// carry the same (HeaderMetrics).
type InvocationMetrics struct {
	InputTokenCount           int64 `json:"inputTokenCount"`
	OutputTokenCount          int64 `json:"outputTokenCount"`
	CacheReadInputTokenCount  int64 `json:"cacheReadInputTokenCount"`
	CacheWriteInputTokenCount int64 `json:"cacheWriteInputTokenCount"`
}

var invocationMetrics = jsonscan.NewCountSchema[InvocationMetrics]()

// Fields are m's counts for jsonscan.Counts, by its tags.
func (m *InvocationMetrics) Fields() []jsonscan.CountField { return invocationMetrics.Fields(m) }

// Decode decodes the metrics object into m as json.Unmarshal would.
func (m *InvocationMetrics) Decode(v []byte) bool { return invocationMetrics.Decode(v, m) }

// HeaderMetrics reads the token counts InvokeModel puts in its answer's
// headers (absent or unreadable: 0).
func HeaderMetrics(h http.Header) InvocationMetrics {
	num := func(name string) int64 {
		n, _ := strconv.ParseInt(h.Get(name), 10, 64)
		return max(n, 0)
	}
	return InvocationMetrics{
		InputTokenCount:           num("X-Amzn-Bedrock-Input-Token-Count"),
		OutputTokenCount:          num("X-Amzn-Bedrock-Output-Token-Count"),
		CacheReadInputTokenCount:  num("X-Amzn-Bedrock-Cache-Read-Input-Token-Count"),
		CacheWriteInputTokenCount: num("X-Amzn-Bedrock-Cache-Write-Input-Token-Count"),
	}
}
