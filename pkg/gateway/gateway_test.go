package gateway

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"
)

// syncBuffer is a bytes.Buffer safe for the server goroutine and the test.
type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

var listenRE = regexp.MustCompile(`listening on (http://\S+)`)

// serve starts g and returns its URL and a stop function that waits for Serve.
func serve(t testing.TB, g *Gateway) (url string, out *syncBuffer, stop func()) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	out = &syncBuffer{}
	done := make(chan error, 1)
	go func() { done <- g.Serve(ctx, out) }()
	deadline := time.Now().Add(5 * time.Second)
	for {
		if m := listenRE.FindStringSubmatch(out.String()); m != nil {
			url = m[1]
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("no listening line in %q", out.String())
		}
		time.Sleep(5 * time.Millisecond)
	}
	return url, out, func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Serve returned %v after shutdown, want nil", err)
		}
	}
}

func post(t testing.TB, url, key, body string) map[string]any {
	t.Helper()
	req, _ := http.NewRequest("POST", url, strings.NewReader(body))
	req.Header.Set("Authorization", "Bearer "+key)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var m map[string]any
	json.NewDecoder(resp.Body).Decode(&m)
	if resp.StatusCode != 200 {
		t.Fatalf("POST %s = %d %v", url, resp.StatusCode, m)
	}
	return m
}

func get(t *testing.T, url, key string) int {
	t.Helper()
	req, _ := http.NewRequest("GET", url, nil)
	if key != "" {
		req.Header.Set("Authorization", "Bearer "+key)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	return resp.StatusCode
}

// TestFirstStartAndRestart is make run on a fresh machine: no environment but
// a data dir; the master key is generated, saved 0600 and shown once; after a
// restart the team and key still work and the key is not shown again.
func TestFirstStartAndRestart(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "data")
	env := map[string]string{"SLUICE_DATA_DIR": dir, "SLUICE_ADDR": "127.0.0.1:0"}
	getenv := func(k string) string { return env[k] }
	ctx := context.Background()

	g, err := Open(ctx, getenv)
	if err != nil {
		t.Fatal(err)
	}
	master := g.GeneratedMasterKey
	if !strings.HasPrefix(master, "sk-") {
		t.Fatalf("no master key generated: %q", master)
	}
	fi, err := os.Stat(filepath.Join(dir, masterKeyFile))
	if err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("master key file: %v, mode %v", err, fi.Mode())
	}
	url, out, stop := serve(t, g)
	if !strings.Contains(out.String(), master) {
		t.Errorf("first start does not show the master key: %q", out.String())
	}
	if code := get(t, url+"/health/readiness", ""); code != 200 {
		t.Errorf("readiness = %d", code)
	}
	team := post(t, url+"/team/new", master, `{"team_alias":"t"}`)["team_id"].(string)
	key := post(t, url+"/key/generate", master, `{"team_id":"`+team+`"}`)["key"].(string)
	if code := get(t, url+"/key/info", key); code != 200 {
		t.Errorf("key/info = %d", code)
	}
	stop()
	g.Close()

	g, err = Open(ctx, getenv)
	if err != nil {
		t.Fatal(err)
	}
	defer g.Close()
	if g.GeneratedMasterKey != "" {
		t.Error("a restart generated a new master key")
	}
	url, out, stop = serve(t, g)
	defer stop()
	if strings.Contains(out.String(), master) {
		t.Errorf("a restart shows the master key again: %q", out.String())
	}
	if !strings.Contains(out.String(), filepath.Join(dir, masterKeyFile)) {
		t.Errorf("a restart does not say where the key is kept: %q", out.String())
	}
	if code := get(t, url+"/key/info", key); code != 200 {
		t.Errorf("after restart key/info = %d", code)
	}
	if code := get(t, url+"/team/info?team_id="+team, master); code != 200 {
		t.Errorf("after restart team/info = %d", code)
	}
}

func TestMasterKeyFromEnvAndConfig(t *testing.T) {
	ctx := context.Background()
	cfgPath := filepath.Join(t.TempDir(), "sluice.yaml")
	os.WriteFile(cfgPath, []byte("general_settings:\n  master_key: os.environ/MY_MASTER\n"), 0o600)
	for _, tc := range []struct {
		env    map[string]string
		want   string
		source string
	}{
		{map[string]string{"SLUICE_MASTER_KEY": "sk-env", "SLUICE_CONFIG": cfgPath, "MY_MASTER": "sk-cfg"}, "sk-env", "SLUICE_MASTER_KEY"},
		{map[string]string{"SLUICE_CONFIG": cfgPath, "MY_MASTER": "sk-cfg"}, "sk-cfg", "config"},
	} {
		tc.env["SLUICE_DATA_DIR"] = t.TempDir()
		g, err := Open(ctx, func(k string) string { return tc.env[k] })
		if err != nil {
			t.Fatal(err)
		}
		if g.MasterKeySource != tc.source || g.GeneratedMasterKey != "" {
			t.Errorf("source = %q generated = %q", g.MasterKeySource, g.GeneratedMasterKey)
		}
		if _, err := g.Services.Auth.Authenticate(ctx, tc.want); err != nil {
			t.Errorf("master key %q refused: %v", tc.want, err)
		}
		g.Close()
	}
}

func TestOpenErrors(t *testing.T) {
	ctx := context.Background()
	bad := filepath.Join(t.TempDir(), "bad.yaml")
	os.WriteFile(bad, []byte("model_list:\n  - model_name: x\n"), 0o600)
	secretRef := filepath.Join(t.TempDir(), "secret.yaml")
	os.WriteFile(secretRef, []byte("general_settings:\n  master_key: secretsmanager/sluice-master\n"), 0o600)
	for name, env := range map[string]map[string]string{
		"bad setting":                   {"SLUICE_BACKEND": "mainframe"},
		"bad config":                    {"SLUICE_CONFIG": bad},
		"no config":                     {"SLUICE_CONFIG": filepath.Join(t.TempDir(), "missing.yaml")},
		"secret without a secret store": {"SLUICE_CONFIG": secretRef},
	} {
		env["SLUICE_DATA_DIR"] = t.TempDir()
		if g, err := Open(ctx, func(k string) string { return env[k] }); err == nil {
			g.Close()
			t.Errorf("%s: Open succeeded", name)
		}
	}
}

// TestOpenAWSWithoutTheBackend: SLUICE_BACKEND=aws in a binary that does not
// link the AWS backend (no WithAWS: the local process built without -tags
// aws) is refused with a message that says how to build one that does.
func TestOpenAWSWithoutTheBackend(t *testing.T) {
	env := map[string]string{"SLUICE_BACKEND": "aws", "SLUICE_DATA_DIR": t.TempDir()}
	for name, opts := range map[string][]Option{"no option": nil, "nil opener": {WithAWS(nil)}} {
		g, err := Open(t.Context(), func(k string) string { return env[k] }, opts...)
		if err == nil {
			g.Close()
			t.Fatalf("%s: Open succeeded", name)
		}
		if !errors.Is(err, errNoAWS) || !strings.Contains(err.Error(), "-tags aws") {
			t.Errorf("%s: err = %v, want errNoAWS naming -tags aws", name, err)
		}
	}
}
