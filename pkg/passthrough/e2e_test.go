package passthrough_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"cloud.google.com/go/auth"
	"github.com/anthropics/anthropic-sdk-go"
	"github.com/anthropics/anthropic-sdk-go/option"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/aws/protocol/eventstream"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/bedrockruntime"
	brtypes "github.com/aws/aws-sdk-go-v2/service/bedrockruntime/types"
	"github.com/aws/smithy-go/auth/bearer"
	"github.com/aws/smithy-go/middleware"
	smithyhttp "github.com/aws/smithy-go/transport/http"
	"google.golang.org/genai"

	"github.com/sluice-gateway/sluice/pkg/gateway/gatewaytest"
	"github.com/sluice-gateway/sluice/pkg/providers/bedrock/bedrocktest"
	"github.com/sluice-gateway/sluice/pkg/providers/google/googletest"
	"github.com/sluice-gateway/sluice/pkg/store/storetest"
)

// Provider credentials sluice holds, and the client-side credentials of the
// SDKs' own that must never travel upstream.
const (
	anthropicKey   = "sk-ant-provider-key"
	geminiKey      = "gemini-provider-key"
	sluiceAKID     = "AKIDSLUICEGATEWAY"
	sluiceSecret   = "sluice-aws-secret"
	clientAKID     = "AKIDCLIENTSDK"
	clientSecret   = "client-aws-secret"
	clientSession  = "client-aws-session-token"
	clientGoogle   = "ya29.client-own-oauth-token"
	vertexProject  = "proj-e2e"
	vertexLocation = "us-east5"
)

// upstream is a provider stand-in: it asserts, on every request, that the
// provider credential arrived and that no forbidden value (the sluice keys,
// the client's own credentials) did, anywhere in the request line or headers.
type upstream struct {
	t      *testing.T
	srv    *httptest.Server
	name   string
	verify func(r *http.Request, body []byte) error
	handle func(w http.ResponseWriter, r *http.Request, body []byte)

	mu        sync.Mutex
	forbidden []string
	last      *http.Request
	lastBody  []byte
	hits      atomic.Int64
}

func newUpstream(t *testing.T, name string, verify func(*http.Request, []byte) error, handle func(http.ResponseWriter, *http.Request, []byte)) *upstream {
	u := &upstream{t: t, name: name, verify: verify, handle: handle,
		forbidden: []string{clientAKID, clientSecret, clientSession, clientGoogle}}
	u.srv = httptest.NewServer(http.HandlerFunc(u.serve))
	t.Cleanup(u.srv.Close)
	return u
}

// forbid adds values (sluice keys) that must never reach the upstream.
func (u *upstream) forbid(values ...string) {
	u.mu.Lock()
	u.forbidden = append(u.forbidden, values...)
	u.mu.Unlock()
}

func (u *upstream) serve(w http.ResponseWriter, r *http.Request) {
	u.hits.Add(1)
	body, err := io.ReadAll(r.Body)
	if err != nil {
		u.t.Errorf("%s upstream: read body: %v", u.name, err)
	}
	u.mu.Lock()
	forbidden := append([]string(nil), u.forbidden...)
	u.last, u.lastBody = r.Clone(context.Background()), body
	u.mu.Unlock()
	for _, f := range forbidden {
		if strings.Contains(r.RequestURI, f) {
			u.t.Errorf("%s upstream: the request line carried a client credential: %s", u.name, r.RequestURI)
		}
		for k, vs := range r.Header {
			for _, v := range vs {
				if strings.Contains(v, f) {
					u.t.Errorf("%s upstream: header %s carried a client credential (%.12s...)", u.name, k, f)
				}
			}
		}
	}
	if q, _ := url.ParseQuery(r.URL.RawQuery); q.Has("key") {
		u.t.Errorf("%s upstream: a key query parameter arrived: %s", u.name, r.URL.RawQuery)
	}
	if err := u.verify(r, body); err != nil {
		u.t.Errorf("%s upstream: %s %s: credential: %v", u.name, r.Method, r.URL.Path, err)
		http.Error(w, `{"error":"bad credential"}`, http.StatusUnauthorized)
		return
	}
	u.handle(w, r, body)
}

func (u *upstream) lastRequest() (*http.Request, []byte) {
	u.mu.Lock()
	defer u.mu.Unlock()
	return u.last, u.lastBody
}

