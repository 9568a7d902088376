package gemini

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"regexp"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/sluice-gateway/sluice/pkg/api"
	"github.com/sluice-gateway/sluice/pkg/config"
	"github.com/sluice-gateway/sluice/pkg/models"
	"github.com/sluice-gateway/sluice/pkg/oai"
	"github.com/sluice-gateway/sluice/pkg/providers"
	"github.com/sluice-gateway/sluice/pkg/providers/embedbatch/embedtest"
	"github.com/sluice-gateway/sluice/pkg/providers/providertest"
)

// textAnswer is a Gemini API answer as generateContent sends it.
const textAnswer = `{
  "candidates": [
    {
      "content": {
        "parts": [
          {
            "text": "Paris is the capital of France."
          }
        ],
        "role": "model"
      },
      "finishReason": "STOP",
      "index": 0
    }
  ],
  "usageMetadata": {
    "promptTokenCount": 12,
    "candidatesTokenCount": 8,
    "totalTokenCount": 20,
    "promptTokensDetails": [
      {
        "modality": "TEXT",
        "tokenCount": 12
      }
    ]
  },
  "modelVersion": "gemini-2.5-flash",
  "responseId": "mF3QaKyXJ5Tk7M8Pz9CbqQk"
}
`

// openChat opens a gemini/<model> deployment calling base.
func openChat(t *testing.T, base, model string, params func(*config.Params)) models.Chatter {
	t.Helper()
	p := config.Params{Model: "gemini/" + model, APIBase: base, APIKey: upstreamKey}
	if params != nil {
		params(&p)
	}
	ep, err := New(providers.NewHTTPClient()).Open(context.Background(), config.Deployment{ModelName: "g", Params: p}, embedtest.NoSecrets)
	if err != nil {
		t.Fatal(err)
	}
	c, ok := ep.(models.Chatter)
	if !ok {
		t.Fatal("the gemini endpoint does not serve chat completions")
	}
	return c
}

func chat(t *testing.T, c models.Chatter, body string) (*models.Answer, error) {
	t.Helper()
	req, err := oai.ParseChatRequest([]byte(body))
	if err != nil {
		t.Fatalf("parse %s: %v", body, err)
	}
	return c.Chat(context.Background(), req)
}

// answering is an upstream handler answering every call with body.
func answering(body string) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) { providertest.WriteJSON(w, 200, body) }
}

type chatRequestCase struct {
	name, model, body, want string
}

