package jsonscan

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"
	"unicode/utf8"
)

// FuzzStrings holds AppendString and Unquote to encoding/json: what
// AppendString writes reads back as the string; what Unquote accepts reads
// as encoding/json reads it.
func FuzzStrings(f *testing.F) {
	f.Add([]byte(`"a\"b\\c\n\u00e9\u2028<&>"`))
	f.Add([]byte("\"\xff\""))
	f.Add([]byte(`"\ud83d\ude00"`))
	f.Fuzz(func(t *testing.T, b []byte) {
		if got, ok := Unquote(b); ok {
			var want string
			if err := json.Unmarshal(b, &want); err != nil || string(got) != want {
				t.Fatalf("Unquote(%q) = %q, encoding/json %q (%v)", b, got, want, err)
			}
		}
		enc := AppendString(nil, b)
		var want bytes.Buffer
		je := json.NewEncoder(&want)
		je.SetEscapeHTML(false)
		if err := je.Encode(string(b)); err != nil || string(enc) != strings.TrimSuffix(want.String(), "\n") {
			t.Fatalf("AppendString(%q) = %s, encoding/json writes %s", b, enc, want.String())
		}
		if !utf8.Valid(b) {
			return // replaced, as encoding/json replaces it: checked above
		}
		var back string
		if err := json.Unmarshal(enc, &back); err != nil || back != string(b) {
			t.Fatalf("AppendString(%q) = %s, reads back %q (%v)", b, enc, back, err)
		}
		if u, ok := Unquote(enc); !ok || string(u) != string(b) {
			t.Fatalf("Unquote(AppendString(%q)) = %q, %v", b, u, ok)
		}
	})
}

func BenchmarkAppendString(b *testing.B) {
	text := strings.Repeat("The quick brown fox jumps over the lazy dog. ", 20) + `"quoted" \ é`
	b.SetBytes(int64(len(text)))
	buf := make([]byte, 0, 2*len(text))
	for b.Loop() {
		buf = AppendString(buf[:0], text)
	}
}
