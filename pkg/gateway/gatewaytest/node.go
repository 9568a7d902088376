package gatewaytest

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// NodeRequireEnv, "1" (make test sets it), makes a missing Node client a
// failure instead of a skip.
const NodeRequireEnv = "SLUICE_REQUIRE_NODE"

// NodeClient returns dir, a package's testdata/node, once the Node client
// its package-lock.json pins (openai, @anthropic-ai/sdk, an AWS SDK) is
// installed there (`make node-deps`: npm ci, which leaves
// node_modules/.package-lock.json). Without it the test skips — or fails,
// under NodeRequireEnv.
func NodeClient(t testing.TB, dir string) string {
	t.Helper()
	if _, err := os.Stat(filepath.Join(dir, "node_modules", ".package-lock.json")); err != nil {
		msg := "the Node client is not installed in " + dir + ": run `make node-deps`"
		if os.Getenv(NodeRequireEnv) == "1" {
			t.Fatal(msg + " (" + NodeRequireEnv + "=1, so not skipping)")
		}
		t.Skip(msg)
	}
	return dir
}

// RunNode runs `node script` in dir with env added to the environment; the
// script prints "ok" when every check it makes passed, and anything else
// fails the test with its output.
func RunNode(ctx context.Context, t testing.TB, dir, script string, env ...string) {
	t.Helper()
	cmd := exec.CommandContext(ctx, "node", script)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), env...)
	out, err := cmd.CombinedOutput()
	if err != nil || strings.TrimSpace(string(out)) != "ok" {
		t.Fatalf("node %s: %v\n%s", script, err, out)
	}
}
