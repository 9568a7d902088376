package bedrock_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/sluice-gateway/sluice/pkg/api"
	"github.com/sluice-gateway/sluice/pkg/config"
	"github.com/sluice-gateway/sluice/pkg/models"
	"github.com/sluice-gateway/sluice/pkg/oai"
	"github.com/sluice-gateway/sluice/pkg/providers"
	"github.com/sluice-gateway/sluice/pkg/providers/bedrock"
	"github.com/sluice-gateway/sluice/pkg/providers/bedrock/bedrocktest"
	"github.com/sluice-gateway/sluice/pkg/providers/embedbatch/embedtest"
	"github.com/sluice-gateway/sluice/pkg/providers/providertest"
)

// claude is a cross-region inference profile of Claude, as deployments
// name it.
const claude = "us.anthropic.claude-sonnet-4-5-20250929-v1:0"

// claudePath is its Converse path: the id escaped as one segment.
const claudePath = "/model/us.anthropic.claude-sonnet-4-5-20250929-v1%3A0/converse"

// textAnswer is a Converse answer as Bedrock sends it.
const textAnswer = `{"metrics":{"latencyMs":1179},"output":{"message":{"content":[{"text":"Hello! How can I help you today?"}],"role":"assistant"}},"stopReason":"end_turn","usage":{"inputTokens":12,"outputTokens":11,"totalTokens":23}}`

// converseUpstream is a fake bedrock-runtime that checks each request's
// SigV4 signature (service bedrock, the test's keys) before answer sees it.
func converseUpstream(t *testing.T, answer http.HandlerFunc) *providertest.Upstream {
	t.Helper()
	return providertest.NewUpstream(t, func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		sig, err := bedrocktest.Verify(r, body, func(id string) (string, string, bool) {
			return testSecret, "", id == testKeyID
		})
		if err == nil && (sig.Service != bedrock.SigningName || sig.Region != "us-east-1") {
			err = fmt.Errorf("signed for %s in %s", sig.Service, sig.Region)
		}
		if err != nil {
			t.Errorf("bedrock: %s %s: %v", r.Method, r.URL.EscapedPath(), err)
			bedrockError(w, http.StatusForbidden, "InvalidSignatureException", "The request signature we calculated does not match the signature you provided.")
			return
		}
		r.Body = io.NopCloser(bytes.NewReader(body))
		answer(w, r)
	})
}

// bedrockError answers as Bedrock does when it refuses a call.
func bedrockError(w http.ResponseWriter, status int, kind, msg string) {
	w.Header().Set("X-Amzn-Errortype", kind+":http://internal.amazon.com/coral/com.amazon.bedrock/")
	w.Header().Set("X-Amzn-Requestid", "6bc4b5b4-0000-4000-8000-000000000000")
	providertest.WriteJSON(w, status, fmt.Sprintf(`{"message":%q}`, msg))
}

func answerJSON(body string) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("X-Amzn-Requestid", "6bc4b5b4-0000-4000-8000-000000000001")
		providertest.WriteJSON(w, http.StatusOK, body)
	}
}

// chatDeployment is a Bedrock deployment of model on up, with static keys.
func chatDeployment(up *providertest.Upstream, model string, extra map[string]any) config.Deployment {
	return config.Deployment{ModelName: "claude", Params: config.Params{
		Model: "bedrock/" + model, APIBase: up.URL, AWSRegionName: "us-east-1",
		AWSAccessKeyID: testKeyID, AWSSecretAccessKey: testSecret, Extra: extra,
	}}
}

func openChatter(t *testing.T, d config.Deployment) models.Chatter {
	t.Helper()
	ep, err := bedrock.NewProvider(providers.NewHTTPClient(), nil).Open(context.Background(), d, embedtest.NoSecrets)
	if err != nil {
		t.Fatal(err)
	}
	c, ok := ep.(models.Chatter)
	if !ok {
		t.Fatal("the Bedrock endpoint does not serve chat")
	}
	return c
}

// chat parses body (failing the test if it is not a valid request) and
// sends it.
func chat(t *testing.T, c models.Chatter, body string) (*models.Answer, error) {
	t.Helper()
	req, err := oai.ParseChatRequest([]byte(body))
	if err != nil {
		t.Fatalf("the request does not parse: %v\n%s", err, body)
	}
	return c.Chat(context.Background(), req)
}

// completion reads a non-streamed answer.
func completion(t *testing.T, a *models.Answer) map[string]any {
	t.Helper()
	defer a.Body.Close()
	raw, err := io.ReadAll(a.Body)
	if err != nil {
		t.Fatal(err)
	}
	if a.ContentLength != int64(len(raw)) {
		t.Errorf("ContentLength %d for %d bytes", a.ContentLength, len(raw))
	}
	var v map[string]any
	if err := json.Unmarshal(raw, &v); err != nil {
		t.Fatalf("the answer is not JSON: %v\n%s", err, raw)
	}
	return v
}

