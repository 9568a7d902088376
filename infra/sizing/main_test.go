package main

import "testing"

func TestChoose(t *testing.T) {
	ref := measurement{SizeMB: oneVCPU, PeakMB: 11, RSSMB: 25, P50MS: 1, P99MS: 10}
	for _, tc := range []struct {
		name  string
		sizes []measurement
		want  int
	}{
		{"smallest that passes", []measurement{
			{SizeMB: 128, PeakMB: 11, RSSMB: 25, P99MS: 90}, // p99 too far above one vCPU's
			{SizeMB: 256, PeakMB: 11, RSSMB: 25, P99MS: 12}, // within 2 ms
			{SizeMB: 512, PeakMB: 11, RSSMB: 25, P99MS: 10},
			{SizeMB: 1024, PeakMB: 11, RSSMB: 25, P99MS: 10},
		}, 256},
		{"the larger peak holds to 60 %", []measurement{
			{SizeMB: 128, PeakMB: 10, RSSMB: 80, P99MS: 10}, // RSS 80 ≥ 76.8
			{SizeMB: 256, PeakMB: 10, RSSMB: 80, P99MS: 10},
			{SizeMB: 512, PeakMB: 10, RSSMB: 80, P99MS: 10},
			{SizeMB: 1024, PeakMB: 10, RSSMB: 80, P99MS: 10},
		}, 256},
		{"a failed run is no candidate", []measurement{
			{SizeMB: 128, Error: "function error"},
			{SizeMB: 256, Error: "function error"},
			{SizeMB: 512, PeakMB: 11, RSSMB: 25, P99MS: 11},
			{SizeMB: 1024, PeakMB: 11, RSSMB: 25, P99MS: 10},
		}, 512},
		{"none passes", []measurement{
			{SizeMB: 128, PeakMB: 11, RSSMB: 25, P99MS: 50},
			{SizeMB: 256, PeakMB: 11, RSSMB: 25, P99MS: 50},
			{SizeMB: 512, PeakMB: 11, RSSMB: 25, P99MS: 50},
			{SizeMB: 1024, PeakMB: 11, RSSMB: 25, P99MS: 12.5},
		}, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := functionReport{Sizes: append(tc.sizes, ref)}
			f.choose()
			if f.ChosenMB != tc.want {
				t.Errorf("chose %d MB (%s), want %d", f.ChosenMB, f.Why, tc.want)
			}
		})
	}
}

func TestP99Index(t *testing.T) {
	for n, want := range map[int]int{1: 0, 100: 98, 200: 197, 250: 247} {
		if got := p99Index(n); got != want {
			t.Errorf("p99Index(%d) = %d, want %d", n, got, want)
		}
	}
}
