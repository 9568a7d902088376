package tokencount

import "testing"

func TestEncodingOf(t *testing.T) {
	for model, want := range map[string]string{
		"gpt-4o-mini": O200kBase, "openai/gpt-4.1": O200kBase, "azure/gpt-5-mini": O200kBase, "o3-mini": O200kBase,
		"gpt-4-turbo": Cl100kBase, "openai/gpt-3.5-turbo": Cl100kBase, "text-embedding-3-small": Cl100kBase,
		"anthropic/claude-sonnet-4-5": "", "gemini/gemini-2.5-flash": "", "openai/llama-3.1-8b": "",
	} {
		if got := EncodingOf(model); got != want {
			t.Errorf("EncodingOf(%q) = %q, want %q", model, got, want)
		}
	}
}

// TestCounts: the counts another implementation of OpenAI's tokenizer
// gives the same texts (js-tiktoken 1.0.21, encode(text, [], [])), from the
// ranks shipped in the binary.
func TestCounts(t *testing.T) {
	c := New()
	for _, tc := range []struct {
		encoding, text string
		want           int64
	}{
		{O200kBase, "hello world", 2},
		{Cl100kBase, "hello world", 2},
		{O200kBase, "Sluice stands in front of hosted model providers.", 11},
		{Cl100kBase, "Sluice stands in front of hosted model providers.", 11},
		{Cl100kBase, "<|endoftext|> is text here", 10},
		{O200kBase, "Ceci n'est pas une pipe — 東京 🚀", 11},
		{O200kBase, "", 0},
	} {
		count, err := c.Encoder(tc.encoding)
		if err != nil {
			t.Fatal(err)
		}
		if got := count(tc.text); got != tc.want {
			t.Errorf("%s %q: %d tokens, want %d", tc.encoding, tc.text, got, tc.want)
		}
	}
	if _, err := c.Encoder("p99k_base"); err == nil {
		t.Error("an unknown encoding loads")
	}
}