type converseRequestCase struct {
	name  string
	model string
	extra map[string]any
	body  string
	path  string
	want  string
}

// converseRequestCases are TestConverseRequest's cases.
var converseRequestCases = []converseRequestCase{{
	name: "conversation",
	body: `{"model":"claude","messages":[
			{"role":"system","content":"You are terse."},
			{"role":"developer","content":[{"type":"text","text":"Answer in French."},{"type":"text","text":"  "}]},
			{"role":"user","content":"Hello"},
			{"role":"user","content":[{"type":"text","text":"Who are you?"}]},
			{"role":"assistant","content":"Je suis Claude."},
			{"role":"assistant","content":""},
			{"role":"user","content":"Merci"}],
			"max_tokens":300,"temperature":0.2,"top_p":0.9,"stop":["\n\nHuman:",""],"user":"u-42"}`,
	want: `{"messages":[
			{"role":"user","content":[{"text":"Hello"},{"text":"Who are you?"}]},
			{"role":"assistant","content":[{"text":"Je suis Claude."}]},
			{"role":"user","content":[{"text":"Merci"}]}],
			"system":[{"text":"You are terse."},{"text":"Answer in French."}],
			"inferenceConfig":{"maxTokens":300,"temperature":0.2,"topP":0.9,"stopSequences":["\n\nHuman:"]}}`,
}, {
	name: "max_completion_tokens wins",
	body: `{"model":"claude","messages":[{"role":"user","content":"Hi"}],"max_tokens":10,"max_completion_tokens":20,"stop":"END"}`,
	want: `{"messages":[{"role":"user","content":[{"text":"Hi"}]}],"inferenceConfig":{"maxTokens":20,"stopSequences":["END"]}}`,
}, {
	name: "images, documents and cache points",
	body: `{"model":"claude","messages":[
			{"role":"system","content":"Long instructions.","cache_control":{"type":"ephemeral"}},
			{"role":"user","content":[
				{"type":"text","text":"Describe both.","cache_control":{"type":"ephemeral"}},
				{"type":"image_url","image_url":{"url":"data:image/png;base64,iVBORw0KGgo=","detail":"high"}},
				{"type":"image_url","image_url":{"url":"data:image/JPEG;base64,/9j/4AAQ"}},
				{"type":"file","file":{"file_data":"data:application/pdf;base64,JVBERi0xLjQ=","filename":"Q3 report.final.pdf"}},
				{"type":"file","file":{"file_data":"aGVsbG8=","filename":"notes.md"}},
				{"type":"file","file":{"file_data":"data:image/webp;base64,UklGRg==","filename":"x.webp"}}]}]}`,
	want: `{"messages":[{"role":"user","content":[
			{"text":"Describe both."},{"cachePoint":{"type":"default"}},
			{"image":{"format":"png","source":{"bytes":"iVBORw0KGgo="}}},
			{"image":{"format":"jpeg","source":{"bytes":"/9j/4AAQ"}}},
			{"document":{"format":"pdf","name":"Q3 report-final","source":{"bytes":"JVBERi0xLjQ="}}},
			{"document":{"format":"md","name":"notes","source":{"bytes":"aGVsbG8="}}},
			{"image":{"format":"webp","source":{"bytes":"UklGRg=="}}}]}],
			"system":[{"text":"Long instructions."},{"cachePoint":{"type":"default"}}]}`,
}, {
	name: "tools, tool calls and results",
	body: `{"model":"claude","messages":[
			{"role":"user","content":"Weather in Paris and Oslo?"},
			{"role":"assistant","content":"Checking.","tool_calls":[
				{"id":"tooluse_1","type":"function","function":{"name":"get_weather","arguments":"{\"city\": \"Paris\"}"}},
				{"id":"tooluse_2","type":"function","function":{"name":"now","arguments":""}}]},
			{"role":"tool","tool_call_id":"tooluse_1","content":"18C"},
			{"role":"tool","tool_call_id":"tooluse_2","content":[{"type":"text","text":""}]},
			{"role":"user","content":"And tomorrow?"}],
			"tools":[
				{"type":"function","function":{"name":"get_weather","description":"Weather for a city","parameters":{"type":"object","properties":{"city":{"type":"string"}},"required":["city"]},"strict":true}},
				{"type":"function","function":{"name":"now"}}],
			"tool_choice":"required","parallel_tool_calls":true}`,
	want: `{"messages":[
			{"role":"user","content":[{"text":"Weather in Paris and Oslo?"}]},
			{"role":"assistant","content":[{"text":"Checking."},
				{"toolUse":{"toolUseId":"tooluse_1","name":"get_weather","input":{"city":"Paris"}}},
				{"toolUse":{"toolUseId":"tooluse_2","name":"now","input":{}}}]},
			{"role":"user","content":[
				{"toolResult":{"toolUseId":"tooluse_1","content":[{"text":"18C"}]}},
				{"toolResult":{"toolUseId":"tooluse_2","content":[{"text":""}]}},
				{"text":"And tomorrow?"}]}],
			"toolConfig":{"tools":[
				{"toolSpec":{"name":"get_weather","description":"Weather for a city","inputSchema":{"json":{"type":"object","properties":{"city":{"type":"string"}},"required":["city"]}}}},
				{"toolSpec":{"name":"now","inputSchema":{"json":{"type":"object","properties":{}}}}}],
				"toolChoice":{"any":{}}}}`,
}, {
	name: "a named tool",
	body: `{"model":"claude","messages":[{"role":"user","content":"Paris?"}],"tools":[{"type":"function","function":{"name":"get_weather"}}],"tool_choice":{"type":"function","function":{"name":"get_weather"}}}`,
	want: `{"messages":[{"role":"user","content":[{"text":"Paris?"}]}],"toolConfig":{"tools":[{"toolSpec":{"name":"get_weather","inputSchema":{"json":{"type":"object","properties":{}}}}}],"toolChoice":{"tool":{"name":"get_weather"}}}}`,
}, {
	name: "tool choice auto",
	body: `{"model":"claude","messages":[{"role":"user","content":"Paris?"}],"tools":[{"type":"function","function":{"name":"get_weather"}}],"tool_choice":"auto"}`,
	want: `{"messages":[{"role":"user","content":[{"text":"Paris?"}]}],"toolConfig":{"tools":[{"toolSpec":{"name":"get_weather","inputSchema":{"json":{"type":"object","properties":{}}}}}],"toolChoice":{"auto":{}}}}`,
}, {
	name: "tool choice none leaves the tools out",
	body: `{"model":"claude","messages":[{"role":"user","content":"Paris?"}],"tools":[{"type":"function","function":{"name":"get_weather"}}],"tool_choice":"none"}`,
	want: `{"messages":[{"role":"user","content":[{"text":"Paris?"}]}]}`,
}, {
	name: "json_schema through a forced tool",
	body: `{"model":"claude","messages":[{"role":"user","content":"Invent a person."}],"response_format":{"type":"json_schema","json_schema":{"name":"person","description":"A person","schema":{"type":"object","properties":{"name":{"type":"string"}},"required":["name"]},"strict":true}}}`,
	want: `{"messages":[{"role":"user","content":[{"text":"Invent a person."}]}],"toolConfig":{"tools":[{"toolSpec":{"name":"json_tool_call","description":"A person","inputSchema":{"json":{"type":"object","properties":{"name":{"type":"string"}},"required":["name"]}}}}],"toolChoice":{"tool":{"name":"json_tool_call"}}}}`,
}, {
	name: "json_object through a forced tool",
	body: `{"model":"claude","messages":[{"role":"user","content":"JSON please."}],"response_format":{"type":"json_object"}}`,
	want: `{"messages":[{"role":"user","content":[{"text":"JSON please."}]}],"toolConfig":{"tools":[{"toolSpec":{"name":"json_tool_call","inputSchema":{"json":{"type":"object","properties":{}}}}}],"toolChoice":{"tool":{"name":"json_tool_call"}}}}`,
}, {
	name: "text response_format is the default",
	body: `{"model":"claude","messages":[{"role":"user","content":"Hi"}],"response_format":{"type":"text"}}`,
	want: `{"messages":[{"role":"user","content":[{"text":"Hi"}]}]}`,
}, {
	name: "reasoning_effort on Claude, thinking blocks sent back",
	body: `{"model":"claude","messages":[
			{"role":"user","content":"Weather?"},
			{"role":"assistant","content":null,"reasoning_content":"Use the tool.","thinking_blocks":[
				{"type":"thinking","thinking":"Use the tool.","signature":"EqQBCkgIARABGAIiQL"},
				{"type":"redacted_thinking","data":"EmwKAhgBEgy3va3pzixw"}],
				"tool_calls":[{"id":"tooluse_1","type":"function","function":{"name":"get_weather","arguments":"{}"}}]},
			{"role":"tool","tool_call_id":"tooluse_1","content":"18C"}],
			"tools":[{"type":"function","function":{"name":"get_weather"}}],
			"reasoning_effort":"high","response_format":{"type":"json_object"}}`,
	want: `{"messages":[
			{"role":"user","content":[{"text":"Weather?"}]},
			{"role":"assistant","content":[
				{"reasoningContent":{"reasoningText":{"text":"Use the tool.","signature":"EqQBCkgIARABGAIiQL"}}},
				{"reasoningContent":{"redactedContent":"EmwKAhgBEgy3va3pzixw"}},
				{"toolUse":{"toolUseId":"tooluse_1","name":"get_weather","input":{}}}]},
			{"role":"user","content":[{"toolResult":{"toolUseId":"tooluse_1","content":[{"text":"18C"}]}}]}],
			"inferenceConfig":{"maxTokens":8192},
			"toolConfig":{"tools":[
				{"toolSpec":{"name":"get_weather","inputSchema":{"json":{"type":"object","properties":{}}}}},
				{"toolSpec":{"name":"json_tool_call","inputSchema":{"json":{"type":"object","properties":{}}}}}]},
			"additionalModelRequestFields":{"thinking":{"type":"enabled","budget_tokens":4096}}}`,
}, {
	name: "Anthropic's thinking and top_k",
	body: `{"model":"claude","messages":[{"role":"user","content":"Think."}],"thinking":{"type":"enabled","budget_tokens":2000},"reasoning_effort":"low","max_tokens":5000,"top_k":40}`,
	want: `{"messages":[{"role":"user","content":[{"text":"Think."}]}],"inferenceConfig":{"maxTokens":5000},"additionalModelRequestFields":{"thinking":{"type":"enabled","budget_tokens":2000},"top_k":40}}`,
}, {
	name:  "reasoning_effort none on Claude",
	body:  `{"model":"claude","messages":[{"role":"user","content":"Hi"}],"reasoning_effort":"none"}`,
	want:  `{"messages":[{"role":"user","content":[{"text":"Hi"}]}]}`,
	model: "anthropic.claude-3-5-haiku-20241022-v1:0",
	path:  "/model/anthropic.claude-3-5-haiku-20241022-v1%3A0/converse",
}, {
	name:  "top_k on Nova",
	model: "amazon.nova-pro-v1:0",
	body:  `{"model":"claude","messages":[{"role":"user","content":"Hi"}],"top_k":20}`,
	path:  "/model/amazon.nova-pro-v1%3A0/converse",
	want:  `{"messages":[{"role":"user","content":[{"text":"Hi"}]}],"additionalModelRequestFields":{"inferenceConfig":{"topK":20}}}`,
}, {
	name:  "reasoning on Nova 2",
	model: "us.amazon.nova-2-lite-v1:0",
	body:  `{"model":"claude","messages":[{"role":"user","content":"Hi"}],"reasoning_effort":"medium"}`,
	path:  "/model/us.amazon.nova-2-lite-v1%3A0/converse",
	want:  `{"messages":[{"role":"user","content":[{"text":"Hi"}]}],"additionalModelRequestFields":{"reasoningConfig":{"type":"enabled","maxReasoningEffort":"medium"}}}`,
}, {
	name:  "reasoning on gpt-oss",
	model: "openai.gpt-oss-120b-1:0",
	body:  `{"model":"claude","messages":[{"role":"user","content":"Hi"}],"reasoning_effort":"low"}`,
	path:  "/model/openai.gpt-oss-120b-1%3A0/converse",
	want:  `{"messages":[{"role":"user","content":[{"text":"Hi"}]}],"additionalModelRequestFields":{"reasoning_effort":"low"}}`,
}, {
	name:  "a deployment's guardrail",
	extra: map[string]any{"guardrailConfig": map[string]any{"guardrailIdentifier": "gr-1a2b3c", "guardrailVersion": "DRAFT", "trace": "enabled"}},
	body:  `{"model":"claude","messages":[{"role":"user","content":"Hi"}]}`,
	want:  `{"messages":[{"role":"user","content":[{"text":"Hi"}]}],"guardrailConfig":{"guardrailIdentifier":"gr-1a2b3c","guardrailVersion":"DRAFT","trace":"enabled"}}`,
}, {
	name:  "the request's guardrail wins",
	extra: map[string]any{"guardrailConfig": map[string]any{"guardrailIdentifier": "gr-1a2b3c", "guardrailVersion": "DRAFT"}},
	body:  `{"model":"claude","messages":[{"role":"user","content":"Hi"}],"guardrailConfig":{"guardrailIdentifier":"gr-9","guardrailVersion":"2"}}`,
	want:  `{"messages":[{"role":"user","content":[{"text":"Hi"}]}],"guardrailConfig":{"guardrailIdentifier":"gr-9","guardrailVersion":"2"}}`,
}, {
	name:  "a converse/ route and an application inference profile",
	model: "converse/anthropic.claude-3-5-haiku-20241022-v1:0",
	extra: map[string]any{"model_id": "arn:aws:bedrock:us-east-1:123456789012:application-inference-profile/a1b2c3"},
	body:  `{"model":"claude","messages":[{"role":"user","content":"Hi"}],"top_k":5}`,
	path:  "/model/arn%3Aaws%3Abedrock%3Aus-east-1%3A123456789012%3Aapplication-inference-profile%2Fa1b2c3/converse",
	want:  `{"messages":[{"role":"user","content":[{"text":"Hi"}]}],"additionalModelRequestFields":{"top_k":5}}`,
}, {
	name:  "drop_params drops what Converse cannot take",
	extra: map[string]any{},
	body:  `{"model":"claude","messages":[{"role":"user","content":"Hi"}],"n":2,"seed":7,"logprobs":true,"top_logprobs":2,"frequency_penalty":0.5,"presence_penalty":0.1,"parallel_tool_calls":false,"logit_bias":{"50256":-100},"drop_params":true}`,
	want:  `{"messages":[{"role":"user","content":[{"text":"Hi"}]}]}`,
}}

