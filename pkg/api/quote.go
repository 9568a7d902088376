package api

import (
	"strconv"
	"unicode/utf8"
)

// MaxQuoted bounds how much of a client's bad value an error message
// repeats.
const MaxQuoted = 64

// Quote quotes a client's value for an error message (Go syntax, as %q),
// cut to MaxQuoted bytes on a rune boundary and marked "…" when cut: the
// one quoter every service's messages use.
func Quote(s string) string {
	if len(s) <= MaxQuoted {
		return strconv.Quote(s)
	}
	cut := MaxQuoted
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return strconv.Quote(s[:cut]) + "…"
}
