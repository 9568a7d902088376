package main

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"time"
)

// stopGrace is how long a child gets to exit after SIGTERM.
const stopGrace = 5 * time.Second

// child is a process the harness started: the upstream, the bare proxy, or
// sluice. Its output goes to a log file; it is stopped by its own pid.
type child struct {
	name    string
	cmd     *exec.Cmd
	proc    *proc
	logPath string
	log     *os.File
	done    chan struct{}
	waitErr error
}

// startChild starts bin with args and extra environment, logging to
// logDir/name.log. If announce is set it waits for the child's first line
// mentioning http:// and returns that URL.
func startChild(ctx context.Context, name, logDir, bin string, args, env []string, ticks int64, announce bool) (*child, string, error) {
	logPath := filepath.Join(logDir, name+".log")
	logFile, err := os.Create(logPath)
	if err != nil {
		return nil, "", fmt.Errorf("create log for %s: %w", name, err)
	}
	cmd := exec.Command(bin, args...)
	cmd.Env = append(os.Environ(), env...)
	cmd.Stderr = logFile
	cmd.SysProcAttr = childAttrs()
	var stdout io.ReadCloser
	if announce {
		if stdout, err = cmd.StdoutPipe(); err != nil {
			logFile.Close()
			return nil, "", fmt.Errorf("stdout of %s: %w", name, err)
		}
	} else {
		cmd.Stdout = logFile
	}
	if err := cmd.Start(); err != nil {
		logFile.Close()
		return nil, "", fmt.Errorf("start %s: %w", name, err)
	}
	c := &child{name: name, cmd: cmd, proc: newProc(cmd.Process.Pid, ticks), logPath: logPath, log: logFile, done: make(chan struct{})}
	if !announce {
		go c.wait()
		return c, "", nil
	}
	urls := make(chan string, 1)
	scanned := make(chan struct{})
	go func() {
		defer close(scanned)
		sc := bufio.NewScanner(stdout)
		found := false
		for sc.Scan() {
			line := sc.Text()
			fmt.Fprintln(logFile, line)
			if i := strings.Index(line, "http://"); i >= 0 && !found {
				found = true
				urls <- strings.Fields(line[i:])[0]
			}
		}
		close(urls)
	}()
	// Wait must not run before the pipe has been read to its end.
	go func() {
		<-scanned
		c.wait()
	}()
	select {
	case u, ok := <-urls:
		if ok {
			return c, u, nil
		}
		c.stop()
		return nil, "", fmt.Errorf("%s exited before announcing its address: %s", name, c.tail(5))
	case <-time.After(10 * time.Second):
		c.stop()
		return nil, "", fmt.Errorf("%s did not announce its address within 10s: %s", name, c.tail(5))
	case <-ctx.Done():
		c.stop()
		return nil, "", ctx.Err()
	}
}

func (c *child) wait() {
	c.waitErr = c.cmd.Wait()
	close(c.done)
}

// exited reports whether the child has ended.
func (c *child) exited() bool {
	select {
	case <-c.done:
		return true
	default:
		return false
	}
}

// stop sends SIGTERM to the child (by its pid), and SIGKILL if it has not
// exited after stopGrace.
func (c *child) stop() {
	if c == nil {
		return
	}
	if !c.exited() {
		_ = c.cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-c.done:
		case <-time.After(stopGrace):
			_ = c.cmd.Process.Kill()
			<-c.done
		}
	}
	c.log.Close()
}

// tail returns the last n lines of the child's log, for error messages.
func (c *child) tail(n int) string {
	b, err := os.ReadFile(c.logPath)
	if err != nil {
		return "(no log)"
	}
	lines := strings.Split(strings.TrimSpace(string(b)), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	s := strings.Join(lines, " | ")
	if s == "" {
		return "(empty log)"
	}
	return s
}

// freeAddr returns a loopback address with a port that was free a moment ago.
func freeAddr() (string, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", fmt.Errorf("find a free port: %w", err)
	}
	addr := ln.Addr().String()
	if err := ln.Close(); err != nil {
		return "", fmt.Errorf("find a free port: %w", err)
	}
	return addr, nil
}