// TestConverseRequest checks the Converse body each kind of chat request
// becomes, on the wire, signed.
func TestConverseRequest(t *testing.T) {
	for _, tc := range converseRequestCases {
		t.Run(tc.name, func(t *testing.T) {
			up := converseUpstream(t, answerJSON(textAnswer))
			model, path := claude, claudePath
			if tc.model != "" {
				model, path = tc.model, tc.path
			}
			a, err := chat(t, openChatter(t, chatDeployment(up, model, tc.extra)), tc.body)
			if err != nil {
				t.Fatal(err)
			}
			completion(t, a)
			providertest.AssertRequest(t, up.Last(t), providertest.Want{
				Method: http.MethodPost, Path: path,
				Header: map[string]string{"Content-Type": "application/json", "Accept": "application/json"},
				Body:   tc.want,
			})
		})
	}
}

// TestConverseRefusals checks what Converse cannot take is refused before
// any call, naming the field.
func TestConverseRefusals(t *testing.T) {
	for _, tc := range []struct {
		name, model, body string
		param, code, msg  string
	}{
		{"an image by URL", claude, `{"model":"claude","messages":[{"role":"user","content":[{"type":"text","text":"What is it?"},{"type":"image_url","image_url":{"url":"https://example.com/cat.png"}}]}]}`,
			"messages[0].content[1].image_url.url", "invalid_value", "does not fetch image URLs"},
		{"an image type Converse lacks", claude, `{"model":"claude","messages":[{"role":"user","content":[{"type":"image_url","image_url":{"url":"data:image/svg+xml;base64,PHN2Zz4="}}]}]}`,
			"messages[0].content[0].image_url.url", "invalid_value", "PNG, JPEG, GIF and WebP"},
		{"audio", claude, `{"model":"claude","messages":[{"role":"user","content":[{"type":"input_audio","input_audio":{"data":"UklGRg==","format":"wav"}}]}]}`,
			"messages[0].content[0].type", "invalid_value", "input_audio"},
		{"a file id", claude, `{"model":"claude","messages":[{"role":"user","content":[{"type":"file","file":{"file_id":"file-abc"}}]}]}`,
			"messages[0].content[0].file.file_id", "invalid_value", "not by an OpenAI file id"},
		{"a file of unknown type", claude, `{"model":"claude","messages":[{"role":"user","content":[{"type":"file","file":{"file_data":"AAAA","filename":"a.bin"}}]}]}`,
			"messages[0].content[0].file.file_data", "invalid_value", "PDF, CSV"},
		{"a function message", claude, `{"model":"claude","messages":[{"role":"user","content":"Hi"},{"role":"function","name":"f","content":"1"}]}`,
			"messages[1].role", "invalid_value", "'function' messages"},
		{"arguments that are not an object", claude, `{"model":"claude","messages":[{"role":"user","content":"Hi"},{"role":"assistant","tool_calls":[{"id":"t1","type":"function","function":{"name":"f","arguments":"[1"}}]},{"role":"tool","tool_call_id":"t1","content":"1"}],"tools":[{"type":"function","function":{"name":"f"}}]}`,
			"messages[1].tool_calls[0].function.arguments", "invalid_value", "JSON object"},
		{"tool blocks without tools", claude, `{"model":"claude","messages":[{"role":"user","content":"Hi"},{"role":"assistant","tool_calls":[{"id":"t1","type":"function","function":{"name":"f","arguments":"{}"}}]},{"role":"tool","tool_call_id":"t1","content":"1"}]}`,
			"tools", "invalid_value", "Send 'tools'"},
		{"tool choice none with tool blocks", claude, `{"model":"claude","messages":[{"role":"user","content":"Hi"},{"role":"assistant","tool_calls":[{"id":"t1","type":"function","function":{"name":"f","arguments":"{}"}}]},{"role":"tool","tool_call_id":"t1","content":"1"}],"tools":[{"type":"function","function":{"name":"f"}}],"tool_choice":"none"}`,
			"tool_choice", "unsupported_parameter", "drop_params"},
		{"n", claude, `{"model":"claude","messages":[{"role":"user","content":"Hi"}],"n":3,"seed":1}`,
			"n", "unsupported_parameter", "Neither are: 'seed'"},
		{"logprobs", claude, `{"model":"claude","messages":[{"role":"user","content":"Hi"}],"logprobs":true}`,
			"logprobs", "unsupported_parameter", "'logprobs' is not supported by model 'claude' (provider bedrock)"},
		{"penalties", claude, `{"model":"claude","messages":[{"role":"user","content":"Hi"}],"presence_penalty":1}`,
			"presence_penalty", "unsupported_parameter", "drop_params"},
		{"no parallel tool calls", claude, `{"model":"claude","messages":[{"role":"user","content":"Hi"}],"tools":[{"type":"function","function":{"name":"f"}}],"parallel_tool_calls":false}`,
			"parallel_tool_calls", "unsupported_parameter", "drop_params"},
		{"a custom tool", claude, `{"model":"claude","messages":[{"role":"user","content":"Hi"}],"tools":[{"type":"custom","custom":{"name":"grammar"}}]}`,
			"tools[0]", "unsupported_parameter", "drop_params"},
		{"an unknown parameter", claude, `{"model":"claude","messages":[{"role":"user","content":"Hi"}],"metadata":{"a":"b"}}`,
			"metadata", "unsupported_parameter", "drop_params"},
		{"an unknown reasoning effort", claude, `{"model":"claude","messages":[{"role":"user","content":"Hi"}],"reasoning_effort":"extreme"}`,
			"reasoning_effort", "invalid_value", "'minimal', 'low', 'medium' and 'high'"},
		{"reasoning on a model without it", "mistral.mistral-large-2407-v1:0", `{"model":"claude","messages":[{"role":"user","content":"Hi"}],"reasoning_effort":"low"}`,
			"reasoning_effort", "unsupported_parameter", "drop_params"},
		{"thinking on a model without it", "amazon.nova-pro-v1:0", `{"model":"claude","messages":[{"role":"user","content":"Hi"}],"thinking":{"type":"enabled","budget_tokens":1024}}`,
			"thinking", "unsupported_parameter", "drop_params"},
		{"top_k on a model without it", "meta.llama3-3-70b-instruct-v1:0", `{"model":"claude","messages":[{"role":"user","content":"Hi"}],"top_k":3}`,
			"top_k", "unsupported_parameter", "drop_params"},
		{"top_k that is not a number", claude, `{"model":"claude","messages":[{"role":"user","content":"Hi"}],"top_k":"many"}`,
			"top_k", "invalid_value", "number"},
		{"thinking that is not an object", claude, `{"model":"claude","messages":[{"role":"user","content":"Hi"}],"thinking":true}`,
			"thinking", "invalid_value", "object"},
		{"thinking blocks that are not blocks", claude, `{"model":"claude","messages":[{"role":"user","content":"Hi"},{"role":"assistant","content":"x","thinking_blocks":[{"type":"idea"}]}]}`,
			"messages[1].thinking_blocks", "invalid_value", "'thinking' or 'redacted_thinking'"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			up := converseUpstream(t, answerJSON(textAnswer))
			_, err := chat(t, openChatter(t, chatDeployment(up, tc.model, nil)), tc.body)
			var ae *api.Error
			if !errors.As(err, &ae) || ae.Status != http.StatusBadRequest || ae.Param != tc.param || ae.Code != tc.code || !strings.Contains(ae.Message, tc.msg) {
				t.Fatalf("error %#v; want a 400 %s naming %q saying %q", err, tc.code, tc.param, tc.msg)
			}
			if up.Count() != 0 {
				t.Errorf("the refused request reached Bedrock")
			}
		})
	}
}

