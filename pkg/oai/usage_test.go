package oai

import (
	"bytes"
	"encoding/json"
	"math"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/sluice-gateway/sluice/pkg/jsonscan"
)

func TestParseUsage(t *testing.T) {
	for _, tc := range []struct {
		raw  string
		want Usage
	}{
		{`{"prompt_tokens":8,"total_tokens":8}`, Usage{PromptTokens: 8, TotalTokens: 8}},
		{`{"prompt_tokens":19,"completion_tokens":10,"total_tokens":29,"prompt_tokens_details":{"cached_tokens":4,"audio_tokens":0},"completion_tokens_details":{"reasoning_tokens":2,"audio_tokens":0,"accepted_prediction_tokens":0}}`,
			Usage{PromptTokens: 19, CompletionTokens: 10, TotalTokens: 29, PromptTokensDetails: PromptTokensDetails{CachedTokens: 4}, CompletionTokensDetails: CompletionTokensDetails{ReasoningTokens: 2}}},
		{`{"prompt_tokens":3,"completion_tokens":4}`, Usage{PromptTokens: 3, CompletionTokens: 4, TotalTokens: 7}},
		{`{"prompt_tokens":3.0,"total_tokens":null,"prompt_tokens_details":null}`, Usage{PromptTokens: 3, TotalTokens: 3}},
		{` { } `, Usage{}},
	} {
		got, err := ParseUsage([]byte(tc.raw))
		if err != nil {
			t.Errorf("%s: %v", tc.raw, err)
			continue
		}
		if diff := cmp.Diff(tc.want, got); diff != "" {
			t.Errorf("%s (-want +got):\n%s", tc.raw, diff)
		}
	}
	for _, bad := range []string{`[]`, `{"prompt_tokens":-1}`, `{"prompt_tokens":"8"}`, `{"prompt_tokens":1.5}`, `{"prompt_tokens_details":{"cached_tokens":true}}`, `{"total_tokens":8`} {
		if u, err := ParseUsage([]byte(bad)); err == nil {
			t.Errorf("%s accepted as %+v", bad, u)
		}
	}
}

func TestUsageJSON(t *testing.T) {
	b, _ := json.Marshal(Usage{PromptTokens: 8, TotalTokens: 8})
	if string(b) != `{"prompt_tokens":8,"total_tokens":8}` {
		t.Errorf("embeddings usage %s", b)
	}
	b, _ = json.Marshal(Usage{PromptTokens: 8, CompletionTokens: 2, TotalTokens: 10, PromptTokensDetails: PromptTokensDetails{CachedTokens: 1}})
	if string(b) != `{"prompt_tokens":8,"completion_tokens":2,"total_tokens":10,"prompt_tokens_details":{"cached_tokens":1}}` {
		t.Errorf("chat usage %s", b)
	}
}

func TestUsageAdd(t *testing.T) {
	u := Usage{PromptTokens: 1, CompletionTokens: 2, TotalTokens: 3, PromptTokensDetails: PromptTokensDetails{CachedTokens: 1}}
	u.Add(Usage{PromptTokens: 10, CompletionTokens: 20, TotalTokens: 30, CompletionTokensDetails: CompletionTokensDetails{ReasoningTokens: 5}})
	want := Usage{PromptTokens: 11, CompletionTokens: 22, TotalTokens: 33, PromptTokensDetails: PromptTokensDetails{CachedTokens: 1}, CompletionTokensDetails: CompletionTokensDetails{ReasoningTokens: 5}}
	if diff := cmp.Diff(want, u); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
}

