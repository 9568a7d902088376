package passthrough

import (
	"net/http"
	"slices"
	"strings"
	"testing"
)

// revealsReference is the plain definition echoSet.holds implements with
// its prefilter: the value lower-cased contains a spelling.
func revealsReference(forms []string, v string) bool {
	v = strings.ToLower(v)
	return slices.ContainsFunc(forms, func(f string) bool { return strings.Contains(v, f) })
}

func FuzzEchoSetHolds(f *testing.F) {
	f.Add("sk-ant-Secret-42", "Basic dXNlcjpzay1hbnQtU2VjcmV0LTQy")
	f.Add("sk-ant-Secret-42", "x SK-ANT-SECRET-42 y")
	f.Add("ya29.tökén-value", "Bearer YA29.TÖKÉN-VALUE")
	f.Add("AKIDSESSION/token+=", "akidsession%2ftoken%2b%3d")
	f.Add("secret-value-42", "application/json")
	f.Fuzz(func(t *testing.T, secret, value string) {
		forms := echoForms([]string{secret})
		set := newEchoSet(forms)
		if got, want := set.holds(value), revealsReference(forms, value); got != want {
			t.Fatalf("holds(%q) with the spellings of %q = %v, want %v", value, secret, got, want)
		}
		// So with another, long credential's (the set read eight bytes
		// at a time, unless secret's spellings are short).
		other := echoForms([]string{"sk-ant-api03-Other-Credential-0123456789"})
		union := set.union(newEchoSet(other))
		if got, want := union.holds(value), revealsReference(append(slices.Clip(forms), other...), value); got != want {
			t.Fatalf("holds(%q) with the spellings of %q and another = %v, want %v", value, secret, got, want)
		}
		// Every spelling is found inside any text, in any case.
		for _, form := range forms {
			for _, v := range []string{form, "pre " + strings.ToUpper(form) + " post"} {
				if want := revealsReference(forms, v); set.holds(v) != want {
					t.Fatalf("holds(%q) = %v, want %v", v, !want, want)
				}
			}
		}
	})
}

func TestLowerWordLowersOnlyASCIILetters(t *testing.T) {
	var b [8]byte
	for c := 0; c < 0x80; c++ {
		for i := range b {
			b[i] = byte((c + i*17) % 0x80)
		}
		got := lowerWord(leWord(b[:]))
		want := leWord([]byte(strings.ToLower(string(b[:]))))
		if got != want {
			t.Fatalf("lowerWord(%q) = %x, want %x", b[:], got, want)
		}
	}
}

func leWord(b []byte) uint64 {
	var w uint64
	for i := 7; i >= 0; i-- {
		w = w<<8 | uint64(b[i])
	}
	return w
}

func TestLastingCredentialsShareTheirEchoSet(t *testing.T) {
	s := &Service{}
	h := http.Header{"X-Api-Key": {"sk-ant-lasting-key"}}
	if a, b := s.injectedSecrets(h), s.injectedSecrets(h); a != b {
		t.Error("the echo set of the same API key was built twice")
	}
	signed := http.Header{"Authorization": {"AWS4-HMAC-SHA256 Credential=AKID/x, SignedHeaders=host, Signature=abcdef0123456789"},
		"X-Amz-Security-Token": {"session-token-1"}}
	set := s.injectedSecrets(signed)
	for _, v := range []string{"abcdef0123456789", "SESSION-TOKEN-1"} {
		if !set.holds(v) {
			t.Errorf("the signed request's set misses %q", v)
		}
	}
	if len(s.echoes.sets) != 2 {
		t.Errorf("%d echo sets kept, want 2 (the API key and the session token; never a signature)", len(s.echoes.sets))
	}
}

// BenchmarkCopyResponseHeader is a call's cost of the echo checks: its
// credentials' set found, and an Anthropic answer's headers copied.
func BenchmarkCopyResponseHeader(b *testing.B) {
	s := &Service{}
	sent := http.Header{"X-Api-Key": {"sk-ant-api03-abcdefghijklmnopqrstuvwxyz0123456789"}}
	src := http.Header{
		"Content-Type": {"application/json"}, "Date": {"Fri, 27 Nov 2026 22:00:00 GMT"},
		"Request-Id": {"req_011CVXYZabcdefghijklmnop"}, "Anthropic-Organization-Id": {"0f1e2d3c-4b5a-6978-8796-a5b4c3d2e1f0"},
		"Anthropic-Ratelimit-Requests-Limit": {"4000"}, "Anthropic-Ratelimit-Requests-Remaining": {"3999"},
		"Anthropic-Ratelimit-Requests-Reset": {"2026-11-27T22:00:01Z"}, "Anthropic-Ratelimit-Tokens-Limit": {"400000"},
		"Anthropic-Ratelimit-Tokens-Remaining": {"399000"}, "Anthropic-Ratelimit-Tokens-Reset": {"2026-11-27T22:00:01Z"},
		"Via": {"1.1 google"}, "Cf-Ray": {"8f0e1d2c3b4a5968-FRA"}, "Server": {"cloudflare"}, "Content-Length": {"204"},
	}
	b.ReportAllocs()
	for b.Loop() {
		dst := make(http.Header, len(src))
		copyResponseHeader(dst, src, s.injectedSecrets(sent))
	}
}

// TestUpstreamKeepsItsKeysEchoSet: the echo set an Anthropic or Gemini
// upstream keeps for its API key is the one a call's headers would give.
func TestUpstreamKeepsItsKeysEchoSet(t *testing.T) {
	for _, name := range []string{"X-Api-Key", "X-Goog-Api-Key", "Authorization"} {
		value := "sk-upstream-key-0123"
		if name == "Authorization" {
			value = "Bearer " + value
		}
		got := keyEchoes(func(h http.Header) { h.Set(name, value) })
		want := (&Service{}).injectedSecrets(http.Header{name: {value}})
		if got == nil || !slices.Equal(got.forms, want.forms) || got.heads != want.heads {
			t.Errorf("%s: the upstream's echo set %v, a call's %v", name, got, want)
		}
	}
}
