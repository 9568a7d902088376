package gateway_test

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sluice-gateway/sluice/pkg/gateway"
	"github.com/sluice-gateway/sluice/pkg/gateway/gatewaytest"
)

// TestBedrockNodeClientOverH2C: the AWS SDK for JavaScript's Bedrock
// client, with its default HTTP/2 handler, against the local process (its
// real server, gateway.Serve): the call is served over h2c, and sluice's
// own refusal reads as AWS's error — the NghttpError and
// "UnknownError".
func TestBedrockNodeClientOverH2C(t *testing.T) {
	dir := gatewaytest.NodeClient(t, "testdata/node")
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		w.Header().Set("Content-Type", "application/json")
		io.WriteString(w, `{"output":{"message":{"role":"assistant","content":[{"text":"Hi from bedrock"}]}},"stopReason":"end_turn",`+
			`"usage":{"inputTokens":3,"outputTokens":4,"totalTokens":7},"metrics":{"latencyMs":5}}`)
	}))
	t.Cleanup(up.Close)
	cfg := filepath.Join(t.TempDir(), "sluice.yaml")
	os.WriteFile(cfg, []byte("passthrough:\n  bedrock: {api_base: "+up.URL+", aws_region_name: us-east-1, aws_access_key_id: AKIDSLUICE, aws_secret_access_key: sluice-secret}\n"), 0o600)
	env := map[string]string{"SLUICE_DATA_DIR": t.TempDir(), "SLUICE_ADDR": "127.0.0.1:0", "SLUICE_MASTER_KEY": "sk-node-master", "SLUICE_CONFIG": cfg}
	g, err := gateway.Open(t.Context(), func(k string) string { return env[k] })
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { g.Close() })
	ctx, cancel := context.WithCancel(context.Background())
	out := &lockedBuffer{}
	done := make(chan error, 1)
	go func() { done <- g.Serve(ctx, out) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("serve: %v", err)
		}
	})
	listening := regexp.MustCompile(`listening on (http://\S+)`)
	var url string
	for deadline := time.Now().Add(5 * time.Second); url == ""; time.Sleep(5 * time.Millisecond) {
		if m := listening.FindStringSubmatch(out.String()); m != nil {
			url = m[1]
		} else if time.Now().After(deadline) {
			t.Fatalf("no listening line in %q", out.String())
		}
	}
	gatewaytest.RunNode(t.Context(), t, dir, "bedrock.mjs", "SLUICE_URL="+url, "SLUICE_KEY=sk-node-master", "NODE_NO_WARNINGS=1")
}

type lockedBuffer struct {
	mu sync.Mutex
	b  strings.Builder
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}
