package runtimeapi

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os/exec"
	"path/filepath"
	"time"
)

// Process is a bootstrap running against a Server.
type Process struct {
	// Started is when the process was started: the start of a cold start.
	Started time.Time
	cmd     *exec.Cmd
	exited  chan struct{}
	err     error
}

// Exec starts the bootstrap at path with env (and nothing else of this
// process's environment, as in Lambda) pointed at s. Its stdout and stderr go
// to out. When the process exits, s fails every invocation waiting on it.
func (s *Server) Exec(path string, env []string, out io.Writer) (*Process, error) {
	path, err := filepath.Abs(path) // the working directory changes below
	if err != nil {
		return nil, fmt.Errorf("runtimeapi: %w", err)
	}
	cmd := exec.Command(path)
	cmd.Dir = filepath.Dir(path) // LAMBDA_TASK_ROOT: where the bootstrap lives
	cmd.Env = append(append([]string{}, env...), "AWS_LAMBDA_RUNTIME_API="+s.Addr(), "LAMBDA_TASK_ROOT="+cmd.Dir)
	cmd.Stdout, cmd.Stderr = out, out
	p := &Process{cmd: cmd, exited: make(chan struct{})}
	p.Started = time.Now()
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("runtimeapi: start %s: %w", path, err)
	}
	initTimeout := s.InitTimeout
	if initTimeout <= 0 {
		initTimeout = DefaultInitTimeout
	}
	go func() {
		select {
		case <-s.ready:
		case <-p.exited:
		case <-time.After(initTimeout):
			s.fail(fmt.Errorf("runtimeapi: the function did not finish initializing (ask for its first event) within %s", initTimeout))
		}
	}()
	go func() {
		p.err = cmd.Wait()
		close(p.exited)
		msg := "exited"
		if p.err != nil {
			msg = p.err.Error()
		}
		s.fail(fmt.Errorf("runtimeapi: the function process %s", msg))
	}()
	return p, nil
}

// Exited is closed when the process has exited.
func (p *Process) Exited() <-chan struct{} { return p.exited }

// Stop kills the process (a frozen or finished function has nothing to
// flush) and waits for it.
func (p *Process) Stop() error {
	select {
	case <-p.exited:
	default:
		_ = p.cmd.Process.Kill()
		<-p.exited
	}
	var ee *exec.ExitError
	if p.err != nil && !errors.As(p.err, &ee) {
		return p.err
	}
	return nil
}

// Run is one cold start: it starts a server, execs the bootstrap, sends each
// event in turn, and stops both. It returns the results so far and the
// process's start time, with the first error.
func Run(ctx context.Context, path string, env []string, out io.Writer, events ...[]byte) ([]*Result, *Process, error) {
	s, err := NewServer()
	if err != nil {
		return nil, nil, err
	}
	defer s.Close()
	p, err := s.Exec(path, env, out)
	if err != nil {
		return nil, nil, err
	}
	defer p.Stop()
	var results []*Result
	for i, e := range events {
		r, err := s.Invoke(ctx, e, nil)
		if err != nil {
			return results, p, fmt.Errorf("event %d: %w", i+1, err)
		}
		results = append(results, r)
	}
	return results, p, nil
}
