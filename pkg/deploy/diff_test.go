package deploy_test

import (
	"fmt"
	"strings"
	"testing"

	"github.com/sluice-gateway/sluice/pkg/deploy"
)

// TestDiff: changes far apart are shown apart, each with its context, its
// line and its entry; a long change is cut with a count of what is left.
func TestDiff(t *testing.T) {
	var lines []string
	lines = append(lines, "Resources:")
	for i := range 40 {
		lines = append(lines, fmt.Sprintf("  R%d:", i), fmt.Sprintf("    Value: %d", i))
	}
	old := strings.Join(lines, "\n") + "\n"
	edited := strings.Replace(strings.Replace(old, "    Value: 3\n", "    Value: three\n", 1), "  R30:\n    Value: 30\n", "", 1)
	want := strings.Join([]string{
		"@@ template.yaml line 9 (in R3) @@",
		"       Value: 2",
		"     R3:",
		"-      Value: three",
		"+      Value: 3",
		"     R4:",
		"       Value: 4",
		"@@ template.yaml line 62 (in R29) @@",
		"     R29:",
		"       Value: 29",
		"+    R30:",
		"+      Value: 30",
		"     R31:",
		"       Value: 31",
	}, "\n")
	// edited is what the template says; old is what make template writes.
	if got := deploy.Diff([]byte(edited), []byte(old)); got != want {
		t.Errorf("Diff:\n%s\nwant:\n%s", got, want)
	}
	if got := deploy.Diff([]byte(old), []byte(old)); got != "" {
		t.Errorf("Diff of equal texts: %q", got)
	}
	long := deploy.Diff([]byte("Resources:\n"), []byte(old))
	if n := strings.Count(long, "\n+"); n != 60 || !strings.HasSuffix(long, "… (20 more changed lines)") {
		t.Errorf("a long diff shows %d lines and ends %q", n, long[max(0, len(long)-40):])
	}
}
