package gateway

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"regexp"
	"strings"
	"testing"

	"github.com/sluice-gateway/sluice/pkg/config"
	"github.com/sluice-gateway/sluice/pkg/server"
)

// examplePath is the example config at the repository root, which make run
// uses when there is no other.
const examplePath = "../../sluice.example.yaml"

// TestExampleConfigAnswersChatWithNoKey is the README's first session: the
// example config loads on a machine with no provider key, without a
// warning, and its mock model answers chat completions, streamed and not.
func TestExampleConfigAnswersChatWithNoKey(t *testing.T) {
	env := map[string]string{"SLUICE_CONFIG": examplePath, "SLUICE_DATA_DIR": t.TempDir(), "SLUICE_MASTER_KEY": "sk-example-master"}
	g, err := Open(context.Background(), func(k string) string { return env[k] })
	if err != nil {
		t.Fatal(err)
	}
	defer g.Close()
	if len(g.Config.Warnings) > 0 {
		t.Errorf("the example config warns: %q", g.Config.Warnings)
	}
	h, err := server.Handler(g.Services, server.Options{})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(h)
	defer srv.Close()
	post := func(path, key, body string) (int, []byte) {
		req, _ := http.NewRequest("POST", srv.URL+path, strings.NewReader(body))
		req.Header.Set("Authorization", "Bearer "+key)
		resp, err := srv.Client().Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, b
	}
	var team, key struct {
		TeamID string `json:"team_id"`
		Key    string `json:"key"`
	}
	_, b := post("/team/new", "sk-example-master", `{"team_alias":"first"}`)
	json.Unmarshal(b, &team)
	_, b = post("/key/generate", "sk-example-master", `{"team_id":"`+team.TeamID+`"}`)
	json.Unmarshal(b, &key)

	status, b := post("/v1/chat/completions", key.Key, `{"model":"mock-gpt","messages":[{"role":"user","content":"Hello?"}]}`)
	var answer struct {
		Choices []struct {
			Message struct{ Content string } `json:"message"`
		} `json:"choices"`
	}
	if err := json.Unmarshal(b, &answer); status != 200 || err != nil || !strings.HasPrefix(answer.Choices[0].Message.Content, "Hello from sluice!") {
		t.Fatalf("chat: %d %s", status, b)
	}
	status, b = post("/v1/chat/completions", key.Key, `{"model":"mock-gpt","messages":[{"role":"user","content":"Hello?"}],"stream":true}`)
	if status != 200 || !bytes.HasSuffix(b, []byte("data: [DONE]\n\n")) || bytes.Count(b, []byte("chat.completion.chunk")) < 4 {
		t.Fatalf("streamed chat: %d %s", status, b)
	}
}

// commentedYAML matches a commented-out config line of the example: "# "
// then a list item or a key (lowercase, as config keys are).
var commentedYAML = regexp.MustCompile(`^(\s*)# ((?:- |\s*)[a-z_]+:(?: .*)?)$`)

// TestExampleConfigCommentedDeploymentsAreValid: uncommented, the example's
// real deployments make a valid config of providers sluice serves.
func TestExampleConfigCommentedDeploymentsAreValid(t *testing.T) {
	raw, err := os.ReadFile(examplePath)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	uncommented := 0
	for _, line := range strings.Split(string(raw), "\n") {
		if m := commentedYAML.FindStringSubmatch(line); m != nil {
			line = m[1] + m[2]
			uncommented++
		}
		out = append(out, line)
	}
	cfg, err := config.Parse([]byte(strings.Join(out, "\n")), func(string) string { return "set" })
	if err != nil {
		t.Fatalf("uncommented, the example does not parse: %v\n%s", err, strings.Join(out, "\n"))
	}
	providers := map[string]bool{}
	for _, d := range cfg.ModelList {
		providers[d.Params.Provider()] = true
	}
	for _, p := range []string{"openai", "hosted_vllm", "azure", "anthropic", "bedrock", "gemini", "vertex_ai"} {
		if !providers[p] {
			t.Errorf("the example shows no %s deployment", p)
		}
	}
	if !cfg.ModelList[0].Params.Drops() || len(cfg.RouterSettings.Fallbacks) != 1 || len(cfg.Warnings) > 0 {
		t.Errorf("drop_params %v, fallbacks %v, warnings %q", cfg.ModelList[0].Params.Drops(), cfg.RouterSettings.Fallbacks, cfg.Warnings)
	}
}
