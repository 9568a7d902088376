package anthropic

import (
	"context"
	"errors"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/sluice-gateway/sluice/pkg/api"
	"github.com/sluice-gateway/sluice/pkg/config"
	"github.com/sluice-gateway/sluice/pkg/models"
	"github.com/sluice-gateway/sluice/pkg/oai"
	"github.com/sluice-gateway/sluice/pkg/providers/providertest"
)

func open(t *testing.T, params config.Params, getenv func(string) string) (models.Endpoint, error) {
	t.Helper()
	return New(http.DefaultClient).Open(context.Background(), config.Deployment{ModelName: "claude", Params: params}, models.Resolver{Getenv: getenv})
}

func chatRequest(t *testing.T, body string) *oai.ChatRequest {
	t.Helper()
	req, err := oai.ParseChatRequest([]byte(body))
	if err != nil {
		t.Fatal(err)
	}
	return req
}

func TestChatCallsMessages(t *testing.T) {
	up := providertest.NewUpstream(t, func(w http.ResponseWriter, r *http.Request) {
		if strings.Contains(r.Header.Get("Accept"), "text/event-stream") {
			providertest.WriteSSE(w, thinkingStream...)
			return
		}
		providertest.WriteJSON(w, 200, textAnswer)
	})
	for _, base := range []string{up.URL, up.URL + "/v1/messages/"} {
		ep, err := open(t, config.Params{Model: "anthropic/claude-sonnet-4-5", APIKey: "sk-ant-test", APIBase: base}, nil)
		if err != nil {
			t.Fatal(err)
		}
		if ep.APIBase() != strings.TrimSuffix(base, "/") {
			t.Errorf("APIBase %s", ep.APIBase())
		}
		ans, err := ep.(models.Chatter).Chat(context.Background(), chatRequest(t, `{"model":"claude","messages":[{"role":"user","content":"Hello"}],"max_tokens":64}`))
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(ans.Body)
		ans.Body.Close()
		if !strings.Contains(string(b), `"content":"Hello! How can I help?"`) {
			t.Errorf("answer %s", b)
		}
		providertest.AssertRequest(t, up.Last(t), providertest.Want{
			Method: "POST", Path: "/v1/messages",
			Header: map[string]string{"X-Api-Key": "sk-ant-test", "Anthropic-Version": "2023-06-01", "Content-Type": "application/json", "Authorization": ""},
			Body:   `{"model":"claude-sonnet-4-5","max_tokens":64,"messages":[{"role":"user","content":[{"type":"text","text":"Hello"}]}]}`,
		})
	}

	ep, err := open(t, config.Params{Model: "anthropic/claude-sonnet-4-5"}, func(k string) string { return map[string]string{KeyEnv: "sk-env", BaseEnv: up.URL}[k] })
	if err != nil {
		t.Fatal(err)
	}
	ans, err := ep.(models.Chatter).Chat(context.Background(), chatRequest(t, `{"model":"claude","messages":[{"role":"user","content":"Hello"}],"stream":true}`))
	if err != nil {
		t.Fatal(err)
	}
	reads, err := providertest.Reads(ans.Body)
	if err != nil || ans.ContentLength != -1 || !strings.HasSuffix(reads[len(reads)-1], "data: [DONE]\n\n") {
		t.Errorf("stream %v %d: %q", err, ans.ContentLength, reads)
	}
	providertest.AssertRequest(t, up.Last(t), providertest.Want{
		Header: map[string]string{"X-Api-Key": "sk-env", "Accept": "text/event-stream"},
		Body:   `{"model":"claude-sonnet-4-5","max_tokens":8192,"messages":[{"role":"user","content":[{"type":"text","text":"Hello"}]}],"stream":true}`,
	})
}

