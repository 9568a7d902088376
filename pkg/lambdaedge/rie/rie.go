// Package rie runs a built Lambda bootstrap under AWS's Lambda Runtime
// Interface Emulator (aws-lambda-rie, the Go module
// github.com/aws/aws-lambda-runtime-interface-emulator that `make rie`
// installs into bin/tools): the emulator execs the bootstrap, serves it the
// Runtime API and takes invocations on its own HTTP endpoint, the way
// `sam local invoke` and Lambda's container images do. Tests, `make invoke`
// and the sizing script (infra/sizing) run functions through it; both of its
// addresses are bound to 127.0.0.1.
//
// The emulator buffers a function's whole answer before it answers the
// invocation (a streamed answer arrives complete, in order, after the
// handler returned), so what must see an answer's chunks as they are
// produced uses pkg/lambdaedge/runtimeapi instead.
package rie

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"syscall"
	"time"
)

// Binary is the emulator's file name.
const Binary = "aws-lambda-rie"

// PathEnv names the variable that points at the emulator binary; without it
// Find looks for bin/tools/aws-lambda-rie in the module root.
const PathEnv = "SLUICE_RIE"

// RequireEnv, set to 1 (make test sets it), turns a missing emulator from a
// skipped test into a failed one.
const RequireEnv = "SLUICE_REQUIRE_RIE"

// MaxAnswer bounds an answer read back from the emulator: Lambda's default
// cap on a streamed answer (a buffered one is capped at 6 MB).
const MaxAnswer = 200 << 20

// invokePath is the emulator's invocation endpoint (Lambda's Invoke API path
// for a function named "function").
const invokePath = "/2015-03-31/functions/function/invocations"

// LambdaEnv is the environment Lambda gives every function (besides
// AWS_LAMBDA_RUNTIME_API, which the emulator adds): name, memory, version,
// log settings, region. A function's own variables go after it.
func LambdaEnv(function string) []string {
	return []string{
		"AWS_LAMBDA_FUNCTION_NAME=" + function,
		"AWS_LAMBDA_FUNCTION_VERSION=$LATEST",
		"AWS_LAMBDA_FUNCTION_MEMORY_SIZE=512",
		"AWS_LAMBDA_LOG_GROUP_NAME=/aws/lambda/" + function,
		"AWS_LAMBDA_LOG_STREAM_NAME=local",
		"AWS_LAMBDA_LOG_FORMAT=JSON",
		"AWS_REGION=us-east-1",
		"AWS_DEFAULT_REGION=us-east-1",
		"AWS_EXECUTION_ENV=AWS_Lambda_provided.al2023",
		"_HANDLER=bootstrap",
		"TZ=:UTC",
	}
}

// Find returns the emulator's path: $SLUICE_RIE, else bin/tools/aws-lambda-rie
// in the module root above the working directory.
func Find() (string, error) {
	if p := os.Getenv(PathEnv); p != "" {
		if _, err := os.Stat(p); err != nil {
			return "", fmt.Errorf("rie: %s=%s: %w", PathEnv, p, err)
		}
		return p, nil
	}
	dir, err := os.Getwd()
	if err != nil {
		return "", fmt.Errorf("rie: %w", err)
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			p := filepath.Join(dir, "bin", "tools", Binary)
			if _, err := os.Stat(p); err != nil {
				return "", fmt.Errorf("rie: %s is not installed (make rie installs it): %w", Binary, err)
			}
			return p, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", errors.New("rie: no go.mod above the working directory, and " + PathEnv + " is not set")
		}
		dir = parent
	}
}

// Options are how Start runs the emulator.
type Options struct {
	// Env is the function's environment (LambdaEnv, then its own
	// variables); the emulator passes it on, and nothing of this
	// process's environment.
	Env []string
	// Out takes the emulator's and the function's output (discarded when nil).
	Out io.Writer
	// Timeout is the function's timeout (AWS_LAMBDA_FUNCTION_TIMEOUT,
	// whole seconds; 30 s when zero).
	Timeout time.Duration
	// Exec, when set, is the command the emulator runs in place of the
	// bootstrap alone, with the bootstrap's path as its last argument (for
	// example a shell that moves itself into a cgroup, then execs it).
	Exec []string
}

// Emulator is one aws-lambda-rie process and the bootstrap it runs.
type Emulator struct {
	// Started is when the emulator was started: a cold start begins here
	// (the emulator starts the bootstrap on the first invocation).
	Started time.Time
	// Pid is the emulator's process id (the bootstrap is its child, in the
	// same process group).
	Pid int

	url    string
	client *http.Client
	cmd    *exec.Cmd
	exited chan struct{}
	err    error
}