// chatRequestCases are TestChatRequest's cases.
var chatRequestCases = []chatRequestCase{
	{"conversation and generation config", "gemini-2.5-flash",
		`{"model":"g","messages":[
				{"role":"system","content":"Be brief."},
				{"role":"user","content":"Hi"},
				{"role":"developer","content":[{"type":"text","text":"Answer in French."}]},
				{"role":"user","content":[{"type":"text","text":"What is the capital"},{"type":"text","text":" of France?"}]},
				{"role":"assistant","content":"Paris."},
				{"role":"assistant","content":[{"type":"text","text":"Anything else?"}]},
				{"role":"user","content":"No.","name":"ann"}],
			 "max_tokens":100,"temperature":0.5,"top_p":0.9,"stop":["END"],"n":2,"seed":42,
			 "presence_penalty":0.1,"frequency_penalty":0.2,"top_k":40,
			 "safety_settings":[{"category":"HARM_CATEGORY_HARASSMENT","threshold":"BLOCK_ONLY_HIGH"}]}`,
		`{"contents":[
				{"role":"user","parts":[{"text":"Hi"},{"text":"What is the capital"},{"text":" of France?"}]},
				{"role":"model","parts":[{"text":"Paris."},{"text":"Anything else?"}]},
				{"role":"user","parts":[{"text":"No."}]}],
			  "systemInstruction":{"parts":[{"text":"Be brief."},{"text":"Answer in French."}]},
			  "safetySettings":[{"category":"HARM_CATEGORY_HARASSMENT","threshold":"BLOCK_ONLY_HIGH"}],
			  "generationConfig":{"maxOutputTokens":100,"temperature":0.5,"topP":0.9,"topK":40,"stopSequences":["END"],
				"candidateCount":2,"seed":42,"presencePenalty":0.1,"frequencyPenalty":0.2}}`},
	{"a string stop, n of 1", "gemini-2.5-flash",
		`{"model":"g","messages":[{"role":"user","content":"Hi"}],"stop":"\n\n","n":1,"max_completion_tokens":64,"max_tokens":10}`,
		`{"contents":[{"role":"user","parts":[{"text":"Hi"}]}],"generationConfig":{"maxOutputTokens":64,"stopSequences":["\n\n"]}}`},
	{"json_object", "gemini-2.5-flash",
		`{"model":"g","messages":[{"role":"user","content":"A city as JSON"}],"response_format":{"type":"json_object"}}`,
		`{"contents":[{"role":"user","parts":[{"text":"A city as JSON"}]}],"generationConfig":{"responseMimeType":"application/json"}}`},
	{"json_schema", "gemini-2.5-flash",
		`{"model":"g","messages":[{"role":"user","content":"A city"}],"response_format":{"type":"json_schema","json_schema":{"name":"city","strict":true,
				"schema":{"type":"object","properties":{"name":{"type":"string"},"population":{"type":["integer","null"]}},"required":["name","population"],"additionalProperties":false}}}}`,
		`{"contents":[{"role":"user","parts":[{"text":"A city"}]}],"generationConfig":{"responseMimeType":"application/json",
				"responseJsonSchema":{"type":"object","properties":{"name":{"type":"string"},"population":{"type":["integer","null"]}},"required":["name","population"],"additionalProperties":false}}}`},
	{"text format", "gemini-2.5-flash",
		`{"model":"g","messages":[{"role":"user","content":"Hi"}],"response_format":{"type":"text"}}`,
		`{"contents":[{"role":"user","parts":[{"text":"Hi"}]}]}`},
	{"reasoning_effort on 2.5: a budget", "gemini-2.5-pro",
		`{"model":"g","messages":[{"role":"user","content":"Why?"}],"reasoning_effort":"low"}`,
		`{"contents":[{"role":"user","parts":[{"text":"Why?"}]}],"generationConfig":{"thinkingConfig":{"includeThoughts":true,"thinkingBudget":1024}}}`},
	{"reasoning_effort none on 2.5 flash: no thinking", "gemini-2.5-flash",
		`{"model":"g","messages":[{"role":"user","content":"Why?"}],"reasoning_effort":"none"}`,
		`{"contents":[{"role":"user","parts":[{"text":"Why?"}]}],"generationConfig":{"thinkingConfig":{"includeThoughts":false,"thinkingBudget":0}}}`},
	{"reasoning_effort minimal on 2.5 flash", "gemini-2.5-flash",
		`{"model":"g","messages":[{"role":"user","content":"Why?"}],"reasoning_effort":"minimal"}`,
		`{"contents":[{"role":"user","parts":[{"text":"Why?"}]}],"generationConfig":{"thinkingConfig":{"includeThoughts":true,"thinkingBudget":1}}}`},
	{"reasoning_effort on Gemini 3 Pro: a level", "gemini-3-pro-preview",
		`{"model":"g","messages":[{"role":"user","content":"Why?"}],"reasoning_effort":"medium"}`,
		`{"contents":[{"role":"user","parts":[{"text":"Why?"}]}],"generationConfig":{"thinkingConfig":{"includeThoughts":true,"thinkingLevel":"HIGH"}}}`},
	{"reasoning_effort minimal on Gemini 3 Flash", "gemini-3-flash-preview",
		`{"model":"g","messages":[{"role":"user","content":"Why?"}],"reasoning_effort":"minimal"}`,
		`{"contents":[{"role":"user","parts":[{"text":"Why?"}]}],"generationConfig":{"thinkingConfig":{"includeThoughts":true,"thinkingLevel":"MINIMAL"}}}`},
	{"penalties dropped on Gemini 3", "gemini-3-flash-preview",
		`{"model":"g","messages":[{"role":"user","content":"Hi"}],"presence_penalty":0.5,"frequency_penalty":0.5,"temperature":1,"drop_params":true}`,
		`{"contents":[{"role":"user","parts":[{"text":"Hi"}]}],"generationConfig":{"temperature":1}}`},
	{"tools, auto", "gemini-2.5-flash",
		`{"model":"g","messages":[{"role":"user","content":"Weather in Paris?"}],"tool_choice":"auto","parallel_tool_calls":true,"tools":[
				{"type":"function","function":{"name":"get_weather","description":"Current weather","strict":true,
					"parameters":{"type":"object","properties":{"city":{"type":"string"}},"required":["city"],"additionalProperties":false}}},
				{"type":"function","function":{"name":"get_time"}}]}`,
		`{"contents":[{"role":"user","parts":[{"text":"Weather in Paris?"}]}],
			  "tools":[{"functionDeclarations":[
				{"name":"get_weather","description":"Current weather","parametersJsonSchema":{"type":"object","properties":{"city":{"type":"string"}},"required":["city"],"additionalProperties":false}},
				{"name":"get_time"}]}],
			  "toolConfig":{"functionCallingConfig":{"mode":"AUTO"}}}`},
	{"tools, a named function", "gemini-2.5-flash",
		`{"model":"g","messages":[{"role":"user","content":"Weather?"}],"tool_choice":{"type":"function","function":{"name":"get_weather"}},
			  "tools":[{"type":"function","function":{"name":"get_weather"}},{"type":"function","function":{"name":"get_time"}}]}`,
		`{"contents":[{"role":"user","parts":[{"text":"Weather?"}]}],
			  "tools":[{"functionDeclarations":[{"name":"get_weather"},{"name":"get_time"}]}],
			  "toolConfig":{"functionCallingConfig":{"mode":"ANY","allowedFunctionNames":["get_weather"]}}}`},
	{"tools, required", "gemini-2.5-flash",
		`{"model":"g","messages":[{"role":"user","content":"Weather?"}],"tool_choice":"required","tools":[{"type":"function","function":{"name":"get_weather"}}]}`,
		`{"contents":[{"role":"user","parts":[{"text":"Weather?"}]}],"tools":[{"functionDeclarations":[{"name":"get_weather"}]}],
			  "toolConfig":{"functionCallingConfig":{"mode":"ANY"}}}`},
	{"tools, none", "gemini-2.5-flash",
		`{"model":"g","messages":[{"role":"user","content":"Weather?"}],"tool_choice":"none","tools":[{"type":"function","function":{"name":"get_weather"}}]}`,
		`{"contents":[{"role":"user","parts":[{"text":"Weather?"}]}],"tools":[{"functionDeclarations":[{"name":"get_weather"}]}],
			  "toolConfig":{"functionCallingConfig":{"mode":"NONE"}}}`},
	{"tool calls and results", "gemini-3-pro-preview",
		`{"model":"g","messages":[
				{"role":"user","content":"Weather and time in Paris?"},
				{"role":"assistant","content":null,"tool_calls":[
					{"id":"call_a1b2c3__thought__CiQB0e2Kb3c=","type":"function","function":{"name":"get_weather","arguments":"{\"city\": \"Paris\"}"}},
					{"id":"call_d4e5f6","type":"function","function":{"name":"get_time","arguments":""}}]},
				{"role":"tool","tool_call_id":"call_a1b2c3__thought__CiQB0e2Kb3c=","content":"{\"temp_c\": 18, \"sky\": \"clear\"}"},
				{"role":"tool","tool_call_id":"call_d4e5f6","content":[{"type":"text","text":"12:00"}]},
				{"role":"user","content":"Thanks!"},
				{"role":"function","name":"get_time","content":"12:01"}]}`,
		`{"contents":[
				{"role":"user","parts":[{"text":"Weather and time in Paris?"}]},
				{"role":"model","parts":[
					{"functionCall":{"name":"get_weather","args":{"city":"Paris"}},"thoughtSignature":"CiQB0e2Kb3c="},
					{"functionCall":{"name":"get_time","args":{}}}]},
				{"role":"user","parts":[
					{"functionResponse":{"name":"get_weather","response":{"temp_c":18,"sky":"clear"}}},
					{"functionResponse":{"name":"get_time","response":{"output":"12:00"}}},
					{"text":"Thanks!"},
					{"functionResponse":{"name":"get_time","response":{"output":"12:01"}}}]}]}`},
	{"assistant text with tool calls, reasoning and refusal", "gemini-2.5-flash",
		`{"model":"g","messages":[
				{"role":"user","content":"Go"},
				{"role":"assistant","content":"Looking.","reasoning_content":"I should look.","tool_calls":[{"id":"call_1","type":"function","function":{"name":"look","arguments":"{}"}}]},
				{"role":"tool","tool_call_id":"call_1","content":"[1,2]"},
				{"role":"assistant","content":[{"type":"refusal","refusal":"I can't."}]},
				{"role":"user","content":""},
				{"role":"user","content":"Why?"}]}`,
		`{"contents":[
				{"role":"user","parts":[{"text":"Go"}]},
				{"role":"model","parts":[{"text":"Looking."},{"functionCall":{"name":"look","args":{}}}]},
				{"role":"user","parts":[{"functionResponse":{"name":"look","response":{"output":"[1,2]"}}}]},
				{"role":"model","parts":[{"text":"I can't."}]},
				{"role":"user","parts":[{"text":"Why?"}]}]}`},
	{"media", "gemini-2.5-flash",
		`{"model":"g","messages":[{"role":"user","content":[
				{"type":"text","text":"Describe these."},
				{"type":"image_url","image_url":{"url":"data:image/png;base64,iVBORw0KGgo=","detail":"high"}},
				{"type":"image_url","image_url":{"url":"https://example.com/photos/cat.JPG?size=large"}},
				{"type":"image_url","image_url":{"url":"https://www.youtube.com/watch?v=9hE5-98ZeCg"}},
				{"type":"input_audio","input_audio":{"data":"UklGRiQAAABXQVZF","format":"wav"}},
				{"type":"file","file":{"file_data":"JVBERi0xLjQK","filename":"report.pdf"}},
				{"type":"file","file":{"file_data":"data:text/plain;base64,aGVsbG8="}},
				{"type":"file","file":{"file_id":"https://generativelanguage.googleapis.com/v1beta/files/abc-123"}}]}]}`,
		`{"contents":[{"role":"user","parts":[
				{"text":"Describe these."},
				{"inlineData":{"mimeType":"image/png","data":"iVBORw0KGgo="}},
				{"fileData":{"mimeType":"image/jpeg","fileUri":"https://example.com/photos/cat.JPG?size=large"}},
				{"fileData":{"fileUri":"https://www.youtube.com/watch?v=9hE5-98ZeCg"}},
				{"inlineData":{"mimeType":"audio/wav","data":"UklGRiQAAABXQVZF"}},
				{"inlineData":{"mimeType":"application/pdf","data":"JVBERi0xLjQK"}},
				{"inlineData":{"mimeType":"text/plain","data":"aGVsbG8="}},
				{"fileData":{"fileUri":"https://generativelanguage.googleapis.com/v1beta/files/abc-123"}}]}]}`},
}

