package ids

import "testing"

func TestNew(t *testing.T) {
	seen := make(map[string]bool)
	for range 1000 {
		id := New(File)
		if !Valid(File, id) {
			t.Fatalf("New(%q) = %q, not valid", File, id)
		}
		if seen[id] {
			t.Fatalf("duplicate id %q", id)
		}
		seen[id] = true
	}
}

func TestValid(t *testing.T) {
	for _, tc := range []struct {
		s    string
		want bool
	}{
		{"file-abcdefghijklmnopqrstuvwx", true},
		{"file-abcdefghijklmnopqrstuvw", false},
		{"file-abcdefghijklmnopqrstuvw!", false},
		{"batch_abcdefghijklmnopqrstuvwx", false},
		{"", false},
	} {
		if got := Valid(File, tc.s); got != tc.want {
			t.Errorf("Valid(%q) = %v, want %v", tc.s, got, tc.want)
		}
	}
}

// TestNewAcrossChunks makes enough ids to drain several chunks of random
// bytes: no id repeats and each character is one of the alphabet's, across
// the refills.
func TestNewAcrossChunks(t *testing.T) {
	seen := make(map[string]bool)
	counts := make(map[byte]int)
	for range 20 * randomChunk {
		id := New(Request)
		if !Valid(Request, id) {
			t.Fatalf("New(%q) = %q, not valid", Request, id)
		}
		if seen[id] {
			t.Fatalf("duplicate id %q", id)
		}
		seen[id] = true
		for i := len(Request); i < len(id); i++ {
			counts[id[i]]++
		}
	}
	// 245,760 characters over 62: every character turns up.
	if len(counts) != len(alphabet) {
		t.Errorf("%d distinct characters, want %d", len(counts), len(alphabet))
	}
}

func TestNewUsesEachRandomByteOnce(t *testing.T) {
	// A random of its own, not the pool's: under -race a pool may drop
	// what is put and hand out another.
	r := &random{off: randomChunk}
	var first, second [Length]byte
	r.fill(&first)
	after := r.off
	r.fill(&second)
	if after < Length || r.off < after+Length {
		t.Errorf("off went from %d to %d: fewer than %d bytes taken an id", after, r.off, Length)
	}
	if first == second {
		t.Errorf("two ids from one chunk are the same: %q", first)
	}
}

func BenchmarkNew(b *testing.B) {
	b.ReportAllocs()
	for b.Loop() {
		New(Request)
	}
}
