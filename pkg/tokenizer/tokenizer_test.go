package tokenizer

import (
	"bytes"
	"compress/gzip"
	"encoding/binary"
	"runtime"
	"slices"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/google/go-cmp/cmp"
	"github.com/pkoukk/tiktoken-go"
	tiktokenloader "github.com/pkoukk/tiktoken-go-loader"
)

// TestKnownEncodings: o200k_base's tokens of sample texts as OpenAI's
// tiktoken gives them (tiktoken.get_encoding("o200k_base").encode_ordinary;
// the counts also js-tiktoken 1.0.21's).
func TestKnownEncodings(t *testing.T) {
	enc := NewO200kBase()
	for _, tc := range []struct {
		text string
		want []int
	}{
		{"", nil},
		{"hello world", []int{24912, 2375}},
	} {
		got, err := enc.Encode(tc.text)
		if err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff(tc.want, got); diff != "" {
			t.Errorf("%q (-want +got):\n%s", tc.text, diff)
		}
	}
	for _, tc := range []struct {
		text string
		want int
	}{
		{"hello world", 2},
		{"Sluice stands in front of hosted model providers.", 11},
		{"Ceci n'est pas une pipe — 東京 🚀", 11},
	} {
		if got, err := enc.Count(tc.text); err != nil || got != tc.want {
			t.Errorf("Count(%q) = %d, %v, want %d", tc.text, got, err, tc.want)
		}
	}
}

// samples are texts that exercise each alternative of the pattern and the
// places they meet.
var samples = []string{
	"hello world", "Hello, World!", "HELLO world", "I'm sure they'll've done it, DON'T you?", "it'S 'RE 'Ve 'LL 'd",
	"CamelCaseWords and snake_case_words", "ÉCOLE élève Straße ǅungla", "東京タワーは高い。", "नमस्ते दुनिया", "مرحبا بالعالم",
	"emoji 🚀🔥 and ZWJ 👩‍👩‍👧‍👦", "1234567 12 3.14159 ١٢٣٤ Ⅻ ½", "a\r\nb\n\n\nc\r\r", "  leading and trailing  ", "tabs\t\there\t",
	"x  \n  y", "   \n", "end with spaces   ", "nbsp\u00a0here and\u2003em\u3000ideographic", "punctuation!!! ... ??? --- /// ***\n/",
	"path/to/file.go:12:3", "<|endoftext|> is text", "{\"json\": [1, 2, {\"k\": null}]}", "func main() {\n\tfmt.Println(\"hi\")\n}\n",
	"e\u0301 combining marks a\u0308\u0308", "\u0301\u0301 leading marks", "'s alone 's", "'", "ǈǋ title case Ǆ", "ʰʲ modifier letters",
	"mixed123abc456", strings.Repeat("ab", 300), strings.Repeat("!", 500), strings.Repeat(" ", 300) + "x", strings.Repeat("\n ", 50),
}

// reference is OpenAI's tokenizer as tiktoken-go implements it (its
// pattern compiled by regexp2), over the same ranks read from their
// source file.
func reference(t testing.TB) *tiktoken.Tiktoken {
	t.Helper()
	tiktoken.SetBpeLoader(tiktokenloader.NewOfflineLoader())
	ref, err := tiktoken.GetEncoding(O200kBase)
	if err != nil {
		t.Fatal(err)
	}
	return ref
}

// comparable reports whether tiktoken-go tokenizes text as tiktoken does:
// it reads text as runes (bytes not UTF-8 become U+FFFD), and its regex
// engine folds case by culture, not by Unicode (ſ is no s in 'ſ).
func comparable(text string) bool { return utf8.ValidString(text) && !strings.ContainsRune(text, 'ſ') }

// TestMatchesTiktoken: the encoder gives tiktoken-go's tokens.
func TestMatchesTiktoken(t *testing.T) {
	enc, ref := NewO200kBase(), reference(t)
	for _, text := range samples {
		got, err := enc.Encode(text)
		if err != nil {
			t.Fatal(err)
		}
		if want := ref.EncodeOrdinary(text); !slices.Equal(want, got) {
			diff := cmp.Diff(want, got)
			t.Errorf("%q (-tiktoken +ours):\n%s", text, diff)
		}
	}
}

// FuzzO200k: any text encodes without error to tokens that decode back to
// it, Count agrees with Encode, and a UTF-8 text's tokens are tiktoken-go's.
func FuzzO200k(f *testing.F) {
	for _, s := range samples {
		f.Add(s)
	}
	f.Add("\xff\xfe invalid \xc3")
	enc, ref := NewO200kBase(), reference(f)
	f.Fuzz(func(t *testing.T, text string) {
		toks, err := enc.Encode(text)
		if err != nil {
			t.Fatal(err)
		}
		back, err := enc.Decode(toks)
		if err != nil || !bytes.Equal(back, []byte(text)) {
			t.Fatalf("%q decodes to %q, %v", text, back, err)
		}
		if n, err := enc.Count(text); err != nil || n != len(toks) {
			t.Fatalf("%q: Count %d, %v; Encode %d tokens", text, n, err, len(toks))
		}
		if comparable(text) {
			if want := ref.EncodeOrdinary(text); !slices.Equal(want, toks) {
				t.Fatalf("%q: %v, tiktoken-go %v", text, toks, want)
			}
		}
	})
}

// TestContractionFolds: (?i) folds as Unicode does, so ſ is an s.
func TestContractionFolds(t *testing.T) {
	var pieces []string
	splitO200k("it'ſ IT'S it'Ll", func(p string) { pieces = append(pieces, p) })
	if diff := cmp.Diff([]string{"it'ſ", " IT'S", " it'Ll"}, pieces); diff != "" {
		t.Error(diff)
	}
}

