// Package tokencount counts texts' tokens with OpenAI's BPE encodings,
// o200k_base and cl100k_base, which ship inside the binary
// (tiktoken-go-loader embeds their ranks: nothing is downloaded). An
// encoding is loaded on its first use — a few hundred milliseconds and tens
// of MiB, so only the callers that count (count_tokens) pay for it.
package tokencount

import (
	"fmt"
	"strings"
	"sync"

	"github.com/pkoukk/tiktoken-go"
	tiktokenloader "github.com/pkoukk/tiktoken-go-loader"
)

// Encodings.
const (
	O200kBase  = "o200k_base"
	Cl100kBase = "cl100k_base"
)

// EncodingOf names the encoding of an OpenAI model — its name, or a
// deployment's provider/name ("openai/gpt-4o-mini") — and "" for a model
// it does not know as OpenAI's, whose tokens it cannot count.
func EncodingOf(model string) string {
	name := strings.ToLower(model[strings.LastIndex(model, "/")+1:])
	switch {
	case hasPrefix(name, "gpt-4o", "chatgpt-4o", "gpt-4.1", "gpt-4.5", "gpt-5", "gpt-oss", "o1", "o3", "o4"):
		return O200kBase
	case hasPrefix(name, "gpt-4", "gpt-3.5", "text-embedding-3", "text-embedding-ada-002"):
		return Cl100kBase
	}
	return ""
}

func hasPrefix(s string, prefixes ...string) bool {
	for _, p := range prefixes {
		if strings.HasPrefix(s, p) {
			return true
		}
	}
	return false
}

// Counter counts tokens with the encodings it loads on first use.
type Counter struct {
	mu   sync.Mutex
	encs map[string]*tiktoken.Tiktoken
}

// New returns a Counter that reads the encodings shipped in the binary.
func New() *Counter {
	// tiktoken-go reads ranks through a process-wide loader, which by
	// default downloads them: the offline one reads the embedded files.
	tiktoken.SetBpeLoader(tiktokenloader.NewOfflineLoader())
	return &Counter{encs: map[string]*tiktoken.Tiktoken{}}
}

// Encoder returns the encoding's counter of one text's tokens, loading the
// encoding on first use.
func (c *Counter) Encoder(encoding string) (func(text string) int64, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	enc, ok := c.encs[encoding]
	if !ok {
		var err error
		if enc, err = tiktoken.GetEncoding(encoding); err != nil {
			return nil, fmt.Errorf("tokencount: load %s: %w", encoding, err)
		}
		c.encs[encoding] = enc
	}
	// Special tokens' spellings in a text are text, as a model sees them.
	return func(text string) int64 { return int64(len(enc.EncodeOrdinary(text))) }, nil
}
