package jsonscan

import (
	"strings"
	"testing"
)

// TestFields: the members named exactly are passed, others skipped; a name
// given twice, a name matching only without regard to case, a refusal by f
// or a document that is no object is "not sure".
func TestFields(t *testing.T) {
	names := []string{"id", "usage"}
	for _, c := range []struct {
		doc  string
		ok   bool
		seen string
	}{
		{`{"id":"a","object":"x","usage":{"n":1}}`, true, `0:"a" 1:{"n":1} `},
		{`{"object":"x"}`, true, ``},
		{`{"id":"a","id":"b"}`, false, `0:"a" `},
		{`{"ID":"a"}`, false, ``},
		{`{"usage":null,"Usage":1}`, false, `1:null `},
		{`{"id":"refuse"}`, false, `0:"refuse" `},
		{`[1]`, false, ``},
	} {
		var seen strings.Builder
		ok := Fields([]byte(c.doc), names, func(i int, v []byte) bool {
			seen.WriteString(string(rune('0'+i)) + ":" + string(v) + " ")
			return string(v) != `"refuse"`
		})
		if ok != c.ok || seen.String() != c.seen {
			t.Errorf("%s: %v, saw %q; want %v, %q", c.doc, ok, seen.String(), c.ok, c.seen)
		}
	}
}
