package sortkey

import (
	"sort"
	"testing"
	"time"
)

func TestTimeOrders(t *testing.T) {
	base := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	times := []time.Time{time.Unix(0, 0), base, base.Add(time.Nanosecond), base.Add(500 * time.Millisecond), base.Add(time.Second),
		base.Add(10 * time.Second), base.AddDate(5, 0, 0), time.Date(2262, 1, 1, 0, 0, 0, 0, time.UTC)}
	keys := make([]string, len(times))
	for i, tm := range times {
		keys[i] = Time(tm)
		if len(keys[i]) != 19 {
			t.Errorf("Time(%v) = %q: want 19 characters", tm, keys[i])
		}
	}
	if !sort.StringsAreSorted(keys) {
		t.Errorf("keys do not sort as times do: %q", keys)
	}
}
