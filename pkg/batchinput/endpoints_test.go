package batchinput

import (
	"os"
	"regexp"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// The batch endpoints the user's page lists are the ones declared here.
func TestDocsListTheBatchEndpoints(t *testing.T) {
	doc, err := os.ReadFile("../../docs/batches.md")
	if err != nil {
		t.Fatal(err)
	}
	sentence := regexp.MustCompile("(?s)one of the \\*\\*batch endpoints\\*\\*: (.*?) \\(declared once").FindSubmatch(doc)
	if sentence == nil {
		t.Fatal("docs/batches.md has no sentence listing the batch endpoints")
	}
	var listed []string
	for _, m := range regexp.MustCompile("`(/v1/[^`]+)`").FindAllSubmatch(sentence[1], -1) {
		listed = append(listed, string(m[1]))
	}
	if diff := cmp.Diff(Endpoints(), listed); diff != "" {
		t.Errorf("docs/batches.md's batch endpoints (-declared +listed):\n%s", diff)
	}
}
