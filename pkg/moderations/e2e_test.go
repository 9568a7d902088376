package moderations_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"

	"github.com/sluice-gateway/sluice/pkg/gateway/gatewaytest"
)

// result is one omni-moderation results[] entry (OpenAI's real shape).
const result = `{"flagged":true,"categories":{"harassment":false,"harassment/threatening":false,"hate":false,"hate/threatening":false,"illicit":false,"illicit/violent":false,"self-harm":false,"self-harm/instructions":false,"self-harm/intent":false,"sexual":false,"sexual/minors":false,"violence":true,"violence/graphic":false},` +
	`"category_scores":{"harassment":0.0012,"harassment/threatening":0.0009,"hate":0.00001,"hate/threatening":0.000002,"illicit":0.00004,"illicit/violent":0.00002,"self-harm":0.0000045,"self-harm/instructions":0.0000002,"self-harm/intent":0.0000003,"sexual":0.000012,"sexual/minors":0.0000005,"violence":0.8923,"violence/graphic":0.0021},` +
	`"category_applied_input_types":{"harassment":["text"],"harassment/threatening":["text"],"hate":["text"],"hate/threatening":["text"],"illicit":["text"],"illicit/violent":["text"],"self-harm":["text","image"],"self-harm/instructions":["text","image"],"self-harm/intent":["text","image"],"sexual":["text","image"],"sexual/minors":["text"],"violence":["text","image"],"violence/graphic":["text","image"]}}`

type upstream struct {
	*httptest.Server
	mu   sync.Mutex
	body map[string]any
	auth string
	path string
	sent string
}

func newUpstream(t *testing.T) *upstream {
	u := &upstream{}
	u.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		raw, _ := io.ReadAll(r.Body)
		var body map[string]any
		json.Unmarshal(raw, &body)
		n := 1
		if in, ok := body["input"].([]any); ok {
			if _, parts := in[0].(map[string]any); !parts {
				n = len(in)
			}
		}
		answer := fmt.Sprintf(`{"id":"modr-5558","model":%q,"results":[%s]}`, body["model"], strings.TrimSuffix(strings.Repeat(result+",", n), ","))
		u.mu.Lock()
		u.body, u.auth, u.path, u.sent = body, r.Header.Get("Authorization"), r.URL.Path, answer
		u.mu.Unlock()
		if r.Header.Get("Authorization") != "Bearer sk-mod" {
			w.WriteHeader(401)
			io.WriteString(w, `{"error":{"message":"Incorrect API key provided.","type":"invalid_request_error","param":null,"code":"invalid_api_key"}}`)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		io.WriteString(w, answer)
	}))
	t.Cleanup(u.Close)
	return u
}