// TestLongPieces: a piece of 100,000 bytes (one run of punctuation, of
// spaces, of letters) merges in n log n (a merge that rescans the piece for
// its lowest pair, as tiktoken's does, takes ~10¹⁰ steps) and round-trips;
// the merge's buffers stay within maxPiece bytes' worth.
func TestLongPieces(t *testing.T) {
	enc := NewO200kBase()
	for _, text := range []string{strings.Repeat("!", 100_000), strings.Repeat(" ", 100_000) + "x", strings.Repeat("ab", 50_000)} {
		toks, err := enc.Encode(text)
		if err != nil {
			t.Fatal(err)
		}
		if back, _ := enc.Decode(toks); string(back) != text || len(toks) == 0 || len(toks) >= len(text) {
			t.Errorf("%.10q…: %d tokens for %d bytes; decodes back: %v", text, len(toks), len(text), string(back) == text)
		}
		if n, err := enc.Count(text); err != nil || n != len(toks) {
			t.Errorf("%.10q…: Count %d, %v; Encode %d tokens", text, n, err, len(toks))
		}
	}
	r, err := enc.ranks()
	if err != nil {
		t.Fatal(err)
	}
	var m merger
	m.count(r, strings.Repeat("!", 2*maxPiece+3))
	if cap(m.next) > maxPiece+maxPiece/4 || cap(m.heap) > 3*maxPiece {
		t.Errorf("buffers for a %d-byte piece: next %d, heap %d", 2*maxPiece+3, cap(m.next), cap(m.heap))
	}
}

func TestDecodeUnknownToken(t *testing.T) {
	enc := NewO200kBase()
	for _, tok := range []int{-1, o200kTokens, 199999} {
		if _, err := enc.Decode([]int{tok}); err == nil {
			t.Errorf("token %d decodes", tok)
		}
	}
}

// TestBadRanks: ranks that are not the form internal/gen writes are an
// error, never a panic.
func TestBadRanks(t *testing.T) {
	gz := func(form []byte) []byte {
		var b bytes.Buffer
		w := gzip.NewWriter(&b)
		w.Write(form)
		w.Close()
		return b.Bytes()
	}
	form := func(toks ...string) []byte {
		b := binary.BigEndian.AppendUint32(nil, uint32(len(toks)))
		for _, tk := range toks {
			b = append(b, byte(len(tk)))
		}
		return append(b, strings.Join(toks, "")...)
	}
	all := make([]string, 256)
	for i := range all {
		all[i] = string([]byte{byte(i)})
	}
	for name, tc := range map[string]struct {
		data []byte
		n    int
	}{
		"not gzip":         {[]byte("nope"), 1},
		"empty":            {gz(nil), 1},
		"other count":      {gz(form("a", "b")), 3},
		"lengths too long": {gz(append(form("ab"), 'c')), 1},
		"duplicate":        {gz(form(append(all, "a")...)), 257},
		"missing a byte":   {gz(form(all[1:]...)), 255},
		"cut short":        {gz(form("a", "b"))[:20], 2},
	} {
		if _, err := loadRanks(string(tc.data), tc.n); err == nil {
			t.Errorf("%s: loads", name)
		}
	}
	if _, err := loadRanks(string(gz(form(all...))), 256); err != nil {
		t.Errorf("256 bytes: %v", err)
	}
}

func TestEncodingOf(t *testing.T) {
	for model, want := range map[string]string{
		"gpt-4o": O200kBase, "gpt-4o-mini": O200kBase, "openai/gpt-4.1": O200kBase, "azure/gpt-5-mini": O200kBase, "gpt-5.1": O200kBase,
		"o3-mini": O200kBase, "o1": O200kBase, "openai/o4-mini": O200kBase, "chatgpt-4o-latest": O200kBase, "openai/gpt-oss-120b": O200kBase,
		"openai/ft:gpt-4o-mini-2024-07-18:acme::abc123": O200kBase, "ft:gpt-3.5-turbo-0125:acme::x": "",
		"gpt-4-turbo": "", "openai/gpt-3.5-turbo": "", "anthropic/claude-sonnet-4-5": "", "gemini/gemini-2.5-flash": "",
		"openai/llama-3.1-8b": "", "o1x": "", "omni": "", "": "",
	} {
		if got := EncodingOf(model); got != want {
			t.Errorf("EncodingOf(%q) = %q, want %q", model, got, want)
		}
	}
}

// BenchmarkLoad: reading the ranks (the first count's extra time) and the
// heap they hold once loaded (MB-held).
func BenchmarkLoad(b *testing.B) {
	var held float64
	for b.Loop() {
		var before, after runtime.MemStats
		b.StopTimer()
		runtime.GC()
		runtime.ReadMemStats(&before)
		b.StartTimer()
		r, err := loadRanks(o200kRanks, o200kTokens)
		if err != nil {
			b.Fatal(err)
		}
		b.StopTimer()
		runtime.GC()
		runtime.ReadMemStats(&after)
		b.StartTimer()
		held = float64(after.HeapAlloc-before.HeapAlloc) / 1e6
		runtime.KeepAlive(r)
	}
	b.ReportMetric(held, "MB-held")
}

func BenchmarkCount(b *testing.B) {
	enc := NewO200kBase()
	// Prose, code and JSON: the samples without their long runs.
	text := strings.Repeat(strings.Join(samples[:len(samples)-5], "\n"), 20)
	if _, err := enc.Count(text); err != nil { // loads the ranks
		b.Fatal(err)
	}
	b.SetBytes(int64(len(text)))
	for b.Loop() {
		if _, err := enc.Count(text); err != nil {
			b.Fatal(err)
		}
	}
}
