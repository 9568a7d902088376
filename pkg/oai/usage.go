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
	return parseUsage(raw, usageNames{
		prompt: "prompt_tokens", completion: "completion_tokens",
		promptDetails: "prompt_tokens_details", completionDetails: "completion_tokens_details",
		cacheCreation: "cache_creation_input_tokens", cacheRead: "cache_read_input_tokens",
	})
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

// parseUsage reads a usage object whose members are named as names says.
func parseUsage(raw []byte, names usageNames) (Usage, error) {
	var (
		u        Usage
		hasTotal bool
	)
	count := func(v []byte, dst *int64) error {
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
	detail := func(v []byte, name string, dst *int64) error {
		if jsonscan.Null(v) {
			return nil
		}
		return jsonscan.Members(v, func(k, v []byte) error {
			if string(k) == name {
				return count(v, dst)
			}
			return nil
		})
	}
	err := jsonscan.Members(raw, func(name, v []byte) error {
		switch n := string(name); {
		case n == "":
		case n == "total_tokens":
			hasTotal = !jsonscan.Null(v)
			return count(v, &u.TotalTokens)
		case n == names.prompt:
			return count(v, &u.PromptTokens)
		case n == names.completion:
			return count(v, &u.CompletionTokens)
		case n == names.promptDetails:
			return detail(v, "cached_tokens", &u.PromptTokensDetails.CachedTokens)
		case n == names.completionDetails:
			return detail(v, "reasoning_tokens", &u.CompletionTokensDetails.ReasoningTokens)
		case n == names.cacheCreation:
			return count(v, &u.CacheCreationInputTokens)
		case n == names.cacheRead:
			return count(v, &u.CacheReadInputTokens)
		}
		return nil
	})
	if err != nil {
		return Usage{}, errUsage
	}
	if !hasTotal {
		u.TotalTokens = u.PromptTokens + u.CompletionTokens
	}
	return u, nil
}

// EstimateTokens stands in for a provider's token count where it reports
// none: UTF-8 bytes / 4, rounded up (OpenAI's rule of thumb for English).
func EstimateTokens(s string) int64 { return int64(len(s)+3) / 4 }
