package main

import (
	"encoding/json"
	"slices"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// TestPairedFiguresKeepTheirJSON: the callback and budget scenarios'
// figures read in bench reports as they did before sharing pairedFigures.
func TestPairedFiguresKeepTheirJSON(t *testing.T) {
	paired := []string{"added_p50_ms", "cpu_per_request_with_us", "cpu_per_request_without_us", "p50_with_ms",
		"p50_without_ms", "paired_ratio", "ratio", "rounds"}
	for _, tc := range []struct {
		name string
		v    any
		want []string
	}{
		{"budget", budgetFigures{}, paired},
		{"callback", callbackFigures{}, append(slices.Clone(paired), "events_received", "requests_with_callback")},
	} {
		b, err := json.Marshal(tc.v)
		if err != nil {
			t.Fatal(err)
		}
		var m map[string]any
		if err := json.Unmarshal(b, &m); err != nil {
			t.Fatal(err)
		}
		var got []string
		for k := range m {
			got = append(got, k)
		}
		slices.Sort(got)
		slices.Sort(tc.want)
		if diff := cmp.Diff(tc.want, got); diff != "" {
			t.Errorf("%s: members (-want +got):\n%s", tc.name, diff)
		}
	}
}
