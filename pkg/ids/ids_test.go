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
