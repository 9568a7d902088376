package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"time"
)

// defaultClockTicks is USER_HZ on every mainstream Linux build.
const defaultClockTicks = 100

// clockTicks returns the kernel's clock ticks per second (getconf CLK_TCK),
// the unit of utime and stime in /proc/<pid>/stat.
func clockTicks(ctx context.Context) int64 {
	out, err := exec.CommandContext(ctx, "getconf", "CLK_TCK").Output()
	if err != nil {
		return defaultClockTicks
	}
	n, err := strconv.ParseInt(strings.TrimSpace(string(out)), 10, 64)
	if err != nil || n <= 0 {
		return defaultClockTicks
	}
	return n
}

// procSample is one reading of a process's counters.
type procSample struct {
	CPU  time.Duration // utime + stime
	User time.Duration // utime
	// IOCalls counts read and write system calls (syscr + syscw of
	// /proc/<pid>/io; 0 where the file cannot be read).
	IOCalls int64
	RSS     int64 // VmRSS, bytes
	HWM     int64 // VmHWM (peak RSS since start or the last reset), bytes
}

// proc reads /proc for one process.
type proc struct {
	pid   int
	ticks int64
	root  string // "/proc", replaced in tests
}

func newProc(pid int, ticks int64) *proc { return &proc{pid: pid, ticks: ticks, root: "/proc"} }

func (p *proc) path(name string) string { return fmt.Sprintf("%s/%d/%s", p.root, p.pid, name) }

// sample reads /proc/<pid>/stat and /proc/<pid>/status.
func (p *proc) sample() (procSample, error) {
	stat, err := os.ReadFile(p.path("stat"))
	if err != nil {
		return procSample{}, fmt.Errorf("read stat of pid %d: %w", p.pid, err)
	}
	cpu, user, err := parseStatCPU(stat, p.ticks)
	if err != nil {
		return procSample{}, fmt.Errorf("pid %d: %w", p.pid, err)
	}
	status, err := os.ReadFile(p.path("status"))
	if err != nil {
		return procSample{}, fmt.Errorf("read status of pid %d: %w", p.pid, err)
	}
	rss, hwm, err := parseStatusMemory(status)
	if err != nil {
		return procSample{}, fmt.Errorf("pid %d: %w", p.pid, err)
	}
	var calls int64
	if io, err := os.ReadFile(p.path("io")); err == nil {
		calls = parseIOCalls(io)
	}
	return procSample{CPU: cpu, User: user, IOCalls: calls, RSS: rss, HWM: hwm}, nil
}

// parseIOCalls returns syscr + syscw from the contents of /proc/<pid>/io.
func parseIOCalls(io []byte) int64 {
	var n int64
	for line := range strings.Lines(string(io)) {
		key, val, _ := strings.Cut(line, ":")
		if key == "syscr" || key == "syscw" {
			v, _ := strconv.ParseInt(strings.TrimSpace(val), 10, 64)
			n += v
		}
	}
	return n
}

// resetPeak resets VmHWM to the current RSS (writing 5 to clear_refs).
func (p *proc) resetPeak() error {
	if err := os.WriteFile(p.path("clear_refs"), []byte("5"), 0); err != nil {
		return fmt.Errorf("reset peak RSS of pid %d: %w", p.pid, err)
	}
	return nil
}

// parseStatCPU returns utime+stime, and utime alone, from the contents of
// /proc/<pid>/stat.
// The command name (field 2) is in parentheses and may itself hold spaces
// and parentheses, so fields are counted from the last ')'.
func parseStatCPU(stat []byte, ticks int64) (cpu, user time.Duration, err error) {
	if ticks <= 0 {
		return 0, 0, fmt.Errorf("clock ticks %d: want > 0", ticks)
	}
	i := bytes.LastIndexByte(stat, ')')
	if i < 0 {
		return 0, 0, errors.New("stat: no ')' after the command name")
	}
	fields := strings.Fields(string(stat[i+1:]))
	// fields[0] is field 3 (state); utime is field 14, stime field 15.
	const utime, stime = 14 - 3, 15 - 3
	if len(fields) <= stime {
		return 0, 0, fmt.Errorf("stat: %d fields after the command name, want > %d", len(fields), stime)
	}
	u, err := strconv.ParseInt(fields[utime], 10, 64)
	if err != nil {
		return 0, 0, fmt.Errorf("stat utime %q: %w", fields[utime], err)
	}
	s, err := strconv.ParseInt(fields[stime], 10, 64)
	if err != nil {
		return 0, 0, fmt.Errorf("stat stime %q: %w", fields[stime], err)
	}
	tick := func(n int64) time.Duration { return time.Duration(n * int64(time.Second) / ticks) }
	return tick(u + s), tick(u), nil
}

// parseStatusMemory returns VmRSS and VmHWM, in bytes, from the contents of
// /proc/<pid>/status.
func parseStatusMemory(status []byte) (rss, hwm int64, err error) {
	var haveRSS, haveHWM bool
	for line := range strings.Lines(string(status)) {
		key, val, ok := strings.Cut(line, ":")
		if !ok || (key != "VmRSS" && key != "VmHWM") {
			continue
		}
		f := strings.Fields(val)
		if len(f) != 2 || f[1] != "kB" {
			return 0, 0, fmt.Errorf("status %s: unexpected value %q", key, strings.TrimSpace(val))
		}
		kb, err := strconv.ParseInt(f[0], 10, 64)
		if err != nil {
			return 0, 0, fmt.Errorf("status %s: %w", key, err)
		}
		if key == "VmRSS" {
			rss, haveRSS = kb<<10, true
		} else {
			hwm, haveHWM = kb<<10, true
		}
	}
	if !haveRSS || !haveHWM {
		return 0, 0, errors.New("status: VmRSS or VmHWM missing (a kernel thread or a zombie?)")
	}
	return rss, hwm, nil
}
