package gateway

import (
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/sluice-gateway/sluice/pkg/logging"
)

// logRecords parses the JSON log lines written so far.
func logRecords(t *testing.T, logs *syncBuffer) []map[string]any {
	t.Helper()
	var out []map[string]any
	for _, line := range strings.Split(strings.TrimSpace(logs.String()), "\n") {
		if line == "" {
			continue
		}
		var rec map[string]any
		if err := json.Unmarshal([]byte(line), &rec); err != nil {
			t.Fatalf("log line is not JSON: %q", line)
		}
		out = append(out, rec)
	}
	return out
}

// closedLines counts the log lines that say a request to path ended with
// its client gone.
func closedLines(t *testing.T, logs *syncBuffer, path string) int {
	n := 0
	for _, rec := range logRecords(t, logs) {
		if rec["path"] == path && rec["status"] == float64(499) {
			n++
		}
	}
	return n
}

// upstreamThatWaits answers nothing until its caller goes: it tells arrived
// when a request has come in, and reads its body (net/http notices a
// closed connection only once the body has been read).
func upstreamThatWaits(t *testing.T, arrived chan<- string) *httptest.Server {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		arrived <- r.URL.Path
		io.Copy(io.Discard, r.Body)
		<-r.Context().Done()
	}))
	t.Cleanup(srv.Close)
	return srv
}

// TestClientHangUpsAreLoggedAs499 hangs up on each route family at each
// stage a client can leave: while its body is read, while the provider
// works (a model call, a passthrough call), while an upload streams. Each
// is logged as what it is — status 499 at info — and nothing is logged as
// an error.
func TestClientHangUpsAreLoggedAs499(t *testing.T) {
	logs := &syncBuffer{}
	prev := slog.Default()
	t.Cleanup(func() { slog.SetDefault(prev) })
	slog.SetDefault(logging.New(logs, "json", "debug"))

	arrived := make(chan string, 10)
	up := upstreamThatWaits(t, arrived)
	cfg := filepath.Join(t.TempDir(), "sluice.yaml")
	os.WriteFile(cfg, []byte("passthrough:\n"+
		"  anthropic: {api_base: "+up.URL+", api_key: sk-ant-provider}\n"+
		"  bedrock: {api_base: "+up.URL+", aws_region_name: us-east-1, aws_access_key_id: AKIDSLUICE, aws_secret_access_key: sluice-secret}\n"+
		"model_list:\n  - model_name: small\n    litellm_params: {model: openai/text-embedding-3-small, api_base: "+up.URL+", api_key: sk-p}\n"), 0o600)
	addr, master := serveWith(t, map[string]string{"SLUICE_CONFIG": cfg})
	url := "http://" + addr
	team := post(t, url+"/team/new", master, `{"team_alias":"t"}`)["team_id"].(string)
	key := post(t, url+"/key/generate", master, `{"team_id":"`+team+`"}`)["key"].(string)

	head := func(path, contentType string, length int) string {
		return fmt.Sprintf("POST %s HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer %s\r\nContent-Type: %s\r\nContent-Length: %d\r\n\r\n", path, key, contentType, length)
	}
	const form = "multipart/form-data; boundary=b"
	formStart := "--b\r\nContent-Disposition: form-data; name=\"purpose\"\r\n\r\nbatch\r\n--b\r\nContent-Disposition: form-data; name=\"file\"; filename=\"a.jsonl\"\r\n\r\n{\"a\":"
	for _, tc := range []struct {
		name, path, request string
		waitForUpstream     bool
	}{
		{"model call, while its body is read", "/v1/embeddings", head("/v1/embeddings", "application/json", 100) + `{"model":`, false},
		{"model call, while the provider works", "/v1/embeddings", head("/v1/embeddings", "application/json", 29) + `{"model":"small","input":"x"}`, true},
		// A body declared over 32 KiB streams up; a shorter one is read
		// first, as Bedrock's is.
		{"passthrough, while its body streams up", "/anthropic/v1/messages", head("/anthropic/v1/messages", "application/json", 64<<10) + `{"model":`, true},
		{"passthrough, while its small body is read", "/anthropic/v1/messages", head("/anthropic/v1/messages", "application/json", 100) + `{"model":`, false},
		{"passthrough, while the provider works", "/anthropic/v1/messages", head("/anthropic/v1/messages", "application/json", 2) + `{}`, true},
		{"passthrough, while its body is read whole", "/bedrock/model/m/invoke", head("/bedrock/model/m/invoke", "application/json", 100) + `{"x":`, false},
		{"file upload, while it streams", "/v1/files", head("/v1/files", form, 10000) + formStart, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			before := closedLines(t, logs, tc.path)
			x := dialRaw(t, addr, tc.request)
			if tc.waitForUpstream {
				select {
				case <-arrived:
				case <-time.After(5 * time.Second):
					t.Fatal("the call never reached the upstream")
				}
			}
			// Otherwise the server reads what was sent, then finds the
			// connection closed while it waits for the rest of the body.
			x.conn.Close()
			deadline := time.Now().Add(5 * time.Second)
			for closedLines(t, logs, tc.path) == before {
				if time.Now().After(deadline) {
					t.Fatalf("no 499 logged for %s:\n%s", tc.path, logs)
				}
				time.Sleep(10 * time.Millisecond)
			}
		})
	}
	for _, rec := range logRecords(t, logs) {
		if rec["level"] == "ERROR" || rec["status"] == float64(499) && rec["level"] != "INFO" {
			t.Errorf("logged %v", rec)
		}
	}
}
