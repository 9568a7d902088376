package oai

import (
	"errors"
	"strconv"

	"github.com/sluice-gateway/sluice/pkg/jsonscan"
)

// Usage is an answer's token usage, in OpenAI's shape: the usage object of
// chat completions, completions, embeddings and responses (which an
// embeddings answer fills only in part).
type Usage struct {
	PromptTokens            int64                   `json:"prompt_tokens"`
	CompletionTokens        int64                   `json:"completion_tokens,omitempty"`
	TotalTokens             int64                   `json:"total_tokens"`
	PromptTokensDetails     PromptTokensDetails     `json:"prompt_tokens_details,omitzero"`
	CompletionTokensDetails CompletionTokensDetails `json:"completion_tokens_details,omitzero"`
	// CacheCreationInputTokens and CacheReadInputTokens are Anthropic's
	// prompt-cache counts, which LiteLLM's usage carries beside OpenAI's
	// (the read ones are also PromptTokensDetails.CachedTokens).
	CacheCreationInputTokens int64 `json:"cache_creation_input_tokens,omitempty"`
	CacheReadInputTokens     int64 `json:"cache_read_input_tokens,omitempty"`
}

// PromptTokensDetails break the prompt tokens down.
type PromptTokensDetails struct {
	// CachedTokens were read from the provider's prompt cache.
	CachedTokens int64 `json:"cached_tokens"`
}

// CompletionTokensDetails break the completion tokens down.
type CompletionTokensDetails struct {
	// ReasoningTokens were spent thinking (counted in CompletionTokens).
	ReasoningTokens int64 `json:"reasoning_tokens"`
}

// Add adds o's counts to u (a batch sums its lines' usage).
func (u *Usage) Add(o Usage) {
	u.PromptTokens += o.PromptTokens
	u.CompletionTokens += o.CompletionTokens
	u.TotalTokens += o.TotalTokens
	u.PromptTokensDetails.CachedTokens += o.PromptTokensDetails.CachedTokens
	u.CompletionTokensDetails.ReasoningTokens += o.CompletionTokensDetails.ReasoningTokens
	u.CacheCreationInputTokens += o.CacheCreationInputTokens
	u.CacheReadInputTokens += o.CacheReadInputTokens
}

// AppendJSON appends u as encoding/json writes it (its struct tags:
// completion and cache counts left out when zero, the details objects when
// zero), without reflection: every log event of an embeddings call carries
// one. Plain appends, not a jsonscan.Object, whose methods move the
// caller's buffer to the heap.
func (u *Usage) AppendJSON(b []byte) []byte {
	b = appendCount(append(b, '{'), `"prompt_tokens":`, u.PromptTokens)
	if u.CompletionTokens != 0 {
		b = appendCount(b, `,"completion_tokens":`, u.CompletionTokens)
	}
	b = appendCount(b, `,"total_tokens":`, u.TotalTokens)
	if u.PromptTokensDetails != (PromptTokensDetails{}) {
		b = appendCount(b, `,"prompt_tokens_details":{"cached_tokens":`, u.PromptTokensDetails.CachedTokens)
		b = append(b, '}')
	}
	if u.CompletionTokensDetails != (CompletionTokensDetails{}) {
		b = appendCount(b, `,"completion_tokens_details":{"reasoning_tokens":`, u.CompletionTokensDetails.ReasoningTokens)
		b = append(b, '}')
	}
	if u.CacheCreationInputTokens != 0 {
		b = appendCount(b, `,"cache_creation_input_tokens":`, u.CacheCreationInputTokens)
	}
	if u.CacheReadInputTokens != 0 {
		b = appendCount(b, `,"cache_read_input_tokens":`, u.CacheReadInputTokens)
	}
	return append(b, '}')
}

// appendCount appends key (the JSON before the value) and n.
func appendCount(b []byte, key string, n int64) []byte {
	return strconv.AppendInt(append(b, key...), n, 10)
}

var errUsage = errors.New("oai: usage is not an object of token counts")

// ParseUsage reads a raw usage object (from a provider's answer, untrusted).
// Counts must be non-negative integers; members it does not know are
// skipped. When total_tokens is absent it is prompt plus completion.
func ParseUsage(raw []byte) (Usage, error) {
	return parseUsage(raw, chatUsageNames)
}

