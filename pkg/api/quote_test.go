package api

import (
	"strings"
	"testing"
)

func TestQuote(t *testing.T) {
	for in, want := range map[string]string{
		"abc":                         `"abc"`,
		"a\"b\n":                      `"a\"b\n"`,
		strings.Repeat("x", 64):       `"` + strings.Repeat("x", 64) + `"`,
		strings.Repeat("x", 65):       `"` + strings.Repeat("x", 64) + `"…`,
		strings.Repeat("x", 63) + "é": `"` + strings.Repeat("x", 63) + `"…`,
	} {
		if got := Quote(in); got != want {
			t.Errorf("Quote(%q) = %s, want %s", in, got, want)
		}
	}
}