func TestChatRequest(t *testing.T) {
	for _, tc := range chatRequestCases {
		t.Run(tc.name, func(t *testing.T) {
			up := providertest.NewUpstream(t, answering(textAnswer))
			ans, err := chat(t, openChat(t, up.URL, tc.model, nil), tc.body)
			if err != nil {
				t.Fatal(err)
			}
			ans.Body.Close()
			providertest.AssertRequest(t, up.Last(t), providertest.Want{
				Method: "POST", Path: "/v1beta/models/" + tc.model + ":generateContent",
				Header: map[string]string{"X-Goog-Api-Key": upstreamKey, "Content-Type": "application/json", "Authorization": ""},
				Body:   tc.want,
			})
		})
	}
}

func TestChatStreamRequest(t *testing.T) {
	up := providertest.NewUpstream(t, func(w http.ResponseWriter, r *http.Request) {
		providertest.WriteSSE(w, providertest.Event{Data: `{"candidates":[{"content":{"parts":[{"text":"Hi"}],"role":"model"},"finishReason":"STOP","index":0}]}`})
	})
	ans, err := chat(t, openChat(t, up.URL, "gemini-2.5-flash", nil), `{"model":"g","messages":[{"role":"user","content":"Hi"}],"stream":true,"stream_options":{"include_usage":true}}`)
	if err != nil {
		t.Fatal(err)
	}
	ans.Body.Close()
	if ans.ContentLength != -1 {
		t.Errorf("ContentLength %d", ans.ContentLength)
	}
	providertest.AssertRequest(t, up.Last(t), providertest.Want{
		Method: "POST", Path: "/v1beta/models/gemini-2.5-flash:streamGenerateContent", Query: "alt=sse",
		Header: map[string]string{"X-Goog-Api-Key": upstreamKey, "Accept": "text/event-stream"},
		Body:   `{"contents":[{"role":"user","parts":[{"text":"Hi"}]}]}`,
	})
}