// TestConverseAnswers checks Converse's answers become chat.completions.
func TestConverseAnswers(t *testing.T) {
	const head = `"id":"*","object":"chat.completion","created":"*","model":"us.anthropic.claude-sonnet-4-5-20250929-v1:0"`
	for _, tc := range []struct {
		name, body, answer, want string
	}{{
		name:   "text, with prompt-cache counts",
		body:   `{"model":"claude","messages":[{"role":"user","content":"Hi"}]}`,
		answer: `{"metrics":{"latencyMs":802},"output":{"message":{"content":[{"text":"Hello! "},{"text":"How can I help?"}],"role":"assistant"}},"stopReason":"end_turn","usage":{"cacheReadInputTokens":1024,"cacheWriteInputTokens":300,"inputTokens":12,"outputTokens":9,"totalTokens":1345}}`,
		want: `{` + head + `,"choices":[{"index":0,"message":{"role":"assistant","content":"Hello! How can I help?","refusal":null},"finish_reason":"stop","logprobs":null}],
			"usage":{"prompt_tokens":1336,"completion_tokens":9,"total_tokens":1345,"prompt_tokens_details":{"cached_tokens":1024},"cache_read_input_tokens":1024,"cache_creation_input_tokens":300}}`,
	}, {
		name:   "tool calls",
		body:   `{"model":"claude","messages":[{"role":"user","content":"Weather in Paris and Oslo?"}],"tools":[{"type":"function","function":{"name":"get_weather"}}]}`,
		answer: `{"metrics":{"latencyMs":1650},"output":{"message":{"content":[{"text":"Let me check both."},{"toolUse":{"input":{"city":"Paris","unit":"celsius"},"name":"get_weather","toolUseId":"tooluse_kZJMlvQmRJ6eAyJE5GIl7Q"}},{"toolUse":{"input":{"city":"Oslo"},"name":"get_weather","toolUseId":"tooluse_Wm4KpWl8Q0KZ1a_bz3E1mw"}}],"role":"assistant"}},"stopReason":"tool_use","usage":{"inputTokens":410,"outputTokens":120,"totalTokens":530}}`,
		want: `{` + head + `,"choices":[{"index":0,"message":{"role":"assistant","content":"Let me check both.","refusal":null,"tool_calls":[
			{"id":"tooluse_kZJMlvQmRJ6eAyJE5GIl7Q","type":"function","function":{"name":"get_weather","arguments":"{\"city\":\"Paris\",\"unit\":\"celsius\"}"}},
			{"id":"tooluse_Wm4KpWl8Q0KZ1a_bz3E1mw","type":"function","function":{"name":"get_weather","arguments":"{\"city\":\"Oslo\"}"}}]},
			"finish_reason":"tool_calls","logprobs":null}],
			"usage":{"prompt_tokens":410,"completion_tokens":120,"total_tokens":530}}`,
	}, {
		name:   "only a tool call: no content",
		body:   `{"model":"claude","messages":[{"role":"user","content":"Weather?"}],"tools":[{"type":"function","function":{"name":"get_weather"}}]}`,
		answer: `{"output":{"message":{"content":[{"toolUse":{"input":{},"name":"get_weather","toolUseId":"tooluse_1"}}],"role":"assistant"}},"stopReason":"tool_use","usage":{"inputTokens":40,"outputTokens":10,"totalTokens":50}}`,
		want: `{` + head + `,"choices":[{"index":0,"message":{"role":"assistant","content":null,"refusal":null,"tool_calls":[{"id":"tooluse_1","type":"function","function":{"name":"get_weather","arguments":"{}"}}]},"finish_reason":"tool_calls","logprobs":null}],
			"usage":{"prompt_tokens":40,"completion_tokens":10,"total_tokens":50}}`,
	}, {
		name:   "reasoning",
		body:   `{"model":"claude","messages":[{"role":"user","content":"2+2?"}],"reasoning_effort":"low"}`,
		answer: `{"output":{"message":{"content":[{"reasoningContent":{"reasoningText":{"text":"Two plus two is four.","signature":"EqQBCkgIARABGAIiQL"}}},{"reasoningContent":{"redactedContent":"EmwKAhgBEgy3va3pzixw"}},{"text":"4"}],"role":"assistant"}},"stopReason":"end_turn","usage":{"inputTokens":50,"outputTokens":30,"totalTokens":80}}`,
		want: `{` + head + `,"choices":[{"index":0,"message":{"role":"assistant","content":"4","refusal":null,"reasoning_content":"Two plus two is four.",
			"thinking_blocks":[{"type":"thinking","thinking":"Two plus two is four.","signature":"EqQBCkgIARABGAIiQL"},{"type":"redacted_thinking","data":"EmwKAhgBEgy3va3pzixw"}]},
			"finish_reason":"stop","logprobs":null}],
			"usage":{"prompt_tokens":50,"completion_tokens":30,"total_tokens":80}}`,
	}, {
		name:   "a guardrail intervened",
		body:   `{"model":"claude","messages":[{"role":"user","content":"Something forbidden"}]}`,
		answer: `{"metrics":{"latencyMs":230},"output":{"message":{"content":[{"text":"Sorry, the model cannot answer this question."}],"role":"assistant"}},"stopReason":"guardrail_intervened","trace":{"guardrail":{"inputAssessment":{}}},"usage":{"inputTokens":9,"outputTokens":0,"totalTokens":9}}`,
		want: `{` + head + `,"choices":[{"index":0,"message":{"role":"assistant","content":"Sorry, the model cannot answer this question.","refusal":null},"finish_reason":"content_filter","logprobs":null}],
			"usage":{"prompt_tokens":9,"total_tokens":9}}`,
	}, {
		name:   "max tokens, no usage",
		body:   `{"model":"claude","messages":[{"role":"user","content":"Count."}],"max_tokens":3}`,
		answer: `{"output":{"message":{"content":[{"text":"1, 2,"}],"role":"assistant"}},"stopReason":"max_tokens"}`,
		want:   `{` + head + `,"choices":[{"index":0,"message":{"role":"assistant","content":"1, 2,","refusal":null},"finish_reason":"length","logprobs":null}]}`,
	}, {
		name:   "json mode: the forced tool's input is the content",
		body:   `{"model":"claude","messages":[{"role":"user","content":"Invent a person."}],"response_format":{"type":"json_schema","json_schema":{"name":"person","schema":{"type":"object"}}}}`,
		answer: `{"output":{"message":{"content":[{"toolUse":{"input":{"name":"Ada","age":36},"name":"json_tool_call","toolUseId":"tooluse_9"}}],"role":"assistant"}},"stopReason":"tool_use","usage":{"inputTokens":60,"outputTokens":20,"totalTokens":80}}`,
		want: `{` + head + `,"choices":[{"index":0,"message":{"role":"assistant","content":"{\"name\":\"Ada\",\"age\":36}","refusal":null},"finish_reason":"stop","logprobs":null}],
			"usage":{"prompt_tokens":60,"completion_tokens":20,"total_tokens":80}}`,
	}} {
		t.Run(tc.name, func(t *testing.T) {
			up := converseUpstream(t, answerJSON(tc.answer))
			a, err := chat(t, openChatter(t, chatDeployment(up, claude, nil)), tc.body)
			if err != nil {
				t.Fatal(err)
			}
			got := completion(t, a)
			var want map[string]any
			if err := json.Unmarshal([]byte(tc.want), &want); err != nil {
				t.Fatal(err)
			}
			want["id"], want["created"] = got["id"], got["created"]
			if id, _ := got["id"].(string); !strings.HasPrefix(id, "chatcmpl-") {
				t.Errorf("id %q", id)
			}
			w, _ := json.Marshal(want)
			g, _ := json.Marshal(got)
			if d := providertest.DiffJSON(string(w), g); d != "" {
				t.Errorf("answer (-want +got):\n%s", d)
			}
		})
	}
}

