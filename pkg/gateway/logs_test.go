package gateway

import (
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/sluice-gateway/sluice/pkg/logging"
	"github.com/sluice-gateway/sluice/pkg/logging/logtest"
)

// TestEveryLogLineHasUniqueMemberNames runs the local process through
// refusals, failures, a cut stream, a stalled body and a shutdown, with JSON
// logs, and checks every line it wrote: one JSON object whose member names
// never repeat (jq and CloudWatch keep only one of two).
func TestEveryLogLineHasUniqueMemberNames(t *testing.T) {
	logs := &syncBuffer{}
	prev := slog.Default()
	t.Cleanup(func() { slog.SetDefault(prev) })
	slog.SetDefault(logging.New(logs, "json", "debug"))

	cut := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		w.Write([]byte("data: {}\n\n"))
		w.(http.Flusher).Flush()
		if conn, _, err := http.NewResponseController(w).Hijack(); err == nil {
			conn.Close()
		}
	}))
	t.Cleanup(cut.Close)
	ln, _ := net.Listen("tcp", "127.0.0.1:0")
	unreachable := "http://" + ln.Addr().String()
	ln.Close()
	cfg := filepath.Join(t.TempDir(), "sluice.yaml")
	os.WriteFile(cfg, []byte("passthrough:\n"+
		"  anthropic: {api_base: "+cut.URL+", api_key: sk-ant-provider}\n"+
		"  gemini: {api_base: "+unreachable+", api_key: gemini-key}\n"+
		"litellm_settings: {drop_params: true}\n"), 0o600)

	env := map[string]string{"SLUICE_DATA_DIR": t.TempDir(), "SLUICE_ADDR": "127.0.0.1:0", "SLUICE_MASTER_KEY": "sk-master",
		"SLUICE_CONFIG": cfg, "SLUICE_BODY_IDLE_TIMEOUT": "200ms"}
	g, err := Open(t.Context(), func(k string) string { return env[k] })
	if err != nil {
		t.Fatal(err)
	}
	defer g.Close()
	url, _, stop := serve(t, g)
	team := post(t, url+"/team/new", "sk-master", `{"team_alias":"t"}`)["team_id"].(string)
	key := post(t, url+"/key/generate", "sk-master", `{"team_id":"`+team+`"}`)["key"].(string)

	do := func(method, path, key, body string) {
		req, _ := http.NewRequest(method, url+path, strings.NewReader(body))
		if key != "" {
			req.Header.Set("Authorization", "Bearer "+key)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatalf("%s %s: %v", method, path, err)
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
	}
	do("GET", "/v1/models", "", "")                                  // 401, no key
	do("GET", "/v1/models", "sk-wrong", "")                          // 401, unknown key
	do("PUT", "/v1/files", "sk-master", "")                          // 405
	do("GET", "/v1/files/a/../b", key, "")                           // 400, unclean path
	do("GET", "/nowhere", key, "")                                   // 404
	do("POST", "/team/new", key, `{}`)                               // 403
	do("POST", "/team/new", "sk-master", `{"team_alias":5}`)         // 400
	do("POST", "/gemini/v1beta/models/m:generateContent", key, "{}") // 502, logged as an error
	do("POST", "/anthropic/v1/messages", key, `{"stream":true}`)     // cut after it began
	x := dialRaw(t, strings.TrimPrefix(url, "http://"), "POST /team/new HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer sk-master\r\nContent-Length: 50\r\n\r\n{")
	x.answer() // 408
	stop()

	out := []byte(logs.String())
	if err := logtest.CheckJSONLines(out); err != nil {
		t.Error(err)
	}
	for _, want := range []string{`"message":"request refused"`, `"message":"authentication failed"`, `"message":"request failed"`,
		`"message":"request failed after the response began"`, `"status":408`, `"status":405`} {
		if !strings.Contains(string(out), want) {
			t.Errorf("the run logged no %s:\n%s", want, out)
		}
	}
}