func TestVertexDialect(t *testing.T) {
	for _, tc := range []struct {
		name, content string
		want          string // the parts, or the field of the 400
	}{
		{"gs:// with a known extension", `[{"type":"image_url","image_url":{"url":"gs://bucket/img/cat.png"}}]`,
			`[{"fileData":{"mimeType":"image/png","fileUri":"gs://bucket/img/cat.png"}}]`},
		{"a gs:// file id", `[{"type":"file","file":{"file_id":"gs://bucket/docs/a.pdf"}}]`,
			`[{"fileData":{"mimeType":"application/pdf","fileUri":"gs://bucket/docs/a.pdf"}}]`},
		{"https with a known extension", `[{"type":"image_url","image_url":{"url":"https://example.com/v.mp4"}}]`,
			`[{"fileData":{"mimeType":"video/mp4","fileUri":"https://example.com/v.mp4"}}]`},
		{"no type Vertex AI can tell", `[{"type":"image_url","image_url":{"url":"https://example.com/image"}}]`,
			`messages[0].content[0].image_url.url`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			req, err := oai.ParseChatRequest([]byte(`{"model":"g","messages":[{"role":"user","content":` + tc.content + `}]}`))
			if err != nil {
				t.Fatal(err)
			}
			g, err := buildRequest(req, "gemini-2.5-flash", VertexAI, providers.DropParams{})
			if strings.HasPrefix(tc.want, "messages") {
				var ae *api.Error
				if !errors.As(err, &ae) || ae.Status != 400 || ae.Param != tc.want {
					t.Fatalf("error %v, want a 400 naming %s", err, tc.want)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			got, _ := json.Marshal(g.Contents[0].Parts)
			if d := providertest.DiffJSON(tc.want, got); d != "" {
				t.Errorf("parts (-want +got):\n%s", d)
			}
		})
	}
}

func TestChatRefused(t *testing.T) {
	const user = `"messages":[{"role":"user","content":"Hi"}]`
	for _, tc := range []struct {
		name, body, param, code string
	}{
		{"logprobs", `{"model":"g",` + user + `,"logprobs":true}`, "logprobs", "unsupported_parameter"},
		{"top_logprobs", `{"model":"g",` + user + `,"top_logprobs":2}`, "top_logprobs", "unsupported_parameter"},
		{"user", `{"model":"g",` + user + `,"user":"u-1"}`, "user", "unsupported_parameter"},
		{"no parallel tool calls", `{"model":"g",` + user + `,"parallel_tool_calls":false}`, "parallel_tool_calls", "unsupported_parameter"},
		{"a custom tool", `{"model":"g",` + user + `,"tools":[{"type":"custom","custom":{"name":"grammar"}}]}`, "tools", "unsupported_parameter"},
		{"allowed_tools", `{"model":"g",` + user + `,"tools":[{"type":"function","function":{"name":"f"}}],"tool_choice":{"type":"allowed_tools","allowed_tools":{"mode":"auto","tools":[]}}}`, "tool_choice", "unsupported_parameter"},
		{"an effort Gemini does not know", `{"model":"g",` + user + `,"reasoning_effort":"xhigh"}`, "reasoning_effort", "unsupported_parameter"},
		{"penalties on Gemini 3", `{"model":"g",` + user + `,"frequency_penalty":0.5}`, "frequency_penalty", "unsupported_parameter"},
		{"a member Gemini does not take", `{"model":"g",` + user + `,"logit_bias":{"50256":-100}}`, "logit_bias", "unsupported_parameter"},
		{"a 64-bit seed", `{"model":"g",` + user + `,"seed":1099511627776}`, "seed", "invalid_value"},
		{"a negative top_k", `{"model":"g",` + user + `,"top_k":-1}`, "top_k", "invalid_value"},
		{"safety_settings not an array", `{"model":"g",` + user + `,"safety_settings":{"category":"x"}}`, "safety_settings", "invalid_value"},
		{"system messages only", `{"model":"g","messages":[{"role":"system","content":"Be brief."}]}`, "messages", "invalid_value"},
		{"gs:// on the Gemini API", `{"model":"g","messages":[{"role":"user","content":[{"type":"image_url","image_url":{"url":"gs://b/cat.png"}}]}]}`, "messages[0].content[0].image_url.url", "invalid_value"},
		{"an http URL", `{"model":"g","messages":[{"role":"user","content":[{"type":"text","text":"x"},{"type":"image_url","image_url":{"url":"http://example.com/cat.png"}}]}]}`, "messages[0].content[1].image_url.url", "invalid_value"},
		{"a data URI not in base64", `{"model":"g","messages":[{"role":"user","content":[{"type":"image_url","image_url":{"url":"data:image/png,abc"}}]}]}`, "messages[0].content[0].image_url.url", "invalid_value"},
		{"a data URI without a type", `{"model":"g","messages":[{"role":"user","content":[{"type":"image_url","image_url":{"url":"data:;base64,abc"}}]}]}`, "messages[0].content[0].image_url.url", "invalid_value"},
		{"an audio format Gemini does not read", `{"model":"g","messages":[{"role":"user","content":[{"type":"input_audio","input_audio":{"data":"AAAA","format":"m4a"}}]}]}`, "messages[0].content[0].input_audio.format", "invalid_value"},
		{"an uploaded file's id", `{"model":"g","messages":[{"role":"user","content":[{"type":"file","file":{"file_id":"file-abc123"}}]}]}`, "messages[0].content[0].file.file_id", "invalid_value"},
		{"file data of no known type", `{"model":"g","messages":[{"role":"user","content":[{"type":"file","file":{"file_data":"AAAA","filename":"notes"}}]}]}`, "messages[0].content[0].file.filename", "invalid_value"},
		{"a tool result for no call", `{"model":"g","messages":[{"role":"user","content":"Hi"},{"role":"tool","tool_call_id":"call_x","content":"1"}]}`, "messages[1].tool_call_id", "invalid_value"},
		{"arguments that are not JSON", `{"model":"g","messages":[{"role":"user","content":"Hi"},{"role":"assistant","tool_calls":[{"id":"c","type":"function","function":{"name":"f","arguments":"{city"}}]}]}`, "messages[1].tool_calls[0].function.arguments", "invalid_value"},
		{"arguments not an object", `{"model":"g","messages":[{"role":"user","content":"Hi"},{"role":"assistant","tool_calls":[{"id":"c","type":"function","function":{"name":"f","arguments":"[1]"}}]}]}`, "messages[1].tool_calls[0].function.arguments", "invalid_value"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			up := providertest.NewUpstream(t, answering(textAnswer))
			_, err := chat(t, openChat(t, up.URL, "gemini-3-pro-preview", nil), tc.body)
			var ae *api.Error
			if !errors.As(err, &ae) || ae.Status != 400 || ae.Param != tc.param || ae.Code != tc.code {
				t.Fatalf("error %#v, want a 400 %s naming %s", err, tc.code, tc.param)
			}
			if up.Count() != 0 {
				t.Error("the request reached the provider")
			}
		})
	}
}

