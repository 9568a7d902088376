// Package sortkey owns how values are written into store sort keys so that
// byte order is value order: every time in a sort key, in every package,
// is Time's.
package sortkey

import (
	"fmt"
	"time"
)

// Time renders t as 19 digits of Unix nanoseconds: fixed width, so the
// strings sort as the times do (from 1970 until the year 2262), and keys
// made within one second still order by time.
func Time(t time.Time) string { return fmt.Sprintf("%019d", t.UnixNano()) }
