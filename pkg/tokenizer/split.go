package tokenizer

import (
	"unicode"
	"unicode/utf8"
)

// splitO200k calls piece with each piece of text as o200k_base's pattern
// splits it (tiktoken, tiktoken_ext/openai_public.py), in order:
//
//	[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]*[\p{Ll}\p{Lm}\p{Lo}\p{M}]+(?i:'s|'t|'re|'ve|'m|'ll|'d)?
//	|[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]+[\p{Ll}\p{Lm}\p{Lo}\p{M}]*(?i:'s|'t|'re|'ve|'m|'ll|'d)?
//	|\p{N}{1,3}
//	| ?[^\s\p{L}\p{N}]+[\r\n/]*
//	|\s*[\r\n]+
//	|\s+(?!\S)
//	|\s+
//
// Go's regexp has no lookahead, so the alternatives are matched by hand,
// each as the backtracking engine tiktoken uses would match it (leftmost
// alternative first, greedy repeats given back one character at a time).
// Every character starts a match of some alternative, so the pieces cover
// the text. A byte that is not UTF-8 is read as U+FFFD, a symbol, and stays
// in its piece as it was.
func splitO200k(text string, piece func(string)) {
	for p := 0; p < len(text); {
		e := matchO200k(text, p)
		piece(text[p:e])
		p = e
	}
}

// matchO200k returns the end of the match at p (p < len(s)); it is > p.
func matchO200k(s string, p int) int {
	r, size := utf8.DecodeRuneInString(s[p:])
	// Alternatives 1 and 2, each with its optional first character, then
	// without it.
	if isPrefix(r) {
		if e := upperLower(s, p+size); e > 0 {
			return e
		}
	}
	if e := upperLower(s, p); e > 0 {
		return e
	}
	if isPrefix(r) {
		if e := upperThenLower(s, p+size); e > 0 {
			return e
		}
	}
	if e := upperThenLower(s, p); e > 0 {
		return e
	}
	// \p{N}{1,3}
	if unicode.IsNumber(r) {
		e := p + size
		for range 2 {
			r, size := utf8.DecodeRuneInString(s[e:])
			if e == len(s) || !unicode.IsNumber(r) {
				break
			}
			e += size
		}
		return e
	}
	// ' ?[^\s\p{L}\p{N}]+[\r\n/]*'
	q := p
	if r == ' ' {
		q++
	}
	if e := run(s, q, isPunct); e > q {
		for e < len(s) && (s[e] == '\r' || s[e] == '\n' || s[e] == '/') {
			e++
		}
		return e
	}
	// Every character left is a space (\s): the last three alternatives.
	end := run(s, p, unicode.IsSpace)
	// \s*[\r\n]+: up to the run's last line break.
	for i := end - 1; i >= p; i-- {
		if s[i] == '\r' || s[i] == '\n' {
			return i + 1
		}
	}
	// \s+(?!\S): the run, but for its last space when a non-space follows.
	if end < len(s) {
		if _, last := utf8.DecodeLastRuneInString(s[:end]); end-last > p {
			return end - last
		}
	}
	// \s+
	return end
}

// upperLower matches [\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]*[\p{Ll}\p{Lm}\p{Lo}\p{M}]+
// and a contraction at q; 0 when it does not match.
func upperLower(s string, q int) int {
	i := run(s, q, isUpper)
	if e := run(s, i, isLower); e > i {
		return contraction(s, e)
	}
	// The upper run gives characters back until one of them starts a
	// lower run: its last character that is also lower (Lm, Lo, M), whose
	// lower run ends right after it (the next one is not lower).
	for e := i; e > q; {
		r, size := utf8.DecodeLastRuneInString(s[q:e])
		if isLower(r) {
			return contraction(s, e)
		}
		e -= size
	}
	return 0
}

// upperThenLower matches [\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]+[\p{Ll}\p{Lm}\p{Lo}\p{M}]*
// and a contraction at q; 0 when it does not match.
func upperThenLower(s string, q int) int {
	i := run(s, q, isUpper)
	if i == q {
		return 0
	}
	return contraction(s, run(s, i, isLower))
}

// contraction returns the end of (?i:'s|'t|'re|'ve|'m|'ll|'d)? at e.
func contraction(s string, e int) int {
	if e >= len(s) || s[e] != '\'' {
		return e
	}
	c, size := utf8.DecodeRuneInString(s[e+1:])
	switch {
	case fold(c, 's'), fold(c, 't'), fold(c, 'm'), fold(c, 'd'):
		return e + 1 + size
	case fold(c, 'r'), fold(c, 'v'), fold(c, 'l'):
		c2, size2 := utf8.DecodeRuneInString(s[e+1+size:])
		want := 'e'
		if fold(c, 'l') {
			want = 'l'
		}
		if fold(c2, want) {
			return e + 1 + size + size2
		}
	}
	return e
}

// fold reports whether c is lower under (?i): equal under Unicode simple
// case folding, as tiktoken's regex engine matches (ſ is an s).
func fold(c, lower rune) bool {
	if c == lower {
		return true
	}
	for f := unicode.SimpleFold(lower); f != lower; f = unicode.SimpleFold(f) {
		if c == f {
			return true
		}
	}
	return false
}

// run returns the end of the run of characters in class from q.
func run(s string, q int, in func(rune) bool) int {
	for q < len(s) {
		r, size := utf8.DecodeRuneInString(s[q:])
		if !in(r) {
			break
		}
		q += size
	}
	return q
}

// isUpper is [\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}].
func isUpper(r rune) bool {
	if r < utf8.RuneSelf {
		return 'A' <= r && r <= 'Z'
	}
	return unicode.In(r, unicode.Lu, unicode.Lt, unicode.Lm, unicode.Lo, unicode.M)
}

// isLower is [\p{Ll}\p{Lm}\p{Lo}\p{M}].
func isLower(r rune) bool {
	if r < utf8.RuneSelf {
		return 'a' <= r && r <= 'z'
	}
	return unicode.In(r, unicode.Ll, unicode.Lm, unicode.Lo, unicode.M)
}

// isPrefix is [^\r\n\p{L}\p{N}].
func isPrefix(r rune) bool {
	return r != '\r' && r != '\n' && !unicode.IsLetter(r) && !unicode.IsNumber(r)
}

// isPunct is [^\s\p{L}\p{N}].
func isPunct(r rune) bool {
	return !unicode.IsSpace(r) && !unicode.IsLetter(r) && !unicode.IsNumber(r)
}
