// Package tokenizer counts texts' tokens as OpenAI's models do, offline:
// the o200k_base encoding (GPT-4o, GPT-4.1, GPT-4.5, GPT-5, the o-series)
// with its ranks shipped in the binary, compressed (about 1 MB), and a BPE
// encoder of its own. The ranks are read on an Encoding's first use, once:
// a process that never counts never pays for them.
//
// Only o200k_base ships: cl100k_base (GPT-4, GPT-3.5) would add another
// 0.5 MB to every bootstrap (docs/model-endpoints.md, count_tokens).
package tokenizer

import (
	"fmt"
	"strings"
	"sync"
)

// O200kBase is the name of the encoding this package ships.
const O200kBase = "o200k_base"

// Encoding is one BPE encoding: its ranks (loaded on first use) and the
// pattern that splits a text into the pieces BPE encodes.
type Encoding struct {
	name  string
	split func(text string, piece func(string))
	ranks func() (*ranks, error)
}

// NewO200kBase returns the o200k_base encoding; its ranks are read from
// the binary on the first Count, Encode or Decode.
func NewO200kBase() *Encoding {
	return &Encoding{name: O200kBase, split: splitO200k, ranks: sync.OnceValues(func() (*ranks, error) {
		return loadRanks(o200kRanks, o200kTokens)
	})}
}

// Name is the encoding's name.
func (e *Encoding) Name() string { return e.name }

// Count returns the number of tokens text encodes to. Special tokens'
// spellings in text are text (tiktoken's encode_ordinary).
func (e *Encoding) Count(text string) (int, error) {
	r, err := e.ranks()
	if err != nil {
		return 0, err
	}
	var m merger
	n := 0
	e.split(text, func(piece string) { n += m.count(r, piece) })
	return n, nil
}

// Encode returns text's tokens (tiktoken's encode_ordinary).
func (e *Encoding) Encode(text string) ([]int, error) {
	r, err := e.ranks()
	if err != nil {
		return nil, err
	}
	var (
		m   merger
		out []int
	)
	e.split(text, func(piece string) { out = m.encode(r, piece, out) })
	return out, nil
}

// Decode returns the bytes tokens stand for.
func (e *Encoding) Decode(tokens []int) ([]byte, error) {
	r, err := e.ranks()
	if err != nil {
		return nil, err
	}
	var out []byte
	for _, t := range tokens {
		if t < 0 || t >= r.len() {
			return nil, fmt.Errorf("tokenizer: %s has no token %d", e.name, t)
		}
		out = append(out, r.token(t)...)
	}
	return out, nil
}

// EncodingOf names the encoding of an OpenAI model — its name, or a
// deployment's provider/name ("openai/gpt-4o-mini", "azure/gpt-4.1"), a
// fine-tune of one ("ft:gpt-4o-mini-2024-07-18:org::id") — when
// this package ships it, and "" otherwise: other vendors' models, and
// OpenAI's older ones (cl100k_base) whose ranks do not ship.
func EncodingOf(model string) string {
	name := strings.ToLower(model[strings.LastIndex(model, "/")+1:])
	name = strings.TrimPrefix(name, "ft:") // a fine-tune: ft:gpt-4o-mini-2024-07-18:org::id
	for _, p := range []string{"gpt-4o", "chatgpt-4o", "gpt-4.1", "gpt-4.5", "gpt-5", "gpt-oss", "o1", "o3", "o4"} {
		if rest, ok := strings.CutPrefix(name, p); ok && (rest == "" || rest[0] == '-' || p[0] != 'o') {
			return O200kBase
		}
	}
	return ""
}