// TestConverseErrors checks Bedrock's refusals become provider errors the
// router classifies by status: throttles and quotas retried, 5xx retried,
// 4xx returned.
func TestConverseErrors(t *testing.T) {
	for _, tc := range []struct {
		status     int
		kind, msg  string
		wantStatus int
	}{
		{400, "ValidationException", "The model returned the following errors: messages.0.content.0.text: blank", 400},
		{403, "AccessDeniedException", "You don't have access to the model with the specified model ID.", 403},
		{404, "ResourceNotFoundException", "Model use case details have not been submitted for this account.", 404},
		{424, "ModelErrorException", "The model failed to process the request.", 424},
		{408, "ModelTimeoutException", "Model has timed out in processing the request.", 408},
		{429, "ThrottlingException", "Too many requests, please wait before trying again.", 429},
		{400, "ServiceQuotaExceededException", "Too many tokens per day, please wait before trying again.", 429},
		{500, "InternalServerException", "Internal server error", 500},
		{503, "ServiceUnavailableException", "Bedrock is unable to process your request.", 503},
	} {
		for _, stream := range []bool{false, true} {
			up := converseUpstream(t, func(w http.ResponseWriter, r *http.Request) {
				bedrockError(w, tc.status, tc.kind, tc.msg)
			})
			_, err := chat(t, openChatter(t, chatDeployment(up, claude, nil)), fmt.Sprintf(`{"model":"claude","messages":[{"role":"user","content":"Hi"}],"stream":%v}`, stream))
			var pe *models.ProviderError
			if !errors.As(err, &pe) || pe.Status != tc.wantStatus || pe.Code != tc.kind || pe.Message != tc.msg || pe.Provider != "bedrock" {
				t.Errorf("%s (stream %v): %#v", tc.kind, stream, err)
			}
		}
	}

	for name, answer := range map[string]http.HandlerFunc{
		"not JSON":         func(w http.ResponseWriter, r *http.Request) { providertest.WriteJSON(w, 200, `{"output":`) },
		"a bad tool input": answerJSON(`{"output":{"message":{"content":[{"toolUse":{"input":{"a":},"name":"f","toolUseId":"t"}}],"role":"assistant"}},"stopReason":"tool_use"}`),
		"bad usage":        answerJSON(`{"output":{"message":{"content":[{"text":"hi"}],"role":"assistant"}},"stopReason":"end_turn","usage":{"inputTokens":-1}}`),
		"an HTML error page": func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Type", "text/html")
			io.WriteString(w, "<html></html>")
		},
	} {
		up := converseUpstream(t, answer)
		_, err := chat(t, openChatter(t, chatDeployment(up, claude, nil)), `{"model":"claude","messages":[{"role":"user","content":"Hi"}]}`)
		var pe *models.ProviderError
		if !errors.As(err, &pe) || pe.Status != 200 {
			t.Errorf("%s: %v; want a provider error for an unreadable answer", name, err)
		}
	}
}

// TestChatOpen checks what a deployment's settings for chat must be.
func TestChatOpen(t *testing.T) {
	up := converseUpstream(t, answerJSON(textAnswer))
	d := chatDeployment(up, claude, map[string]any{"guardrailConfig": "gr-1"})
	_, err := bedrock.NewProvider(http.DefaultClient, nil).Open(context.Background(), d, embedtest.NoSecrets)
	apiError(t, err, 503, "", "guardrailConfig must be a mapping")

	for model, want := range map[string]string{
		"converse/us.anthropic.claude-3-haiku-20240307-v1:0": "us.anthropic.claude-3-haiku-20240307-v1:0",
		"invoke/anthropic.claude-3-haiku-20240307-v1:0":      "anthropic.claude-3-haiku-20240307-v1:0",
		"anthropic.claude-3-haiku-20240307-v1:0":             "anthropic.claude-3-haiku-20240307-v1:0",
	} {
		if got := bedrock.ModelID(model); got != want {
			t.Errorf("ModelID(%q) = %q, want %q", model, got, want)
		}
	}
}