func TestChatDropParams(t *testing.T) {
	const body = `{"model":"g","messages":[{"role":"user","content":"Hi"}],"logprobs":true,"top_logprobs":3,"user":"u-1","parallel_tool_calls":false,
		"logit_bias":{"50256":-100},"reasoning_effort":"xhigh","temperature":0.2,
		"tools":[{"type":"custom","custom":{"name":"grammar"}},{"type":"function","function":{"name":"f"}}]%s}`
	const want = `{"contents":[{"role":"user","parts":[{"text":"Hi"}]}],"tools":[{"functionDeclarations":[{"name":"f"}]}],"generationConfig":{"temperature":0.2}}`
	for _, tc := range []struct {
		name   string
		extra  string
		deploy bool
	}{
		{"the request's drop_params", `,"drop_params":true`, false},
		{"the deployment's drop_params", ``, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			up := providertest.NewUpstream(t, answering(textAnswer))
			c := openChat(t, up.URL, "gemini-2.5-flash", func(p *config.Params) {
				if tc.deploy {
					drop := true
					p.DropParams = &drop
				}
			})
			ans, err := chat(t, c, strings.Replace(body, "%s", tc.extra, 1))
			if err != nil {
				t.Fatal(err)
			}
			ans.Body.Close()
			providertest.AssertRequest(t, up.Last(t), providertest.Want{Body: want})
		})
	}
}

// callID matches the random part of the tool call ids sluice makes.
var callID = regexp.MustCompile(`call_[A-Za-z0-9]{24}`)

