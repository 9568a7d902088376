package main

import (
	"context"
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"
)

func TestParseStatCPU(t *testing.T) {
	// A command name with spaces and parentheses must not shift the fields.
	stat := "4242 (my (odd) proc) S 1 4242 4242 0 -1 4194560 2191 0 0 0 250 75 0 0 20 0 9 0 12345 1234567 890 18446744073709551615\n"
	cpu, user, err := parseStatCPU([]byte(stat), 100)
	if err != nil {
		t.Fatal(err)
	}
	if want := 3250 * time.Millisecond; cpu != want {
		t.Errorf("cpu = %v, want %v (utime 250 + stime 75 ticks at 100 Hz)", cpu, want)
	}
	if want := 2500 * time.Millisecond; user != want {
		t.Errorf("user = %v, want %v (utime 250 ticks at 100 Hz)", user, want)
	}
	for _, bad := range []string{"4242 no-paren S 1", "4242 (x) S 1 2 3", "4242 (x) S 1 4242 4242 0 -1 4194560 2191 0 0 0 x 75 0"} {
		if _, _, err := parseStatCPU([]byte(bad), 100); err == nil {
			t.Errorf("parseStatCPU(%q): no error", bad)
		}
	}
	if _, _, err := parseStatCPU([]byte(stat), 0); err == nil {
		t.Error("zero clock ticks: no error")
	}
}

func TestParseStatusMemory(t *testing.T) {
	status := "Name:\tsluice\nVmPeak:\t 1300000 kB\nVmHWM:\t   51200 kB\nVmRSS:\t   40960 kB\nThreads:\t9\n"
	rss, hwm, err := parseStatusMemory([]byte(status))
	if err != nil {
		t.Fatal(err)
	}
	if rss != 40960<<10 || hwm != 51200<<10 {
		t.Fatalf("rss %d hwm %d", rss, hwm)
	}
	if _, _, err := parseStatusMemory([]byte("Name:\tkthreadd\nThreads:\t1\n")); err == nil {
		t.Error("no VmRSS: no error")
	}
}

func TestProcSampleOfSelf(t *testing.T) {
	p := newProc(os.Getpid(), clockTicks(context.Background()))
	s, err := p.sample()
	if err != nil {
		t.Fatal(err)
	}
	if s.RSS <= 0 || s.HWM < s.RSS {
		t.Fatalf("sample %+v", s)
	}
}

func TestProcReadsFromRoot(t *testing.T) {
	root := t.TempDir()
	dir := filepath.Join(root, strconv.Itoa(7))
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	write := func(name, s string) {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(s), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write("stat", "7 (x) R 1 7 7 0 -1 0 0 0 0 0 100 100 0 0 20 0 1 0 1 1 1\n")
	write("status", "VmHWM:\t 2048 kB\nVmRSS:\t 1024 kB\n")
	write("clear_refs", "")
	p := &proc{pid: 7, ticks: 100, root: root}
	s, err := p.sample()
	if err != nil {
		t.Fatal(err)
	}
	if s.CPU != 2*time.Second || s.RSS != 1<<20 || s.HWM != 2<<20 {
		t.Fatalf("sample %+v", s)
	}
	if err := p.resetPeak(); err != nil {
		t.Fatal(err)
	}
	if b, _ := os.ReadFile(filepath.Join(dir, "clear_refs")); string(b) != "5" {
		t.Fatalf("clear_refs got %q, want 5", b)
	}
}
