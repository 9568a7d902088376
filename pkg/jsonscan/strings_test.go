package jsonscan

import (
	"encoding/json"
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
		if !utf8.Valid(b) {
			return
		}
		enc := AppendString(nil, b)
		var back string
		if err := json.Unmarshal(enc, &back); err != nil || back != string(b) {
			t.Fatalf("AppendString(%q) = %s, reads back %q (%v)", b, enc, back, err)
		}
		if u, ok := Unquote(enc); !ok || string(u) != string(b) {
			t.Fatalf("Unquote(AppendString(%q)) = %q, %v", b, u, ok)
		}
	})
}