func TestModerationsEndToEnd(t *testing.T) {
	u := newUpstream(t)
	cfg := fmt.Sprintf(`model_list:
  - model_name: omni-moderation-latest
    litellm_params: {model: openai/omni-moderation-latest, api_base: %[1]s/v1, api_key: sk-mod}
  - model_name: text-moderation-stable
    litellm_params: {model: openai/text-moderation-007, api_base: %[1]s/v1, api_key: sk-mod}
  - model_name: emb
    litellm_params: {model: azure/emb, api_base: %[1]s, api_key: k}
`, u.URL)
	gatewaytest.Run(t, gatewaytest.Options{Config: cfg}, func(t *testing.T, g *gatewaytest.Gateway) {
		ctx := context.Background()
		_, key := g.TeamKey()
		c := openai.NewClient(option.WithBaseURL(g.URL+"/v1/"), option.WithAPIKey(key), option.WithHTTPClient(g.Client), option.WithMaxRetries(0))

		t.Run("sdk default model", func(t *testing.T) {
			resp, err := c.Moderations.New(ctx, openai.ModerationNewParams{Input: openai.ModerationNewParamsInputUnion{OfString: openai.String("I will hurt you")}})
			if err != nil {
				t.Fatal(err)
			}
			if resp.ID != "modr-5558" || resp.Model != "omni-moderation-latest" || len(resp.Results) != 1 || !resp.Results[0].Flagged ||
				!resp.Results[0].Categories.Violence || resp.Results[0].CategoryScores.Violence != 0.8923 ||
				len(resp.Results[0].CategoryAppliedInputTypes.Violence) != 2 {
				t.Errorf("%+v", resp)
			}
			u.mu.Lock()
			defer u.mu.Unlock()
			if u.path != "/v1/moderations" || u.auth != "Bearer sk-mod" || u.body["model"] != "omni-moderation-latest" {
				t.Errorf("upstream received %s %s %v", u.path, u.auth, u.body)
			}
		})
		t.Run("sdk named model and strings", func(t *testing.T) {
			resp, err := c.Moderations.New(ctx, openai.ModerationNewParams{
				Model: "text-moderation-stable",
				Input: openai.ModerationNewParamsInputUnion{OfStringArray: []string{"a", "b"}},
			})
			if err != nil {
				t.Fatal(err)
			}
			if len(resp.Results) != 2 || resp.Model != "text-moderation-007" {
				t.Errorf("%+v", resp)
			}
		})
		t.Run("sdk multimodal", func(t *testing.T) {
			resp, err := c.Moderations.New(ctx, openai.ModerationNewParams{
				Input: openai.ModerationNewParamsInputUnion{OfModerationMultiModalArray: []openai.ModerationMultiModalInputUnionParam{
					{OfText: &openai.ModerationTextInputParam{Text: "look"}},
					{OfImageURL: &openai.ModerationImageURLInputParam{ImageURL: openai.ModerationImageURLInputImageURLParam{URL: "https://example.com/a.png"}}},
				}},
			})
			if err != nil {
				t.Fatal(err)
			}
			if len(resp.Results) != 1 {
				t.Errorf("%+v", resp)
			}
		})
		t.Run("exact answer on both paths", func(t *testing.T) {
			for _, path := range []string{"/moderations", "/v1/moderations"} {
				resp := g.Do("POST", path, key, `{"input":"hello"}`)
				u.mu.Lock()
				sent := u.sent
				u.mu.Unlock()
				if resp.Status != 200 || string(resp.Body) != sent || resp.Header.Get("X-Sluice-Overhead-Ms") == "" {
					t.Errorf("%s: %d %s", path, resp.Status, resp.Body)
				}
			}
		})
		for _, tc := range []struct {
			name, body string
			status     int
			code, msg  string
		}{
			{"missing input", `{"model":"omni-moderation-latest"}`, 400, "missing_required_parameter", "'input'"},
			{"bad part", `{"input":[{"type":"video"}]}`, 400, "invalid_value", "'text' or 'image_url'"},
			{"unknown model", `{"model":"text-moderation-latest","input":"x"}`, 404, "model_not_found", "text-moderation-latest"},
			{"model without moderations", `{"model":"emb","input":"x"}`, 400, "invalid_value", "does not support moderations"},
		} {
			t.Run(tc.name, func(t *testing.T) {
				resp := g.Do("POST", "/v1/moderations", key, tc.body)
				if resp.Status != tc.status || resp.ErrorCode(t) != tc.code || !strings.Contains(string(resp.Body), tc.msg) {
					t.Errorf("%d %s", resp.Status, resp.Body)
				}
			})
		}
	})

	t.Run("no moderation model configured", func(t *testing.T) {
		g := gatewaytest.Start(t, gatewaytest.Backends()[0], gatewaytest.Options{})
		_, key := g.TeamKey()
		resp := g.Do("POST", "/v1/moderations", key, `{"input":"x"}`)
		if resp.Status != 400 || resp.ErrorCode(t) != "invalid_value" || !strings.Contains(string(resp.Body), "No moderation model is configured") {
			t.Errorf("%d %s", resp.Status, resp.Body)
		}
	})
}
