//go:build !unix

package gateway

import "time"

// cpuTime is unknown here: the benchmarks report no CPU figure.
func cpuTime() time.Duration { return 0 }