// decodeAnswer decodes a chat.completion with its id, created and tool call
// ids' random parts made "*", after checking them.
func decodeAnswer(t *testing.T, body []byte) map[string]any {
	t.Helper()
	var m map[string]any
	if err := json.Unmarshal(callID.ReplaceAll(body, []byte("call_*")), &m); err != nil {
		t.Fatalf("not JSON: %v\n%s", err, body)
	}
	if id, _ := m["id"].(string); !strings.HasPrefix(id, "chatcmpl-") {
		t.Errorf("id %q", m["id"])
	}
	if c, _ := m["created"].(float64); c < 1.7e9 {
		t.Errorf("created %v", m["created"])
	}
	m["id"], m["created"] = "*", "*"
	return m
}

func decodeJSON(t *testing.T, s string) map[string]any {
	t.Helper()
	var m map[string]any
	if err := json.Unmarshal([]byte(s), &m); err != nil {
		t.Fatalf("want is not JSON: %v\n%s", err, s)
	}
	return m
}

func TestChatAnswer(t *testing.T) {
	const head = `"id":"*","object":"chat.completion","created":"*","model":"gemini-2.5-flash"`
	for _, tc := range []struct {
		name, answer, want string
		n                  int
	}{
		{"text", textAnswer,
			`{` + head + `,"choices":[{"index":0,"message":{"role":"assistant","content":"Paris is the capital of France.","refusal":null},"logprobs":null,"finish_reason":"stop"}],
			  "usage":{"prompt_tokens":12,"completion_tokens":8,"total_tokens":20,"prompt_tokens_details":{"cached_tokens":0},"completion_tokens_details":{"reasoning_tokens":0}}}`, 1},
		{"thoughts and cached tokens", `{"candidates":[{"content":{"parts":[
				{"text":"**Recalling geography**\nThe user wants France's capital.","thought":true},
				{"text":"Paris","thoughtSignature":"CiQB0e2Kb3c="},{"text":" is the capital."}],"role":"model"},"finishReason":"STOP","index":0}],
			 "usageMetadata":{"promptTokenCount":2000,"candidatesTokenCount":6,"totalTokenCount":2046,"cachedContentTokenCount":1536,"thoughtsTokenCount":40},
			 "modelVersion":"gemini-2.5-flash","responseId":"x1"}`,
			`{` + head + `,"choices":[{"index":0,"message":{"role":"assistant","content":"Paris is the capital.","refusal":null,
				"reasoning_content":"**Recalling geography**\nThe user wants France's capital."},"logprobs":null,"finish_reason":"stop"}],
			  "usage":{"prompt_tokens":2000,"completion_tokens":46,"total_tokens":2046,"prompt_tokens_details":{"cached_tokens":1536},"completion_tokens_details":{"reasoning_tokens":40}}}`, 1},
		{"parallel function calls", `{"candidates":[{"content":{"role":"model","parts":[
				{"functionCall":{"name":"get_weather","args":{"city":"Paris","units":"celsius"}},"thoughtSignature":"CiQB0e2Kb3c="},
				{"functionCall":{"name":"get_time","args":{}}},
				{"functionCall":{"name":"ping"}}]},"finishReason":"STOP","avgLogprobs":-0.03}],
			 "usageMetadata":{"promptTokenCount":50,"candidatesTokenCount":20,"totalTokenCount":96,"thoughtsTokenCount":20,"toolUsePromptTokenCount":6,"trafficType":"ON_DEMAND"},
			 "modelVersion":"gemini-2.5-flash","createTime":"2025-09-20T10:00:00.000000Z","responseId":"x2"}`,
			`{` + head + `,"choices":[{"index":0,"message":{"role":"assistant","content":null,"refusal":null,"tool_calls":[
				{"id":"call_*__thought__CiQB0e2Kb3c=","type":"function","function":{"name":"get_weather","arguments":"{\"city\":\"Paris\",\"units\":\"celsius\"}"}},
				{"id":"call_*","type":"function","function":{"name":"get_time","arguments":"{}"}},
				{"id":"call_*","type":"function","function":{"name":"ping","arguments":"{}"}}]},"logprobs":null,"finish_reason":"tool_calls"}],
			  "usage":{"prompt_tokens":56,"completion_tokens":40,"total_tokens":96,"prompt_tokens_details":{"cached_tokens":0},"completion_tokens_details":{"reasoning_tokens":20}}}`, 1},
		{"cut at max tokens", `{"candidates":[{"content":{"parts":[{"text":"Once upon"}],"role":"model"},"finishReason":"MAX_TOKENS","index":0}],"usageMetadata":{"promptTokenCount":3,"candidatesTokenCount":2,"totalTokenCount":5}}`,
			`{` + head + `,"choices":[{"index":0,"message":{"role":"assistant","content":"Once upon","refusal":null},"logprobs":null,"finish_reason":"length"}],
			  "usage":{"prompt_tokens":3,"completion_tokens":2,"total_tokens":5,"prompt_tokens_details":{"cached_tokens":0},"completion_tokens_details":{"reasoning_tokens":0}}}`, 1},
		{"an answer stopped by safety", `{"candidates":[{"finishReason":"SAFETY","index":0,"safetyRatings":[{"category":"HARM_CATEGORY_DANGEROUS_CONTENT","probability":"HIGH","blocked":true}]}],"usageMetadata":{"promptTokenCount":9,"totalTokenCount":9}}`,
			`{` + head + `,"choices":[{"index":0,"message":{"role":"assistant","content":null,"refusal":null},"logprobs":null,"finish_reason":"content_filter"}],
			  "usage":{"prompt_tokens":9,"completion_tokens":0,"total_tokens":9,"prompt_tokens_details":{"cached_tokens":0},"completion_tokens_details":{"reasoning_tokens":0}}}`, 1},
		{"a blocked prompt", `{"promptFeedback":{"blockReason":"PROHIBITED_CONTENT","safetyRatings":[{"category":"HARM_CATEGORY_HATE_SPEECH","probability":"HIGH"}]},"usageMetadata":{"promptTokenCount":7,"totalTokenCount":7},"modelVersion":"gemini-2.5-flash"}`,
			`{` + head + `,"choices":[
				{"index":0,"message":{"role":"assistant","content":null,"refusal":"Gemini blocked the prompt (PROHIBITED_CONTENT)."},"logprobs":null,"finish_reason":"content_filter"},
				{"index":1,"message":{"role":"assistant","content":null,"refusal":"Gemini blocked the prompt (PROHIBITED_CONTENT)."},"logprobs":null,"finish_reason":"content_filter"}],
			  "usage":{"prompt_tokens":7,"completion_tokens":0,"total_tokens":7,"prompt_tokens_details":{"cached_tokens":0},"completion_tokens_details":{"reasoning_tokens":0}}}`, 2},
		{"two candidates out of order, no usage", `{"candidates":[
				{"content":{"parts":[{"text":"B"}],"role":"model"},"finishReason":"STOP","index":1},
				{"content":{"parts":[{"text":"A"}],"role":"model"},"finishReason":"RECITATION"}]}`,
			`{` + head + `,"choices":[
				{"index":0,"message":{"role":"assistant","content":"A","refusal":null},"logprobs":null,"finish_reason":"content_filter"},
				{"index":1,"message":{"role":"assistant","content":"B","refusal":null},"logprobs":null,"finish_reason":"stop"}]}`, 2},
		{"an empty answer", `{"candidates":[{"content":{"role":"model"},"finishReason":"STOP"}],"usageMetadata":{"promptTokenCount":3,"totalTokenCount":3}}`,
			`{` + head + `,"choices":[{"index":0,"message":{"role":"assistant","content":"","refusal":null},"logprobs":null,"finish_reason":"stop"}],
			  "usage":{"prompt_tokens":3,"completion_tokens":0,"total_tokens":3,"prompt_tokens_details":{"cached_tokens":0},"completion_tokens_details":{"reasoning_tokens":0}}}`, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			up := providertest.NewUpstream(t, answering(tc.answer))
			body := `{"model":"g","messages":[{"role":"user","content":"Hi"}]}`
			if tc.n > 1 {
				body = `{"model":"g","messages":[{"role":"user","content":"Hi"}],"n":2}`
			}
			ans, err := chat(t, openChat(t, up.URL, "gemini-2.5-flash", nil), body)
			if err != nil {
				t.Fatal(err)
			}
			defer ans.Body.Close()
			got, err := io.ReadAll(ans.Body)
			if err != nil {
				t.Fatal(err)
			}
			if ans.ContentLength != int64(len(got)) {
				t.Errorf("ContentLength %d for %d bytes", ans.ContentLength, len(got))
			}
			if d := cmp.Diff(decodeJSON(t, tc.want), decodeAnswer(t, got)); d != "" {
				t.Errorf("answer (-want +got):\n%s", d)
			}
			checkAnswerCarries(t, ans, got)
		})
	}
}