// FuzzParseUsage holds ParseUsage to encoding/json: a usage object that
// encoding/json reads with counts that are whole, non-negative and below
// 2^40, ParseUsage reads with the same counts; what ParseUsage reads,
// encoding/json (where it reads the document) reads the same.
func FuzzParseUsage(f *testing.F) {
	for _, s := range []string{`{"prompt_tokens":8,"total_tokens":8}`, `{"prompt_tokens":1e3,"completion_tokens_details":{"reasoning_tokens":2}}`, `{"prompt_tokens":-1}`, `{"total_tokens":null}`,
		`{"prompt_tokens_details":{"cached_tokens":1,"cached_tokens":2},"prompt_tokens_details":{"cached_tokens":3}}`, `{"prompt_tokens_details":null}`, `{"completion_tokens_details":{"reasoning_tokens":"1"}}`, `{"prompt_tokens_details":[1]} `, `{"prompt_tokens_details":{"a":1 "b":2}}`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, raw []byte) {
		var ref struct {
			PromptTokens        *float64 `json:"prompt_tokens"`
			CompletionTokens    *float64 `json:"completion_tokens"`
			TotalTokens         *float64 `json:"total_tokens"`
			PromptTokensDetails *struct {
				CachedTokens *float64 `json:"cached_tokens"`
			} `json:"prompt_tokens_details"`
			CompletionTokensDetails *struct {
				ReasoningTokens *float64 `json:"reasoning_tokens"`
			} `json:"completion_tokens_details"`
		}
		got, err := ParseUsage(raw)
		// ParseUsagePrefix reads what ParseUsage reads, followed by
		// anything, and ends where it does; what it reads of what ParseUsage
		// refuses is followed by more than white space.
		prefixed := append(append([]byte{}, raw...), `,"x"]`...)
		gotPrefix, end, prefixErr := ParseUsagePrefix(prefixed)
		switch trimmed := len(bytes.TrimRight(raw, " \t\r\n")); {
		case err == nil && (prefixErr != nil || gotPrefix != got || end != trimmed),
			err != nil && prefixErr == nil && end >= trimmed:
			t.Fatalf("ParseUsagePrefix(%q) = %+v, %d, %v; ParseUsage %+v, %v, end %d", prefixed, gotPrefix, end, prefixErr, got, err, trimmed)
		}
		var top map[string]json.RawMessage
		if json.Unmarshal(raw, &top) != nil || top == nil || json.Unmarshal(raw, &ref) != nil {
			return // not an object (null: callers check for it first)
		}
		// encoding/json matches names case-insensitively; ParseUsage, as
		// providers do, exactly. Documents where that differs are skipped.
		if !exactNames(top, "prompt_tokens", "completion_tokens", "total_tokens", "prompt_tokens_details", "completion_tokens_details") {
			return
		}
		exactDetails := true // in every copy of a details object
		jsonscan.Members(raw, func(name, v []byte) error {
			switch string(name) {
			case "prompt_tokens_details":
				exactDetails = exactDetails && exactNames(objectOf(v), "cached_tokens")
			case "completion_tokens_details":
				exactDetails = exactDetails && exactNames(objectOf(v), "reasoning_tokens")
			}
			return nil
		})
		if !exactDetails {
			return
		}
		whole := func(p *float64) (int64, bool) {
			if p == nil {
				return 0, true
			}
			if *p < 0 || *p >= 1<<40 || *p != math.Trunc(*p) {
				return 0, false
			}
			return int64(*p), true
		}
		var want Usage
		ok := true
		for _, c := range []struct {
			p   *float64
			dst *int64
		}{{ref.PromptTokens, &want.PromptTokens}, {ref.CompletionTokens, &want.CompletionTokens}, {ref.TotalTokens, &want.TotalTokens}} {
			n, fine := whole(c.p)
			*c.dst, ok = n, ok && fine
		}
		if d := ref.PromptTokensDetails; d != nil {
			n, fine := whole(d.CachedTokens)
			want.PromptTokensDetails.CachedTokens, ok = n, ok && fine
		}
		if d := ref.CompletionTokensDetails; d != nil {
			n, fine := whole(d.ReasoningTokens)
			want.CompletionTokensDetails.ReasoningTokens, ok = n, ok && fine
		}
		if ref.TotalTokens == nil {
			want.TotalTokens = want.PromptTokens + want.CompletionTokens
		}
		if !ok {
			return // encoding/json reads a count ParseUsage must refuse
		}
		if err != nil {
			t.Fatalf("%q refused (%v) though encoding/json reads it", raw, err)
		}
		if diff := cmp.Diff(want, got); diff != "" {
			t.Fatalf("%q (-json +ParseUsage):\n%s", raw, diff)
		}
	})
}

// exactNames reports whether every member of obj named like one of names,
// ignoring case, is named exactly so.
func exactNames(obj map[string]json.RawMessage, names ...string) bool {
	for k := range obj {
		for _, n := range names {
			if strings.EqualFold(k, n) && k != n {
				return false
			}
		}
	}
	return true
}

func objectOf(raw json.RawMessage) map[string]json.RawMessage {
	var m map[string]json.RawMessage
	json.Unmarshal(raw, &m)
	return m
}

// FuzzUsageAppendJSON holds Usage.AppendJSON to encoding/json's encoding
// of the struct.
func FuzzUsageAppendJSON(f *testing.F) {
	f.Add(int64(12), int64(0), int64(12), int64(0), int64(0), int64(0), int64(0))
	f.Add(int64(10), int64(5), int64(15), int64(3), int64(2), int64(1), int64(4))
	f.Fuzz(func(t *testing.T, prompt, completion, total, cached, reasoning, created, read int64) {
		u := Usage{PromptTokens: prompt, CompletionTokens: completion, TotalTokens: total,
			PromptTokensDetails: PromptTokensDetails{CachedTokens: cached}, CompletionTokensDetails: CompletionTokensDetails{ReasoningTokens: reasoning},
			CacheCreationInputTokens: created, CacheReadInputTokens: read}
		want, err := json.Marshal(u)
		if err != nil {
			t.Fatal(err)
		}
		if got := u.AppendJSON(nil); string(got) != string(want) {
			t.Fatalf("AppendJSON %s, encoding/json %s", got, want)
		}
	})
}