func headerIs(r *http.Request, name, want string) error {
	if got := r.Header.Values(name); len(got) != 1 || got[0] != want {
		return fmt.Errorf("%s = %q, want the provider credential", name, got)
	}
	return nil
}

// echo answers the methods table: what arrived, as JSON.
func echo(w http.ResponseWriter, r *http.Request, body []byte) {
	w.Header().Set("Content-Type", "application/json")
	json.NewEncoder(w).Encode(map[string]string{"method": r.Method, "uri": r.URL.RequestURI(), "body": string(body)})
}

func anthropicUpstream(t *testing.T) *upstream {
	verify := func(r *http.Request, _ []byte) error {
		if r.Header.Get("Authorization") != "" {
			return fmt.Errorf("an Authorization header arrived")
		}
		return headerIs(r, "X-Api-Key", anthropicKey)
	}
	return newUpstream(t, "anthropic", verify, func(w http.ResponseWriter, r *http.Request, body []byte) {
		var req struct {
			Model  string `json:"model"`
			Stream bool   `json:"stream"`
		}
		json.Unmarshal(body, &req)
		if r.URL.Path != "/v1/messages" && r.URL.Path != "/v1/messages/count_tokens" {
			echo(w, r, body)
			return
		}
		if r.Header.Get("Anthropic-Version") == "" {
			t.Errorf("anthropic upstream: anthropic-version did not arrive")
		}
		switch {
		case r.URL.Path == "/v1/messages/count_tokens":
			w.Header().Set("Content-Type", "application/json")
			w.Write([]byte(`{"input_tokens":42}`))
		case req.Stream:
			w.Header().Set("Content-Type", "text/event-stream; charset=utf-8")
			for _, ev := range []string{
				`event: message_start` + "\n" + `data: {"type":"message_start","message":{"id":"msg_s","type":"message","role":"assistant","model":"` + req.Model + `","content":[],"stop_reason":null,"stop_sequence":null,"usage":{"input_tokens":21,"output_tokens":1}}}`,
				`event: content_block_start` + "\n" + `data: {"type":"content_block_start","index":0,"content_block":{"type":"text","text":""}}`,
				`event: ping` + "\n" + `data: {"type":"ping"}`,
				`event: content_block_delta` + "\n" + `data: {"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"Hello"}}`,
				`event: content_block_delta` + "\n" + `data: {"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":" there"}}`,
				`event: content_block_stop` + "\n" + `data: {"type":"content_block_stop","index":0}`,
				`event: message_delta` + "\n" + `data: {"type":"message_delta","delta":{"stop_reason":"end_turn","stop_sequence":null},"usage":{"output_tokens":9}}`,
				`event: message_stop` + "\n" + `data: {"type":"message_stop"}`,
			} {
				w.Write([]byte(ev + "\n\n"))
				w.(http.Flusher).Flush()
			}
		default:
			w.Header().Set("Content-Type", "application/json")
			w.Write([]byte(`{"id":"msg_1","type":"message","role":"assistant","model":"` + req.Model + `","content":[{"type":"text","text":"Hi from anthropic"}],"stop_reason":"end_turn","stop_sequence":null,"usage":{"input_tokens":12,"output_tokens":6}}`))
		}
	})
}

const geminiAnswer = `{"candidates":[{"content":{"parts":[{"text":"Hi from gemini"}],"role":"model"},"finishReason":"STOP","index":0}],"usageMetadata":{"promptTokenCount":3,"candidatesTokenCount":4,"totalTokenCount":7},"modelVersion":"gemini-2.5-flash"}`

// googleAnswers serves generateContent and streamGenerateContent (SSE) the
// way the Gemini API and Vertex AI do.
func googleAnswers(w http.ResponseWriter, r *http.Request, body []byte) {
	switch {
	case strings.HasSuffix(r.URL.Path, ":generateContent"):
		w.Header().Set("Content-Type", "application/json; charset=UTF-8")
		w.Write([]byte(geminiAnswer))
	case strings.HasSuffix(r.URL.Path, ":streamGenerateContent"):
		if r.URL.Query().Get("alt") != "sse" {
			http.Error(w, "want alt=sse", 400)
			return
		}
		w.Header().Set("Content-Type", "text/event-stream")
		for i, text := range []string{"Hi", " from", " a stream"} {
			usage := fmt.Sprintf(`{"promptTokenCount":3,"candidatesTokenCount":%d,"totalTokenCount":%d}`, i+1, i+4)
			fmt.Fprintf(w, "data: {\"candidates\":[{\"content\":{\"parts\":[{\"text\":%q}],\"role\":\"model\"},\"index\":0}],\"usageMetadata\":%s,\"modelVersion\":\"gemini-2.5-flash\"}\r\n\r\n", text, usage)
			w.(http.Flusher).Flush()
		}
	default:
		echo(w, r, body)
	}
}