func TestChatUnreadableAnswer(t *testing.T) {
	for _, answer := range []string{
		`{"candidates":[]}`,
		`{"candidates":{}}`,
		`{"candidates":[{"content":{"parts":[{"functionCall":{"args":{}}}]},"finishReason":"STOP"}]}`,
		`{"candidates":[{"index":500,"finishReason":"STOP"}]}`,
		`{"candidates":[{"finishReason":"STOP"},{"index":0,"finishReason":"STOP"}]}`,
		`{"candidates":[{"content":{"parts":[{"text":7}]}}]}`,
		`{"usageMetadata":{"promptTokenCount":-1},"candidates":[{"finishReason":"STOP"}]}`,
		`[1,2]`,
	} {
		up := providertest.NewUpstream(t, answering(answer))
		_, err := chat(t, openChat(t, up.URL, "gemini-2.5-flash", nil), `{"model":"g","messages":[{"role":"user","content":"Hi"}]}`)
		var pe *models.ProviderError
		if !errors.As(err, &pe) || pe.Status != 200 || !strings.HasPrefix(pe.Message, "unreadable answer") {
			t.Errorf("%s: error %v, want an unreadable answer", answer, err)
		}
	}
}

func TestChatProviderErrors(t *testing.T) {
	for _, tc := range []struct {
		name        string
		status      int
		contentType string
		body        string
		stream      bool
		want        models.ProviderError
	}{
		{"quota", 429, "application/json; charset=UTF-8",
			`{"error":{"code":429,"message":"You exceeded your current quota, please check your plan and billing details.","status":"RESOURCE_EXHAUSTED","details":[{"@type":"type.googleapis.com/google.rpc.QuotaFailure"}]}}`, false,
			models.ProviderError{Provider: "gemini", Status: 429, Code: "RESOURCE_EXHAUSTED", Message: "You exceeded your current quota, please check your plan and billing details."}},
		{"a bad request", 400, "application/json; charset=UTF-8",
			`{"error":{"code":400,"message":"* GenerateContentRequest.contents: contents is not specified\n","status":"INVALID_ARGUMENT"}}`, false,
			models.ProviderError{Provider: "gemini", Status: 400, Code: "INVALID_ARGUMENT", Message: "* GenerateContentRequest.contents: contents is not specified\n"}},
		{"a refused key", 400, "application/json; charset=UTF-8",
			`{"error":{"code":400,"message":"API key expired. Please renew the API key.","status":"INVALID_ARGUMENT","details":[{"@type":"type.googleapis.com/google.rpc.ErrorInfo","reason":"API_KEY_INVALID","domain":"googleapis.com"}]}}`, false,
			models.ProviderError{Provider: "gemini", Status: 401, Code: "INVALID_ARGUMENT", Message: "API key expired. Please renew the API key."}},
		{"overloaded, streamed", 503, "application/json; charset=UTF-8",
			`{"error":{"code":503,"message":"The model is overloaded. Please try again later.","status":"UNAVAILABLE"}}`, true,
			models.ProviderError{Provider: "gemini", Status: 503, Code: "UNAVAILABLE", Message: "The model is overloaded. Please try again later."}},
		{"an error list", 404, "application/json; charset=UTF-8",
			`[{"error":{"code":404,"message":"models/gemini-9 is not found for API version v1beta","status":"NOT_FOUND"}}]`, true,
			models.ProviderError{Provider: "gemini", Status: 404, Code: "NOT_FOUND", Message: "models/gemini-9 is not found for API version v1beta"}},
		{"an HTML page", 502, "text/html", `<html><body>Bad Gateway</body></html>`, false,
			models.ProviderError{Provider: "gemini", Status: 502, Message: "Bad Gateway"}},
		{"a stream that is JSON", 200, "application/json", textAnswer, true,
			models.ProviderError{Provider: "gemini", Status: 200, Message: `answered a streamed call with Content-Type "application/json", not an event stream`}},
		{"an answer that is not JSON", 200, "text/plain", "hello", false,
			models.ProviderError{Provider: "gemini", Status: 200, Message: `answered with Content-Type "text/plain", not JSON`}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			up := providertest.NewUpstream(t, func(w http.ResponseWriter, r *http.Request) {
				w.Header().Set("Content-Type", tc.contentType)
				w.Header().Set("Retry-After", "7")
				w.WriteHeader(tc.status)
				io.WriteString(w, tc.body)
			})
			body := `{"model":"g","messages":[{"role":"user","content":"Hi"}]}`
			if tc.stream {
				body = `{"model":"g","messages":[{"role":"user","content":"Hi"}],"stream":true}`
			}
			_, err := chat(t, openChat(t, up.URL, "gemini-2.5-flash", nil), body)
			var pe *models.ProviderError
			if !errors.As(err, &pe) {
				t.Fatalf("error %v, want a *models.ProviderError", err)
			}
			want := tc.want
			if tc.status >= 400 {
				want.RetryAfter = 7e9
			}
			if d := cmp.Diff(want, *pe); d != "" {
				t.Errorf("error (-want +got):\n%s", d)
			}
		})
	}
}

