package main

import (
	"strconv"
	"strings"
)

// passage is the text every model "generates". Its words need no JSON
// escaping, so a token's JSON form is the word in quotes.
const passage = `The gateway receives a request, checks the key, finds the model, and sends the call on to the provider.
When the answer comes back it is written to the client as it arrives, counted, and logged for the team that made it.
Batches are read once, split into chunks, and each chunk runs its lines with bounded concurrency and honest retries.
Files are stored as manifests of parts, so nothing is copied twice and memory stays flat while bytes flow through.
A benchmark that measures all of this must be cheap itself, repeatable, and clear about what it did not measure.`

// corpus is the precomputed answer text: tokens (a word and its trailing
// space) in plain and JSON-quoted form.
type corpus struct {
	tokens     []string
	jsonTokens [][]byte // `"word "`
}

func newCorpus(n int) *corpus {
	words := strings.Fields(passage)
	c := &corpus{tokens: make([]string, n), jsonTokens: make([][]byte, n)}
	for i := range n {
		tok := words[i%len(words)] + " "
		c.tokens[i] = tok
		c.jsonTokens[i] = strconv.AppendQuote(nil, tok)
	}
	return c
}

// appendText appends the first n tokens as one JSON string.
func (c *corpus) appendText(b []byte, n int) []byte {
	b = append(b, '"')
	for _, t := range c.tokens[:n] {
		b = append(b, t...)
	}
	return append(b, '"')
}

// count clamps a requested number of output tokens to what the corpus holds;
// zero or negative means "no limit".
func (c *corpus) count(limit int) int {
	if limit <= 0 || limit > len(c.tokens) {
		return len(c.tokens)
	}
	return limit
}

// estimateTokens is the usual four-bytes-a-token approximation.
func estimateTokens(bytes int) int {
	if bytes <= 0 {
		return 1
	}
	return (bytes + 3) / 4
}
