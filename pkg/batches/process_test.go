package batches_test

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/sluice-gateway/sluice/pkg/batches"
	"github.com/sluice-gateway/sluice/pkg/gateway"
	"github.com/sluice-gateway/sluice/pkg/gateway/awscloud"
	"github.com/sluice-gateway/sluice/pkg/gateway/gatewaytest"
	"github.com/sluice-gateway/sluice/pkg/handoff"
	"github.com/sluice-gateway/sluice/pkg/server"
)

// processEnv makes the test binary run a local sluice process instead of
// the tests (see TestMain): the gateway of the environment's SLUICE_*
// settings, with small chunks.
const processEnv = "SLUICE_BATCHES_TEST_PROCESS"

func TestMain(m *testing.M) {
	if os.Getenv(processEnv) == "" {
		os.Exit(m.Run())
	}
	if err := serveProcess(); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	os.Exit(0)
}

// serveProcess is `make run`'s process, with the batch engine cutting
// chunks of 3 lines, showing a running chunk's progress every 50 ms and
// holding a chunk's lease 2 s without renewal (the run that takes a dead
// process's chunk over on a shared store waits that out).
func serveProcess() error {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM)
	defer stop()
	g, err := gateway.Open(ctx, os.Getenv, gateway.WithHandoff(handoff.Wrap), gateway.WithAWS(awscloud.Open))
	if err != nil {
		return err
	}
	defer g.Close()
	if g.Services, err = server.NewServices(server.Deps{
		Settings: g.Settings, Config: g.Config, Backend: g.Backend, MasterKey: g.Settings.MasterKey, Getenv: os.Getenv,
		Batches: func(o *batches.Options) {
			o.ChunkLines, o.RetryDelay = 3, 10*time.Millisecond
			o.ProgressEvery, o.Lease = 50*time.Millisecond, processLease
		},
	}); err != nil {
		return err
	}
	return g.Serve(ctx, os.Stdout)
}

// process is a sluice process started from the test binary.
type process struct {
	cmd *exec.Cmd
	url string
}

var listening = regexp.MustCompile(`sluice listening on (http://\S+)`)

// processLease is the process's chunk lease.
const processLease = 2 * time.Second

// startProcess starts a sluice process on the data dir dir (the local
// backend, unless env says otherwise), with env added to its environment.
func startProcess(t *testing.T, dir, configPath, master string, env ...string) *process {
	t.Helper()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(exe, "-test.run=^$")
	cmd.Env = append(os.Environ(), processEnv+"=1", "SLUICE_ADDR=127.0.0.1:0", "SLUICE_DATA_DIR="+dir,
		"SLUICE_CONFIG="+configPath, "SLUICE_MASTER_KEY="+master, "SLUICE_LOG_LEVEL=warn",
		"UPSTREAM_KEY="+upstreamKey, "AWS_SECRET="+awsSecret)
	cmd.Env = append(cmd.Env, env...)
	cmd.Stderr = os.Stderr
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	p := &process{cmd: cmd}
	t.Cleanup(func() { p.kill() })
	sc := bufio.NewScanner(stdout)
	for sc.Scan() {
		if m := listening.FindStringSubmatch(sc.Text()); m != nil {
			p.url = m[1]
			go func() {
				for sc.Scan() {
				}
			}()
			return p
		}
	}
	t.Fatalf("the sluice process ended before it listened: %v", cmd.Wait())
	return nil
}

// kill ends the process at once (SIGKILL): no shutdown runs.
func (p *process) kill() {
	if p.cmd.ProcessState == nil {
		p.cmd.Process.Kill()
		p.cmd.Wait()
	}
}

// Killing the local process while a chunk's lines are at the provider, and
// starting it again on the same data dir, loses no line and writes none
// twice: the queue hands the chunk's message back at once (the process that
// held it is gone), its lease is void for the same reason, and the chunk
// runs again from what had been committed.
func TestKillingTheProcessMidChunkLosesNoLine(t *testing.T) {
	u := newUpstream(t)
	dir := t.TempDir()
	configPath := filepath.Join(t.TempDir(), "sluice.yaml")
	if err := os.WriteFile(configPath, []byte(modelConfig(u)), 0o600); err != nil {
		t.Fatal(err)
	}
	master := "sk-batches-process-test-master-key"
	p := startProcess(t, dir, configPath, master)
	gt := gatewaytest.Connect(t, p.url, master)
	_, key := gt.TeamKey()
	lines := embeddingLines("emb", "l", 9, func(i int) string { return "process line " + strconv.Itoa(i) })
	lines[3].Body["input"], lines[4].Body["input"] = "block 3", "block 4" // chunk 1 stays at the provider
	b := createBatch(t, gt, key, uploadInput(t, gt, key, jsonl(lines)))
	<-u.blocked
	<-u.blocked
	p.kill()
	u.open()

	p = startProcess(t, dir, configPath, master)
	gt = gatewaytest.Connect(t, p.url, master)
	b = waitFor(t, gt, key, b.ID, batches.StatusCompleted)
	if b.RequestCounts != (batches.RequestCounts{Total: 9, Completed: 9}) {
		t.Errorf("%+v", b.RequestCounts)
	}
	collect(t, gt, key, b, lines)
	// A line whose chunk had not committed when the process died ran again
	// (at most once more); the lines at the provider then did.
	for _, l := range lines {
		text := l.Body["input"].(string)
		if n := u.calls(text); n < 1 || n > 2 || (strings.HasPrefix(text, "block") && n != 2) {
			t.Errorf("%s: %d provider calls", l.CustomID, n)
		}
	}
	p.cmd.Process.Signal(syscall.SIGTERM)
	if err := p.cmd.Wait(); err != nil {
		t.Errorf("the process did not stop cleanly: %v", err)
	}
}