func TestChatTransportError(t *testing.T) {
	up := providertest.NewUpstream(t, answering(textAnswer))
	c := openChat(t, up.URL, "gemini-2.5-flash", nil)
	up.Close()
	_, err := chat(t, c, `{"model":"g","messages":[{"role":"user","content":"Hi"}]}`)
	var pe *models.ProviderError
	var ae *api.Error
	if err == nil || errors.As(err, &pe) || errors.As(err, &ae) || !strings.Contains(err.Error(), "gemini /v1beta/models/gemini-2.5-flash:generateContent") {
		t.Errorf("error %v, want the transport's, wrapped", err)
	}
}

// checkAnswerCarries checks that a translated answer carries the usage and
// the first finish reason its body has (the chat meter reads them there,
// not from the body).
func checkAnswerCarries(t *testing.T, ans *models.Answer, body []byte) {
	t.Helper()
	var cc struct {
		Usage   *oai.Usage `json:"usage"`
		Choices []struct {
			FinishReason string `json:"finish_reason"`
		} `json:"choices"`
	}
	if err := json.Unmarshal(body, &cc); err != nil {
		t.Fatal(err)
	}
	if d := cmp.Diff(cc.Usage, ans.Usage); d != "" {
		t.Errorf("Answer.Usage (-body +carried):\n%s", d)
	}
	if ans.FinishReason != cc.Choices[0].FinishReason {
		t.Errorf("Answer.FinishReason %q, the body's %q", ans.FinishReason, cc.Choices[0].FinishReason)
	}
}