func geminiUpstream(t *testing.T) *upstream {
	return newUpstream(t, "gemini", func(r *http.Request, _ []byte) error {
		if r.Header.Get("Authorization") != "" {
			return fmt.Errorf("an Authorization header arrived")
		}
		return headerIs(r, "X-Goog-Api-Key", geminiKey)
	}, googleAnswers)
}

func vertexUpstream(t *testing.T, tokens *googletest.TokenServer) *upstream {
	return newUpstream(t, "vertex", func(r *http.Request, _ []byte) error {
		if r.Header.Get("X-Goog-Api-Key") != "" {
			return fmt.Errorf("an x-goog-api-key arrived")
		}
		tok, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
		if !ok || !tokens.Valid(tok) {
			return fmt.Errorf("Authorization %q is not a token minted for the service account", r.Header.Get("Authorization"))
		}
		return nil
	}, googleAnswers)
}

func eventFrame(t testing.TB, eventType, payload string) []byte {
	var buf bytes.Buffer
	err := eventstream.NewEncoder().Encode(&buf, eventstream.Message{
		Headers: eventstream.Headers{
			{Name: ":event-type", Value: eventstream.StringValue(eventType)},
			{Name: ":content-type", Value: eventstream.StringValue("application/json")},
			{Name: ":message-type", Value: eventstream.StringValue("event")},
		},
		Payload: []byte(payload),
	})
	if err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

func bedrockUpstream(t *testing.T) *upstream {
	secret := func(id string) (string, string, bool) { return sluiceSecret, "", id == sluiceAKID }
	verify := func(r *http.Request, body []byte) error {
		sig, err := bedrocktest.Verify(r, body, secret)
		if err != nil {
			return err
		}
		if sig.Service != "bedrock" || sig.Region != "us-west-2" {
			return fmt.Errorf("signed for %s in %s", sig.Service, sig.Region)
		}
		return nil
	}
	return newUpstream(t, "bedrock", verify, func(w http.ResponseWriter, r *http.Request, body []byte) {
		path := r.URL.EscapedPath()
		switch {
		case strings.HasSuffix(path, "/converse"):
			w.Header().Set("Content-Type", "application/json")
			w.Write([]byte(`{"output":{"message":{"role":"assistant","content":[{"text":"Hi from bedrock"}]}},"stopReason":"end_turn","usage":{"inputTokens":10,"outputTokens":5,"totalTokens":15},"metrics":{"latencyMs":12}}`))
		case strings.HasSuffix(path, "/converse-stream"):
			w.Header().Set("Content-Type", "application/vnd.amazon.eventstream")
			for _, f := range [][2]string{
				{"messageStart", `{"role":"assistant"}`},
				{"contentBlockDelta", `{"contentBlockIndex":0,"delta":{"text":"Hi"}}`},
				{"contentBlockDelta", `{"contentBlockIndex":0,"delta":{"text":" streamed"}}`},
				{"contentBlockStop", `{"contentBlockIndex":0}`},
				{"messageStop", `{"stopReason":"end_turn"}`},
				{"metadata", `{"usage":{"inputTokens":11,"outputTokens":2,"totalTokens":13},"metrics":{"latencyMs":40}}`},
			} {
				w.Write(eventFrame(t, f[0], f[1]))
				w.(http.Flusher).Flush()
			}
		case strings.HasSuffix(path, "/invoke"):
			w.Header().Set("Content-Type", "application/json")
			w.Header().Set("X-Amzn-Bedrock-Input-Token-Count", "8")
			w.Header().Set("X-Amzn-Bedrock-Output-Token-Count", "3")
			w.Write([]byte(`{"id":"msg_b","type":"message","role":"assistant","content":[{"type":"text","text":"invoked"}],"usage":{"input_tokens":8,"output_tokens":3}}`))
		default:
			echo(w, r, body)
		}
	})
}

// world is the four upstreams and a config pointing sluice at them.
type world struct {
	anthropic, gemini, vertex, bedrock *upstream
	tokens                             *googletest.TokenServer
	opts                               gatewaytest.Options
}

func newWorld(t *testing.T) *world {
	w := &world{tokens: googletest.NewTokenServer(t)}
	w.anthropic, w.gemini, w.bedrock = anthropicUpstream(t), geminiUpstream(t), bedrockUpstream(t)
	w.vertex = vertexUpstream(t, w.tokens)
	w.opts = gatewaytest.Options{
		Config: "passthrough:\n" +
			"  anthropic: {api_base: " + w.anthropic.srv.URL + ", api_key: os.environ/TEST_ANTHROPIC_KEY}\n" +
			"  gemini: {api_base: " + w.gemini.srv.URL + ", api_key: " + geminiKey + "}\n" +
			"  vertex_ai: {api_base: " + w.vertex.srv.URL + ", vertex_credentials: os.environ/TEST_VERTEX_SA, vertex_location: us-central1}\n" +
			"  bedrock: {api_base: " + w.bedrock.srv.URL + ", aws_region_name: us-west-2, aws_access_key_id: " + sluiceAKID + ", aws_secret_access_key: os.environ/TEST_AWS_SECRET}\n",
		Env: map[string]string{
			"TEST_ANTHROPIC_KEY": anthropicKey,
			"TEST_VERTEX_SA":     w.tokens.ServiceAccountJSON(vertexProject),
			"TEST_AWS_SECRET":    sluiceSecret,
		},
	}
	return w
}

func (w *world) forbid(values ...string) {
	for _, u := range []*upstream{w.anthropic, w.gemini, w.vertex, w.bedrock} {
		u.forbid(values...)
	}
}

func TestAnthropicSDK(t *testing.T) {
	w := newWorld(t)
	gatewaytest.Run(t, w.opts, func(t *testing.T, g *gatewaytest.Gateway) {
		_, key := g.TeamKey()
		w.forbid(key, g.MasterKey)
		ctx := t.Context()
		client := anthropic.NewClient(option.WithBaseURL(g.URL+"/anthropic/"), option.WithAPIKey(key), option.WithMaxRetries(0))
		params := anthropic.MessageNewParams{
			Model:     anthropic.Model("claude-sonnet-4-5"),
			MaxTokens: 64,
			Messages:  []anthropic.MessageParam{anthropic.NewUserMessage(anthropic.NewTextBlock("Hello"))},
		}

		msg, err := client.Messages.New(ctx, params)
		if err != nil {
			t.Fatalf("messages: %v", err)
		}
		if len(msg.Content) != 1 || msg.Content[0].Text != "Hi from anthropic" || msg.Usage.InputTokens != 12 || msg.Model != "claude-sonnet-4-5" {
			t.Errorf("message %+v", msg)
		}

		stream := client.Messages.NewStreaming(ctx, params)
		var acc anthropic.Message
		events := 0
		for stream.Next() {
			events++
			if err := acc.Accumulate(stream.Current()); err != nil {
				t.Fatal(err)
			}
		}
		if err := stream.Err(); err != nil {
			t.Fatalf("stream: %v", err)
		}
		// The SDK does not surface ping events: 7 of the 8 sent.
		if events != 7 || len(acc.Content) != 1 || acc.Content[0].Text != "Hello there" || acc.Usage.OutputTokens != 9 {
			t.Errorf("stream: %d events, message %+v", events, acc)
		}

		count, err := client.Messages.CountTokens(ctx, anthropic.MessageCountTokensParams{
			Model:    anthropic.Model("claude-sonnet-4-5"),
			Messages: []anthropic.MessageParam{anthropic.NewUserMessage(anthropic.NewTextBlock("Hello"))},
		})
		if err != nil || count.InputTokens != 42 {
			t.Fatalf("count_tokens: %+v %v", count, err)
		}
		r, body := w.anthropic.lastRequest()
		if r.URL.Path != "/v1/messages/count_tokens" || !bytes.Contains(body, []byte(`"claude-sonnet-4-5"`)) {
			t.Errorf("count_tokens arrived as %s %s", r.URL.Path, body)
		}
	})
}

func TestGeminiSDK(t *testing.T) {
	w := newWorld(t)
	gatewaytest.Run(t, w.opts, func(t *testing.T, g *gatewaytest.Gateway) {
		_, key := g.TeamKey()
		w.forbid(key, g.MasterKey)
		ctx := t.Context()
		client, err := genai.NewClient(ctx, &genai.ClientConfig{
			APIKey: key, Backend: genai.BackendGeminiAPI,
			HTTPOptions: genai.HTTPOptions{BaseURL: g.URL + "/gemini/"},
		})
		if err != nil {
			t.Fatal(err)
		}
		resp, err := client.Models.GenerateContent(ctx, "gemini-2.5-flash", genai.Text("Hi"), nil)
		if err != nil {
			t.Fatalf("generateContent: %v", err)
		}
		if resp.Text() != "Hi from gemini" || resp.UsageMetadata.TotalTokenCount != 7 {
			t.Errorf("answer %q usage %+v", resp.Text(), resp.UsageMetadata)
		}
		r, _ := w.gemini.lastRequest()
		if r.URL.Path != "/v1beta/models/gemini-2.5-flash:generateContent" {
			t.Errorf("arrived at %s", r.URL.Path)
		}

		var text strings.Builder
		chunks := 0
		for resp, err := range client.Models.GenerateContentStream(ctx, "gemini-2.5-flash", genai.Text("Hi"), nil) {
			if err != nil {
				t.Fatalf("stream: %v", err)
			}
			chunks++
			text.WriteString(resp.Text())
		}
		if chunks != 3 || text.String() != "Hi from a stream" {
			t.Errorf("stream: %d chunks, %q", chunks, text.String())
		}
	})
}

// staticToken is the Vertex client's own OAuth token: sluice must skip it
// (the sluice key comes in x-sluice-api-key) and must not forward it.
type staticToken struct{}

func (staticToken) Token(context.Context) (*auth.Token, error) {
	return &auth.Token{Value: clientGoogle, Type: "Bearer", Expiry: time.Now().Add(time.Hour)}, nil
}

func TestVertexSDK(t *testing.T) {
	w := newWorld(t)
	gatewaytest.Run(t, w.opts, func(t *testing.T, g *gatewaytest.Gateway) {
		_, key := g.TeamKey()
		w.forbid(key, g.MasterKey)
		ctx := t.Context()
		for _, prefix := range []string{"/vertex-ai/", "/vertex_ai/"} {
			client, err := genai.NewClient(ctx, &genai.ClientConfig{
				Backend: genai.BackendVertexAI, Project: vertexProject, Location: vertexLocation,
				Credentials: auth.NewCredentials(&auth.CredentialsOptions{TokenProvider: staticToken{}}),
				HTTPOptions: genai.HTTPOptions{BaseURL: g.URL + prefix, Headers: http.Header{"X-Sluice-Api-Key": {key}}},
			})
			if err != nil {
				t.Fatal(err)
			}
			resp, err := client.Models.GenerateContent(ctx, "gemini-2.5-flash", genai.Text("Hi"), nil)
			if err != nil {
				t.Fatalf("%s generateContent: %v", prefix, err)
			}
			if resp.Text() != "Hi from gemini" {
				t.Errorf("%s answer %q", prefix, resp.Text())
			}
			r, _ := w.vertex.lastRequest()
			want := "/v1beta1/projects/" + vertexProject + "/locations/" + vertexLocation + "/publishers/google/models/gemini-2.5-flash:generateContent"
			if r.URL.Path != want {
				t.Errorf("%s arrived at %s, want %s", prefix, r.URL.Path, want)
			}
			var text strings.Builder
			for resp, err := range client.Models.GenerateContentStream(ctx, "gemini-2.5-flash", genai.Text("Hi"), nil) {
				if err != nil {
					t.Fatalf("%s stream: %v", prefix, err)
				}
				text.WriteString(resp.Text())
			}
			if text.String() != "Hi from a stream" {
				t.Errorf("%s stream %q", prefix, text.String())
			}
		}
	})
	// Every call on both backends used one minted token: it is cached.
	if n := w.tokens.Issued(); n < 1 || n > 2 {
		t.Errorf("minted %d tokens, want one per gateway", n)
	}
}

func TestBedrockSDK(t *testing.T) {
	w := newWorld(t)
	gatewaytest.Run(t, w.opts, func(t *testing.T, g *gatewaytest.Gateway) {
		_, key := g.TeamKey()
		w.forbid(key, g.MasterKey)
		ctx := t.Context()
		// One client signs with its own AWS keys (SigV4, skipped by sluice) and
		// sends the sluice key in x-sluice-api-key; the other sends the sluice
		// key as a bearer token (AWS_BEARER_TOKEN_BEDROCK), as LiteLLM documents.
		sigv4 := bedrockruntime.New(bedrockruntime.Options{
			Region: "us-east-1", BaseEndpoint: aws.String(g.URL + "/bedrock"), RetryMaxAttempts: 1,
			Credentials: credentials.NewStaticCredentialsProvider(clientAKID, clientSecret, clientSession),
			APIOptions:  []func(*middleware.Stack) error{smithyhttp.AddHeaderValue("X-Sluice-Api-Key", key)},
		})
		bearerClient := bedrockruntime.New(bedrockruntime.Options{
			Region: "us-east-1", BaseEndpoint: aws.String(g.URL + "/bedrock"), RetryMaxAttempts: 1,
			BearerAuthTokenProvider: bearer.StaticTokenProvider{Token: bearer.Token{Value: key}},
			BearerAuthSigner:        plainBearer{},
			AuthSchemePreference:    []string{"httpBearerAuth"},
		})
		const model = "us.anthropic.claude-3-5-sonnet-20241022-v2:0"
		for name, client := range map[string]*bedrockruntime.Client{"sigv4": sigv4, "bearer": bearerClient} {
			conv, err := client.Converse(ctx, &bedrockruntime.ConverseInput{
				ModelId: aws.String(model),
				Messages: []brtypes.Message{{Role: brtypes.ConversationRoleUser,
					Content: []brtypes.ContentBlock{&brtypes.ContentBlockMemberText{Value: "Hi"}}}},
			})
			if err != nil {
				t.Fatalf("%s converse: %v", name, err)
			}
			out := conv.Output.(*brtypes.ConverseOutputMemberMessage).Value
			if out.Content[0].(*brtypes.ContentBlockMemberText).Value != "Hi from bedrock" || *conv.Usage.TotalTokens != 15 {
				t.Errorf("%s converse: %+v", name, conv)
			}
			r, _ := w.bedrock.lastRequest()
			if got := r.URL.EscapedPath(); got != "/model/us.anthropic.claude-3-5-sonnet-20241022-v2%3A0/converse" {
				t.Errorf("%s converse arrived at %s", name, got)
			}
		}

		inv, err := sigv4.InvokeModel(ctx, &bedrockruntime.InvokeModelInput{
			ModelId: aws.String(model), ContentType: aws.String("application/json"), Accept: aws.String("application/json"),
			Body: []byte(`{"anthropic_version":"bedrock-2023-05-31","max_tokens":16,"messages":[{"role":"user","content":"Hi"}]}`),
		})
		if err != nil || !bytes.Contains(inv.Body, []byte(`"invoked"`)) {
			t.Fatalf("invoke: %s %v", inv.Body, err)
		}
		if _, body := w.bedrock.lastRequest(); !bytes.Equal(body, []byte(`{"anthropic_version":"bedrock-2023-05-31","max_tokens":16,"messages":[{"role":"user","content":"Hi"}]}`)) {
			t.Errorf("invoke body changed: %s", body)
		}

		stream, err := sigv4.ConverseStream(ctx, &bedrockruntime.ConverseStreamInput{
			ModelId: aws.String(model),
			Messages: []brtypes.Message{{Role: brtypes.ConversationRoleUser,
				Content: []brtypes.ContentBlock{&brtypes.ContentBlockMemberText{Value: "Hi"}}}},
		})
		if err != nil {
			t.Fatalf("converse stream: %v", err)
		}
		var text strings.Builder
		var usage *brtypes.TokenUsage
		for ev := range stream.GetStream().Events() {
			switch e := ev.(type) {
			case *brtypes.ConverseStreamOutputMemberContentBlockDelta:
				text.WriteString(e.Value.Delta.(*brtypes.ContentBlockDeltaMemberText).Value)
			case *brtypes.ConverseStreamOutputMemberMetadata:
				usage = e.Value.Usage
			}
		}
		if err := stream.GetStream().Err(); err != nil {
			t.Fatalf("converse stream: %v", err)
		}
		stream.GetStream().Close()
		if text.String() != "Hi streamed" || usage == nil || *usage.TotalTokens != 13 {
			t.Errorf("converse stream: %q %+v", text.String(), usage)
		}

		// An inference-profile ARN keeps its encoded slash in one segment.
		arn := "arn:aws:bedrock:us-west-2:123456789012:application-inference-profile/abc123"
		if _, err := sigv4.Converse(ctx, &bedrockruntime.ConverseInput{ModelId: aws.String(arn),
			Messages: []brtypes.Message{{Role: brtypes.ConversationRoleUser, Content: []brtypes.ContentBlock{&brtypes.ContentBlockMemberText{Value: "Hi"}}}},
		}); err != nil {
			t.Fatalf("converse with an ARN: %v", err)
		}
		r, _ := w.bedrock.lastRequest()
		if got := r.URL.EscapedPath(); got != "/model/arn%3Aaws%3Abedrock%3Aus-west-2%3A123456789012%3Aapplication-inference-profile%2Fabc123/converse" {
			t.Errorf("ARN arrived as %s", got)
		}
	})
}

// plainBearer sets the bearer token as the SDK's own signer does, without
// its HTTPS-only check: the test gateway listens on plain HTTP.
type plainBearer struct{}

func (plainBearer) SignWithBearerToken(ctx context.Context, tok bearer.Token, m bearer.Message) (bearer.Message, error) {
	req, ok := m.(*smithyhttp.Request)
	if !ok {
		return nil, fmt.Errorf("unexpected message %T", m)
	}
	req.Header.Set("Authorization", "Bearer "+tok.Value)
	return req, nil
}

// TestAllMethodsOnAllPrefixes sends every method to every prefix and checks
// that the upstream got the method, path, query and body unchanged, with the
// provider credential (each upstream verifies it) and no client credential.
func TestAllMethodsOnAllPrefixes(t *testing.T) {
	w := newWorld(t)
	gatewaytest.Run(t, w.opts, func(t *testing.T, g *gatewaytest.Gateway) {
		_, key := g.TeamKey()
		w.forbid(key, g.MasterKey)
		for _, p := range []struct {
			prefix, rest, wantURI string
			up                    *upstream
		}{
			{"/anthropic", "/v1/things/t%201?limit=2", "/v1/things/t%201?limit=2", w.anthropic},
			{"/gemini", "/v1beta/tunedModels/c1?pageSize=3", "/v1beta/tunedModels/c1?pageSize=3", w.gemini},
			{"/vertex-ai", "/v1/projects/p/locations/europe-west4/things/x@1?a=b", "/v1/projects/p/locations/europe-west4/things/x@1?a=b", w.vertex},
			{"/vertex_ai", "/v1/projects/p/locations/global/things/y?a=b", "/v1/projects/p/locations/global/things/y?a=b", w.vertex},
			{"/bedrock", "/sessions/s-1?nextToken=n", "/sessions/s-1?nextToken=n", w.bedrock},
		} {
			for _, method := range []string{"GET", "POST", "PUT", "DELETE", "PATCH"} {
				var body any
				if method == "POST" || method == "PUT" || method == "PATCH" {
					body = `{"m":"` + method + `"}`
				}
				resp := g.Do(method, p.prefix+p.rest+"&key="+key, key, body, "X-Api-Key", key, "X-Goog-Api-Key", key)
				if resp.Status != 200 {
					t.Errorf("%s %s: %d %s", method, p.prefix, resp.Status, resp.Body)
					continue
				}
				var got map[string]string
				json.Unmarshal(resp.Body, &got)
				wantBody := ""
				if body != nil {
					wantBody = body.(string)
				}
				if got["method"] != method || got["uri"] != p.wantURI || got["body"] != wantBody {
					t.Errorf("%s %s arrived as %v", method, p.prefix, got)
				}
			}
		}
	})
}

func TestPathsThroughTheWholeGateway(t *testing.T) {
	w := newWorld(t)
	gatewaytest.Run(t, w.opts, func(t *testing.T, g *gatewaytest.Gateway) {
		_, key := g.TeamKey()
		w.forbid(key, g.MasterKey)
		before := w.anthropic.hits.Load()
		for _, path := range []string{
			"/anthropic/v1/%2e%2e/admin",
			"/anthropic/v1/../admin",
			"/anthropic/v1/..%2Fadmin",
			"/anthropic//evil.com/v1",
			"/anthropic/v1/a%5Cb",
			"/anthropic/v1/a%0Ab",
			"/anthropic/https:%2F%2Fevil.com",
		} {
			resp := g.Do("GET", path, key, nil)
			if resp.Status != 400 || resp.ErrorCode(t) != "invalid_value" {
				t.Errorf("%s: %d %s", path, resp.Status, resp.Body)
			}
		}
		if w.anthropic.hits.Load() != before {
			t.Error("a refused path reached the upstream")
		}
		// The key may come in ?key= alone (Google SDKs with an API key).
		resp := g.Do("GET", "/gemini/v1beta/models?key="+url.QueryEscape(key)+"&pageSize=5", "", nil)
		if resp.Status != 200 {
			t.Fatalf("?key=: %d %s", resp.Status, resp.Body)
		}
		if r, _ := w.gemini.lastRequest(); r.URL.RawQuery != "pageSize=5" {
			t.Errorf("query forwarded %q", r.URL.RawQuery)
		}
		// Vertex model ids carry '@'; they pass unchanged.
		resp = g.Do("POST", "/vertex-ai/v1/projects/p/locations/us-east5/publishers/anthropic/models/claude-3-5-sonnet-v2@20241022:rawPredict", key, `{}`)
		if resp.Status != 200 {
			t.Fatalf("vertex @: %d %s", resp.Status, resp.Body)
		}
		if r, _ := w.vertex.lastRequest(); r.URL.EscapedPath() != "/v1/projects/p/locations/us-east5/publishers/anthropic/models/claude-3-5-sonnet-v2@20241022:rawPredict" {
			t.Errorf("vertex path arrived as %s", r.URL.EscapedPath())
		}
		if resp := g.Do("GET", "/anthropic/v1/models", "", nil); resp.Status != 401 {
			t.Errorf("no key: %d", resp.Status)
		}
		if resp := g.Do("HEAD", "/anthropic/v1/models", key, nil); resp.Status != 200 {
			t.Errorf("HEAD: %d", resp.Status)
		}
		if resp := g.Do("OPTIONS", "/anthropic/v1/models", key, nil); resp.Status != 405 {
			t.Errorf("OPTIONS: %d", resp.Status)
		}
	})
}

func TestLimitsApplyToPassthrough(t *testing.T) {
	w := newWorld(t)
	gatewaytest.Run(t, w.opts, func(t *testing.T, g *gatewaytest.Gateway) {
		storetest.WithinOneLimitWindow(t, 10*time.Second)
		team := g.NewTeam(map[string]any{"team_alias": "limited"})
		// 18 tokens: the first call (12 + 6) uses the window up.
		key := g.NewKey(team, map[string]any{"tpm_limit": 18})
		w.forbid(key, g.MasterKey)
		msg := `{"model":"claude-sonnet-4-5","max_tokens":8,"messages":[{"role":"user","content":"Hi"}]}`
		if resp := g.Do("POST", "/anthropic/v1/messages", key, msg, "Anthropic-Version", "2023-06-01"); resp.Status != 200 {
			t.Fatalf("first call: %d %s", resp.Status, resp.Body)
		}
		resp := g.Do("POST", "/anthropic/v1/messages", key, msg, "Anthropic-Version", "2023-06-01")
		if resp.Status != 429 || resp.ErrorCode(t) != "rate_limit_exceeded" {
			t.Errorf("over the tpm limit: %d %s", resp.Status, resp.Body)
		}

		restricted := g.NewKey(team, map[string]any{"models": []string{"gemini-2.5-flash"}})
		w.forbid(restricted)
		if resp := g.Do("POST", "/gemini/v1beta/models/gemini-2.5-flash:generateContent", restricted, `{}`); resp.Status != 200 {
			t.Errorf("allowed model: %d %s", resp.Status, resp.Body)
		}
		if resp := g.Do("POST", "/gemini/v1beta/models/gemini-2.5-pro:generateContent", restricted, `{}`); resp.Status != 403 {
			t.Errorf("other model: %d %s", resp.Status, resp.Body)
		}
	})
}

func TestUnconfiguredPrefixIs503(t *testing.T) {
	gatewaytest.Run(t, gatewaytest.Options{}, func(t *testing.T, g *gatewaytest.Gateway) {
		_, key := g.TeamKey()
		for _, path := range []string{"/anthropic/v1/messages", "/gemini/v1beta/models", "/vertex-ai/v1/projects/p/locations/l/x"} {
			resp := g.Do("POST", path, key, `{}`)
			if resp.Status != 503 || resp.ErrorCode(t) != "unavailable" || strings.Contains(string(resp.Body), key) {
				t.Errorf("%s: %d %s", path, resp.Status, resp.Body)
			}
		}
	})
}