// ParseResponseUsage reads the usage object of a Responses API answer
// (input_tokens, output_tokens, total_tokens and their details) into a
// Usage: input is prompt, output is completion.
func ParseResponseUsage(raw []byte) (Usage, error) {
	return parseUsage(raw, usageNames{
		prompt: "input_tokens", completion: "output_tokens",
		promptDetails: "input_tokens_details", completionDetails: "output_tokens_details",
	})
}

// usageNames are the member names an API gives Usage's counts ("" for
// one it has not).
type usageNames struct {
	prompt, completion, promptDetails, completionDetails, cacheCreation, cacheRead string
}

// ParseUsagePrefix is ParseUsage of the usage object that starts doc
// (white space before it allowed), returning the index just past it; what
// follows is not read. An answer's walk so reads its usage where it is, in
// one crossing, rather than delimiting it first.
func ParseUsagePrefix(doc []byte) (u Usage, end int, err error) {
	return readUsage(doc, chatUsageNames)
}

// chatUsageNames are ParseUsage's member names.
var chatUsageNames = usageNames{
	prompt: "prompt_tokens", completion: "completion_tokens",
	promptDetails: "prompt_tokens_details", completionDetails: "completion_tokens_details",
	cacheCreation: "cache_creation_input_tokens", cacheRead: "cache_read_input_tokens",
}

// parseUsage reads a usage object whose members are named as names says.
func parseUsage(raw []byte, names usageNames) (Usage, error) {
	u, end, err := readUsage(raw, names)
	if err != nil || jsonscan.SkipSpace(raw, end) != len(raw) {
		return Usage{}, errUsage
	}
	return u, nil
}

// readUsage reads the usage object that starts doc, in one walk: its
// details objects are read where they start (delimit). A details value
// delimit cannot read is null or refused: a walk of it alone would fail
// as delimit's walk did (the same bytes read, up to where it failed).
func readUsage(doc []byte, names usageNames) (Usage, int, error) {
	var (
		u           Usage
		hasTotal    bool
		detailsRead bool // the member's value was read by delimit
	)
	delimit := func(name, rest []byte) (int, bool) {
		var (
			inner string
			dst   *int64
		)
		// string(name) compared, not switched on: names are not constants,
		// and a switch would copy it.
		switch {
		case string(name) == names.promptDetails:
			inner, dst = "cached_tokens", &u.PromptTokensDetails.CachedTokens
		case string(name) == names.completionDetails:
			inner, dst = "reasoning_tokens", &u.CompletionTokensDetails.ReasoningTokens
		default:
			return 0, false
		}
		n, err := jsonscan.MembersPrefix(rest, func(k, v []byte) error {
			if string(k) == inner {
				return count(v, dst)
			}
			return nil
		})
		detailsRead = err == nil
		return n, false
	}
	end, err := jsonscan.MembersPrefixBy(doc, func(name, v []byte) error {
		switch {
		case len(name) == 0:
		case string(name) == "total_tokens":
			hasTotal = !jsonscan.Null(v)
			return count(v, &u.TotalTokens)
		case string(name) == names.prompt:
			return count(v, &u.PromptTokens)
		case string(name) == names.completion:
			return count(v, &u.CompletionTokens)
		case string(name) == names.promptDetails, string(name) == names.completionDetails:
			read := detailsRead
			detailsRead = false
			if read || jsonscan.Null(v) {
				return nil
			}
			return errUsage
		case string(name) == names.cacheCreation:
			return count(v, &u.CacheCreationInputTokens)
		case string(name) == names.cacheRead:
			return count(v, &u.CacheReadInputTokens)
		}
		return nil
	}, delimit)
	if err != nil {
		return Usage{}, 0, errUsage
	}
	if !hasTotal {
		u.TotalTokens = u.PromptTokens + u.CompletionTokens
	}
	return u, end, nil
}

// count reads a count (null: left as it is) into dst.
func count(v []byte, dst *int64) error {
	if jsonscan.Null(v) {
		return nil
	}
	n, ok := jsonscan.Count(v)
	if !ok {
		return errUsage
	}
	*dst = n
	return nil
}

// EstimateTokens stands in for a provider's token count where it reports
// none: UTF-8 bytes / 4, rounded up (OpenAI's rule of thumb for English).
func EstimateTokens(s string) int64 { return int64(len(s)+3) / 4 }
