package main

import (
	"strings"
	"testing"
	"time"
)

func TestChoose(t *testing.T) {
	// The whole invocation (P50MS/P99MS) is a streamed answer's second,
	// with the provider's jitter: the rule must not read it.
	ref := measurement{SizeMB: oneVCPU, PeakMB: 11, RSSMB: 25, AddedP50MS: 1, AddedP99MS: 3, P50MS: 1250, P99MS: 1265}
	for _, tc := range []struct {
		name  string
		sizes []measurement
		want  int
	}{
		{"smallest that passes", []measurement{
			{SizeMB: 128, PeakMB: 11, RSSMB: 25, AddedP50MS: 2, AddedP99MS: 90}, // p99 too far above one vCPU's
			{SizeMB: 256, PeakMB: 11, RSSMB: 25, AddedP50MS: 1, AddedP99MS: 5},  // within 2 ms
			{SizeMB: 512, PeakMB: 11, RSSMB: 25, AddedP50MS: 1, AddedP99MS: 3},
			{SizeMB: 1024, PeakMB: 11, RSSMB: 25, AddedP50MS: 1, AddedP99MS: 3},
		}, 256},
		{"the median holds too", []measurement{
			{SizeMB: 128, PeakMB: 11, RSSMB: 25, AddedP50MS: 3.5, AddedP99MS: 4}, // p99 within, p50 2.5 ms above
			{SizeMB: 256, PeakMB: 11, RSSMB: 25, AddedP50MS: 3, AddedP99MS: 5},   // both exactly 2 ms above
			{SizeMB: 512, PeakMB: 11, RSSMB: 25, AddedP50MS: 1, AddedP99MS: 3},
			{SizeMB: 1024, PeakMB: 11, RSSMB: 25, AddedP50MS: 1, AddedP99MS: 3},
		}, 256},
		{"the invocation's own p99 is not the rule's", []measurement{
			{SizeMB: 128, PeakMB: 11, RSSMB: 25, AddedP50MS: 1.5, AddedP99MS: 4, P50MS: 1251, P99MS: 1290}, // the stream's jitter, 25 ms above
			{SizeMB: 256, PeakMB: 11, RSSMB: 25, AddedP50MS: 1, AddedP99MS: 3, P50MS: 1250, P99MS: 1260},
			{SizeMB: 512, PeakMB: 11, RSSMB: 25, AddedP50MS: 1, AddedP99MS: 3},
			{SizeMB: 1024, PeakMB: 11, RSSMB: 25, AddedP50MS: 1, AddedP99MS: 3},
		}, 128},
		{"the larger peak holds to 60 %", []measurement{
			{SizeMB: 128, PeakMB: 10, RSSMB: 80, AddedP50MS: 1, AddedP99MS: 3}, // RSS 80 ≥ 76.8
			{SizeMB: 256, PeakMB: 10, RSSMB: 80, AddedP50MS: 1, AddedP99MS: 3},
			{SizeMB: 512, PeakMB: 10, RSSMB: 80, AddedP50MS: 1, AddedP99MS: 3},
			{SizeMB: 1024, PeakMB: 10, RSSMB: 80, AddedP50MS: 1, AddedP99MS: 3},
		}, 256},
		{"a failed run is no candidate", []measurement{
			{SizeMB: 128, Error: "function error"},
			{SizeMB: 256, Error: "function error"},
			{SizeMB: 512, PeakMB: 11, RSSMB: 25, AddedP50MS: 1, AddedP99MS: 4},
			{SizeMB: 1024, PeakMB: 11, RSSMB: 25, AddedP50MS: 1, AddedP99MS: 3},
		}, 512},
		{"none passes", []measurement{
			{SizeMB: 128, PeakMB: 11, RSSMB: 25, AddedP50MS: 1, AddedP99MS: 50},
			{SizeMB: 256, PeakMB: 11, RSSMB: 25, AddedP50MS: 1, AddedP99MS: 50},
			{SizeMB: 512, PeakMB: 11, RSSMB: 25, AddedP50MS: 1, AddedP99MS: 50},
			{SizeMB: 1024, PeakMB: 11, RSSMB: 25, AddedP50MS: 1, AddedP99MS: 5.5},
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

func TestChooseRefusesANoisyReference(t *testing.T) {
	f := functionReport{Sizes: []measurement{
		{SizeMB: 128, PeakMB: 11, RSSMB: 25, AddedP50MS: 8, AddedP99MS: 400}, // within 2 ms of a reference that is noise
		{SizeMB: oneVCPU, PeakMB: 11, RSSMB: 25, AddedP50MS: 5, AddedP99MS: 403},
	}}
	f.choose()
	if f.ChosenMB != 0 || !strings.Contains(f.Why, "reference is noisy") {
		t.Errorf("chose %d MB (%s), want none from a noisy reference", f.ChosenMB, f.Why)
	}
}

func TestChooseWithoutReference(t *testing.T) {
	f := functionReport{Sizes: []measurement{
		{SizeMB: 128, PeakMB: 11, RSSMB: 25, AddedP50MS: 1, AddedP99MS: 3},
		{SizeMB: oneVCPU, Error: "rie: the emulator exited"},
	}}
	f.choose()
	if f.ChosenMB != 0 || !strings.Contains(f.Why, "no 1,769 MB reference") {
		t.Errorf("chose %d MB (%s), want none for want of a reference", f.ChosenMB, f.Why)
	}
}

func TestAttribute(t *testing.T) {
	sent := time.Unix(1_800_000_000, 0)
	done := sent.Add(1250 * time.Millisecond)
	at := func(d time.Duration) int64 { return sent.Add(d).UnixNano() }
	// served is the upstream's record of a call it took after took and
	// served for dur.
	served := func(route string, took, dur time.Duration) serveRecord {
		return serveRecord{Route: route, ReceivedUnixNS: at(took), DoneUnixNS: at(took + dur), ServedNS: int64(dur)}
	}
	for _, tc := range []struct {
		name    string
		records []serveRecord
		route   string
		want    timing
		wantErr string
	}{
		{"a streamed call: the provider's second is not sluice's",
			[]serveRecord{served("openai.chat", 1500*time.Microsecond, 1246*time.Millisecond)}, "openai.chat",
			timing{total: 1250 * time.Millisecond, added: 4 * time.Millisecond, toUpstream: 1500 * time.Microsecond}, ""},
		{"the last write stamped a few µs after the function saw it",
			[]serveRecord{served("anthropic.messages", 0, 1250*time.Millisecond+20*time.Microsecond)}, "anthropic.messages",
			timing{total: 1250 * time.Millisecond, added: -20 * time.Microsecond}, ""},
		{"a function that calls no upstream: all of it is added",
			nil, "",
			timing{total: 1250 * time.Millisecond, added: 1250 * time.Millisecond}, ""},
		{"a call where none was expected",
			[]serveRecord{served("openai.models", time.Millisecond, time.Millisecond)}, "",
			timing{}, "made 1 upstream calls (openai.models…), want none"},
		{"no call",
			nil, "openai.chat",
			timing{}, "made 0 upstream calls, want one openai.chat call"},
		{"a retry: two calls",
			[]serveRecord{served("openai.chat", time.Millisecond, 10*time.Millisecond), served("openai.chat", 20*time.Millisecond, time.Second)}, "openai.chat",
			timing{}, "made 2 upstream calls"},
		{"another route",
			[]serveRecord{served("openai.embeddings", time.Millisecond, time.Second)}, "openai.chat",
			timing{}, "called the upstream's openai.embeddings, want openai.chat"},
		{"taken before the invocation was sent",
			[]serveRecord{served("openai.chat", -time.Millisecond, time.Second)}, "openai.chat",
			timing{}, "outside the invocation"},
		{"taken after its answer was in",
			[]serveRecord{served("openai.chat", 1251*time.Millisecond, time.Millisecond)}, "openai.chat",
			timing{}, "outside the invocation"},
		{"served longer than the invocation waited",
			[]serveRecord{served("openai.chat", time.Millisecond, 1260*time.Millisecond)}, "openai.chat",
			timing{}, "served 1.26s of an invocation of 1.25s"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := attribute(sent, done, tc.records, tc.route)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("error %v, want one saying %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got != tc.want {
				t.Errorf("timing %+v, want %+v", got, tc.want)
			}
		})
	}
}

func TestPercentiles(t *testing.T) {
	ds := make([]time.Duration, 0, 100)
	for i := 100; i >= 1; i-- { // unsorted: percentiles sorts
		ds = append(ds, time.Duration(i)*time.Millisecond)
	}
	if p50, p99 := percentiles(ds); p50 != 51 || p99 != 99 {
		t.Errorf("p50 %v, p99 %v; want 51 and 99 ms", p50, p99)
	}
}

func TestP99Index(t *testing.T) {
	for n, want := range map[int]int{1: 0, 60: 59, 100: 98, 200: 197, 250: 247} {
		if got := p99Index(n); got != want {
			t.Errorf("p99Index(%d) = %d, want %d", n, got, want)
		}
	}
}