func TestChatProviderErrors(t *testing.T) {
	up := providertest.NewUpstream(t, func(w http.ResponseWriter, r *http.Request) {
		switch {
		case strings.Contains(r.Header.Get("X-Api-Key"), "bad"):
			providertest.WriteJSON(w, 401, `{"type":"error","error":{"type":"authentication_error","message":"invalid x-api-key"},"request_id":"req_011"}`)
		case strings.Contains(r.Header.Get("X-Api-Key"), "busy"):
			w.Header().Set("Retry-After", "3")
			providertest.WriteJSON(w, 529, `{"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}`)
		case strings.Contains(r.Header.Get("X-Api-Key"), "html"):
			w.Header().Set("Content-Type", "text/html")
			io.WriteString(w, "<html>proxy</html>")
		default:
			providertest.WriteJSON(w, 400, `{"type":"error","error":{"type":"invalid_request_error","message":"messages.0.content: text content blocks must be non-empty"}}`)
		}
	})
	for _, tc := range []struct {
		key    string
		stream bool
		status int
		typ    string
		msg    string
	}{
		{"sk-bad", false, 401, "authentication_error", "invalid x-api-key"},
		{"sk-busy", true, 529, "overloaded_error", "Overloaded"},
		{"sk-other", false, 400, "invalid_request_error", "must be non-empty"},
		{"sk-html", false, 200, "", "not JSON"},
		{"sk-html", true, 200, "", "not an event stream"},
	} {
		ep, err := open(t, config.Params{Model: "anthropic/claude-sonnet-4-5", APIKey: tc.key, APIBase: up.URL}, nil)
		if err != nil {
			t.Fatal(err)
		}
		body := `{"model":"claude","messages":[{"role":"user","content":"x"}]}`
		if tc.stream {
			body = `{"model":"claude","messages":[{"role":"user","content":"x"}],"stream":true}`
		}
		_, err = ep.(models.Chatter).Chat(context.Background(), chatRequest(t, body))
		var pe *models.ProviderError
		if !errors.As(err, &pe) || pe.Status != tc.status || pe.Type != tc.typ || !strings.Contains(pe.Message, tc.msg) || pe.Provider != Name {
			t.Errorf("%s: %#v", tc.key, err)
		}
		if tc.status == 529 && pe.RetryAfter == 0 {
			t.Errorf("%s: no Retry-After", tc.key)
		}
	}
}

func TestChatRefusesBeforeCalling(t *testing.T) {
	up := providertest.NewUpstream(t, func(w http.ResponseWriter, r *http.Request) { providertest.WriteJSON(w, 200, textAnswer) })
	ep, err := open(t, config.Params{Model: "anthropic/claude-sonnet-4-5", APIKey: "k", APIBase: up.URL}, nil)
	if err != nil {
		t.Fatal(err)
	}
	_, err = ep.(models.Chatter).Chat(context.Background(), chatRequest(t, `{"model":"claude","messages":[{"role":"user","content":"x"}],"presence_penalty":1}`))
	var ae *api.Error
	if !errors.As(err, &ae) || ae.Param != "presence_penalty" || up.Count() != 0 {
		t.Errorf("%v; %d calls", err, up.Count())
	}
}

func TestOpenRefuses(t *testing.T) {
	for _, tc := range []struct {
		params config.Params
		msg    string
	}{
		{config.Params{Model: "anthropic/claude-sonnet-4-5"}, "ANTHROPIC_API_KEY"},
		{config.Params{Model: "anthropic/claude-sonnet-4-5", APIKey: "sk-secret", APIBase: "ftp://x"}, "api_base"},
		{config.Params{Model: "anthropic/", APIKey: "k"}, "names no Anthropic model"},
	} {
		_, err := open(t, tc.params, nil)
		var ae *api.Error
		if !errors.As(err, &ae) || ae.Status != 503 || !strings.Contains(ae.Message, tc.msg) || strings.Contains(ae.Message, "sk-secret") {
			t.Errorf("%+v: %v", tc.params, err)
		}
	}
}

// A native call's headers are shared by the calls that ask for the default
// version and no beta: a call with its own version and beta gets them, and
// the calls after it do not.
func TestMessagesHeaders(t *testing.T) {
	up := providertest.NewUpstream(t, func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Accept") == "text/event-stream" {
			providertest.WriteSSE(w, thinkingStream...)
			return
		}
		providertest.WriteJSON(w, 200, textAnswer)
	})
	ep, err := open(t, config.Params{Model: "anthropic/claude-sonnet-4-5", APIKey: "sk-ant-test", APIBase: up.URL}, nil)
	if err != nil {
		t.Fatal(err)
	}
	body := []byte(`{"model":"claude-sonnet-4-5","max_tokens":64,"messages":[{"role":"user","content":"Hello"}]}`)
	for _, c := range []struct {
		version, beta, wantVersion string
		stream                     bool
	}{
		{"", "", APIVersion, false},
		{"2024-01-01", "context-management-2025-06-27", "2024-01-01", false},
		{APIVersion, "", APIVersion, false},
		{"", "prompt-caching-2024-07-31", APIVersion, true},
		{"", "", APIVersion, true},
	} {
		req := &models.MessagesRequest{Model: "claude-sonnet-4-5", Body: body, AsIs: true, Stream: c.stream, Version: c.version, Beta: c.beta}
		ans, _, err := ep.(models.Messenger).Messages(context.Background(), req)
		if err != nil {
			t.Fatal(err)
		}
		io.Copy(io.Discard, ans.Body)
		ans.Body.Close()
		accept := "application/json"
		if c.stream {
			accept = "text/event-stream"
		}
		providertest.AssertRequest(t, up.Last(t), providertest.Want{
			Method: "POST", Path: "/v1/messages",
			Header: map[string]string{"X-Api-Key": "sk-ant-test", "Anthropic-Version": c.wantVersion, "Anthropic-Beta": c.beta, "Accept": accept, "Content-Type": "application/json"},
			Body:   string(body),
		})
	}
}