// Start runs the emulator at rieBin on the bootstrap at path and waits until
// it takes invocations.
func Start(ctx context.Context, rieBin, path string, opts Options) (*Emulator, error) {
	path, err := filepath.Abs(path)
	if err != nil {
		return nil, fmt.Errorf("rie: %w", err)
	}
	ports, err := freePorts(2)
	if err != nil {
		return nil, err
	}
	invokeAddr := net.JoinHostPort("127.0.0.1", strconv.Itoa(ports[0]))
	apiAddr := net.JoinHostPort("127.0.0.1", strconv.Itoa(ports[1]))
	timeout := opts.Timeout
	if timeout <= 0 {
		timeout = 30 * time.Second
	}
	args := []string{
		"--runtime-interface-emulator-address", invokeAddr,
		"--runtime-api-address", apiAddr,
	}
	// The emulator runs its arguments as the bootstrap's command line; with
	// more than one, it also takes the last as the handler name (_HANDLER),
	// which a Go bootstrap does not read.
	args = append(append(args, opts.Exec...), path)
	cmd := exec.Command(rieBin, args...)
	cmd.Dir = filepath.Dir(path) // LAMBDA_TASK_ROOT: where the bootstrap lives
	cmd.Env = append(append([]string{}, opts.Env...),
		"LAMBDA_TASK_ROOT="+cmd.Dir,
		"AWS_LAMBDA_FUNCTION_TIMEOUT="+strconv.Itoa(int((timeout+time.Second-1)/time.Second)))
	out := opts.Out
	if out == nil {
		out = io.Discard
	}
	cmd.Stdout, cmd.Stderr = out, out
	// Its own process group, so Stop ends the bootstrap with the emulator.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	e := &Emulator{
		url:    "http://" + invokeAddr + invokePath,
		client: &http.Client{Transport: &http.Transport{DisableCompression: true}},
		cmd:    cmd,
		exited: make(chan struct{}),
	}
	e.Started = time.Now()
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("rie: start %s: %w", rieBin, err)
	}
	e.Pid = cmd.Process.Pid
	go func() {
		e.err = cmd.Wait()
		close(e.exited)
	}()
	if err := e.awaitListening(ctx, invokeAddr); err != nil {
		e.Stop()
		return nil, err
	}
	return e, nil
}

// awaitListening polls the emulator's address until it accepts a connection.
func (e *Emulator) awaitListening(ctx context.Context, addr string) error {
	deadline := time.Now().Add(10 * time.Second)
	for {
		c, err := net.DialTimeout("tcp", addr, time.Second)
		if err == nil {
			c.Close()
			return nil
		}
		select {
		case <-e.exited:
			return fmt.Errorf("rie: the emulator exited before it listened on %s: %v", addr, e.err)
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(20 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("rie: the emulator did not listen on %s within 10s", addr)
		}
	}
}

// freePorts reserves n free ports on 127.0.0.1 and releases them for the
// emulator (it takes addresses, not listeners).
func freePorts(n int) ([]int, error) {
	var lns []net.Listener
	defer func() {
		for _, ln := range lns {
			ln.Close()
		}
	}()
	ports := make([]int, n)
	for i := range ports {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return nil, fmt.Errorf("rie: %w", err)
		}
		lns = append(lns, ln)
		ports[i] = ln.Addr().(*net.TCPAddr).Port
	}
	return ports, nil
}

// FunctionError is a failure the function reported (its /error document).
type FunctionError struct {
	Type    string `json:"errorType"`
	Message string `json:"errorMessage"`
}

func (e *FunctionError) Error() string { return e.Type + ": " + e.Message }

// Result is one invocation's answer as the emulator returned it.
type Result struct {
	// RequestID is the invocation's Lambda request id.
	RequestID string
	// Payload is the function's whole answer: for an HTTP function see
	// DecodeHTTP (streamed or not, the emulator returns it in one piece).
	Payload []byte
	// Error is set when the function reported a failure.
	Error *FunctionError
	// Sent is when the invocation was sent, Done when its answer was in.
	Sent, Done time.Time
}

// Invoke sends one event and waits for the function's answer.
func (e *Emulator) Invoke(ctx context.Context, event []byte) (*Result, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, e.url, bytes.NewReader(event))
	if err != nil {
		return nil, fmt.Errorf("rie: %w", err)
	}
	res := &Result{RequestID: newRequestID()}
	// The emulator hands the function this id (Lambda-Runtime-Aws-Request-Id).
	req.Header.Set("X-Amzn-RequestId", res.RequestID)
	res.Sent = time.Now()
	resp, err := e.client.Do(req)
	if err != nil {
		select {
		case <-e.exited:
			return nil, fmt.Errorf("rie: invoke: the emulator exited (%v): %w", e.err, err)
		default:
		}
		return nil, fmt.Errorf("rie: invoke: %w", err)
	}
	defer resp.Body.Close()
	res.Payload, err = io.ReadAll(io.LimitReader(resp.Body, MaxAnswer+1))
	res.Done = time.Now()
	if err != nil {
		return nil, fmt.Errorf("rie: read the answer: %w", err)
	}
	if len(res.Payload) > MaxAnswer {
		return nil, fmt.Errorf("rie: the answer is over %d bytes", MaxAnswer)
	}
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("rie: invoke answered %s: %s", resp.Status, res.Payload)
	}
	res.Error = functionError(res.Payload)
	return res, nil
}

// functionError reads the document the emulator answers (status 200) when
// the function posted /error: {"errorMessage":…,"errorType":…}. No answer
// of a sluice function has an errorType member.
func functionError(payload []byte) *FunctionError {
	if len(payload) == 0 || payload[0] != '{' {
		return nil
	}
	var doc struct {
		Type    *string `json:"errorType"`
		Message string  `json:"errorMessage"`
	}
	if json.Unmarshal(payload, &doc) != nil || doc.Type == nil {
		return nil
	}
	return &FunctionError{Type: *doc.Type, Message: doc.Message}
}

// newRequestID is a random UUID, as Lambda's request ids are.
func newRequestID() string {
	var b [16]byte
	_, _ = rand.Read(b[:])
	b[6] = b[6]&0x0f | 0x40
	b[8] = b[8]&0x3f | 0x80
	h := hex.EncodeToString(b[:])
	return h[0:8] + "-" + h[8:12] + "-" + h[12:16] + "-" + h[16:20] + "-" + h[20:]
}

// Exited is closed when the emulator has exited.
func (e *Emulator) Exited() <-chan struct{} { return e.exited }

// Stop kills the emulator and the bootstrap (its process group) and waits
// for the emulator.
func (e *Emulator) Stop() {
	select {
	case <-e.exited:
	default:
		_ = syscall.Kill(-e.Pid, syscall.SIGKILL)
		<-e.exited
	}
}
