package local_test

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/sluice-gateway/sluice/pkg/store/local"
)

// helperEnv makes the test binary act as a second sluice process (see
// TestMain) on the data dir it names.
const (
	helperEnv  = "SLUICE_LOCAL_TEST_HELPER"
	helperDir  = "SLUICE_LOCAL_TEST_DIR"
	helperBusy = "writing"
)

func TestMain(m *testing.M) {
	switch os.Getenv(helperEnv) {
	case "":
		os.Exit(m.Run())
	case "open":
		// Open the dir and report the outcome.
		b, err := local.Open(os.Getenv(helperDir), local.Options{})
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		b.Close()
		os.Exit(0)
	case "crash":
		// Start writing an object that never ends; the test kills us midway.
		b, err := local.Open(os.Getenv(helperDir), local.Options{})
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		b.Blobs.Put(context.Background(), "files/partial", io.MultiReader(strings.NewReader(strings.Repeat("x", 3<<20)), announce{}))
		os.Exit(2) // unreachable: announce blocks
	}
}

// announce tells the test that a write is under way (its bytes are in the
// temporary file), then blocks for ever.
type announce struct{}

func (announce) Read([]byte) (int, error) {
	fmt.Println(helperBusy)
	select {}
}

func helper(t *testing.T, mode, dir string) *exec.Cmd {
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.CommandContext(t.Context(), exe, "-test.run=^$")
	cmd.Env = append(os.Environ(), helperEnv+"="+mode, helperDir+"="+dir)
	return cmd
}

// A second process on a data dir in use fails at once, saying why, and
// writes nothing.
func TestSecondProcessCannotOpenDataDir(t *testing.T) {
	t.Parallel() // waits out the lock timeout
	dir := t.TempDir()
	b, err := local.Open(dir, local.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	out, err := helper(t, "open", dir).CombinedOutput()
	var exit *exec.ExitError
	if !errors.As(err, &exit) || exit.ExitCode() != 1 {
		t.Fatalf("second process: %v (%s); want exit status 1", err, out)
	}
	if !strings.Contains(string(out), "another process holds its lock") {
		t.Errorf("second process said %q; want it to name the lock", out)
	}
	// In process too, as a typed error.
	if _, err := local.Open(dir, local.Options{}); !errors.Is(err, local.ErrLocked) {
		t.Errorf("second Open: %v; want ErrLocked", err)
	}
}

// A process killed in the middle of a blob write leaves a partial temporary
// file; the next process to open the dir removes it, and keeps the objects.
func TestOpenRemovesWritesACrashLeft(t *testing.T) {
	dir := t.TempDir()
	b, err := local.Open(dir, local.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := b.Blobs.Put(t.Context(), "files/kept", strings.NewReader("kept")); err != nil {
		t.Fatal(err)
	}
	b.Close()

	cmd := helper(t, "crash", dir)
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	line, err := bufio.NewReader(stdout).ReadString('\n')
	if err != nil || strings.TrimSpace(line) != helperBusy {
		cmd.Process.Kill()
		t.Fatalf("helper: %q, %v", line, err)
	}
	if err := cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	cmd.Wait()
	tmp := filepath.Join(dir, "blobs", "tmp")
	left, err := os.ReadDir(tmp)
	if err != nil || len(left) != 1 {
		t.Fatalf("after the crash: %v, %v; want one partial write", left, err)
	}
	if fi, _ := left[0].Info(); fi.Size() == 0 || time.Since(fi.ModTime()) > time.Minute {
		t.Fatalf("partial write: %d bytes, modified %v; want a fresh, non-empty file", fi.Size(), fi.ModTime())
	}

	b, err = local.Open(dir, local.Options{})
	if err != nil {
		t.Fatalf("open after the crash (the lock dies with its process): %v", err)
	}
	defer b.Close()
	if left, err := os.ReadDir(tmp); err != nil || len(left) != 0 {
		t.Errorf("partial writes after reopening: %v, %v; want none", left, err)
	}
	if n, err := b.Blobs.Size(t.Context(), "files/kept"); err != nil || n != 4 {
		t.Errorf("a stored object after reopening: %d, %v", n, err)
	}
}
