package bedrock_test

import (
	"bytes"
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/aws/protocol/eventstream"
	"github.com/aws/aws-sdk-go-v2/service/bedrockruntime"
	"github.com/aws/aws-sdk-go-v2/service/bedrockruntime/types"

	"github.com/sluice-gateway/sluice/pkg/api"
	"github.com/sluice-gateway/sluice/pkg/models"
	"github.com/sluice-gateway/sluice/pkg/providers/bedrock"
	"github.com/sluice-gateway/sluice/pkg/providers/providertest"
)

// esMessage encodes one AWS event-stream message.
func esMessage(headers [][2]string, payload string) []byte {
	var hs eventstream.Headers
	for _, h := range headers {
		hs.Set(h[0], eventstream.StringValue(h[1]))
	}
	var b bytes.Buffer
	if err := eventstream.NewEncoder().Encode(&b, eventstream.Message{Headers: hs, Payload: []byte(payload)}); err != nil {
		panic(err)
	}
	return b.Bytes()
}

// esEvent is a ConverseStream event as Bedrock frames it.
func esEvent(typ, payload string) []byte {
	return esMessage([][2]string{{":event-type", typ}, {":content-type", "application/json"}, {":message-type", "event"}}, payload)
}

// esException is an exception in a ConverseStream.
func esException(typ, payload string) []byte {
	return esMessage([][2]string{{":exception-type", typ}, {":content-type", "application/json"}, {":message-type", "exception"}}, payload)
}

// Events of a real ConverseStream answer: Bedrock pads each payload with a
// "p" member of random length.
var (
	evStart    = esEvent("messageStart", `{"p":"abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRS","role":"assistant"}`)
	evStop     = esEvent("messageStop", `{"p":"abcdefghijklmnopqrstuvwx","stopReason":"end_turn"}`)
	evMetadata = esEvent("metadata", `{"metrics":{"latencyMs":512},"p":"abcdefghijklmnopqrstuvwxyzABCDEF","usage":{"inputTokens":12,"outputTokens":9,"totalTokens":21}}`)
)

func evText(index int, text string) []byte {
	return esEvent("contentBlockDelta", fmt.Sprintf(`{"contentBlockIndex":%d,"delta":{"text":%s},"p":"abcdefghijk"}`, index, strconv.Quote(text)))
}

func evBlockStop(index int) []byte {
	return esEvent("contentBlockStop", fmt.Sprintf(`{"contentBlockIndex":%d,"p":"abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVW"}`, index))
}

func evToolStart(index int, id, name string) []byte {
	return esEvent("contentBlockStart", fmt.Sprintf(`{"contentBlockIndex":%d,"p":"abcdefghijklmnopqrstuvwxyzA","start":{"toolUse":{"name":%q,"toolUseId":%q}}}`, index, name, id))
}

func evToolInput(index int, input string) []byte {
	return esEvent("contentBlockDelta", fmt.Sprintf(`{"contentBlockIndex":%d,"delta":{"toolUse":{"input":%s}},"p":"abcdefghijklmnopqr"}`, index, strconv.Quote(input)))
}

func evMessageStop(reason string) []byte {
	return esEvent("messageStop", fmt.Sprintf(`{"p":"abcdefghijklmnopqrstuvwx","stopReason":%q}`, reason))
}

// textStream is "Hello! How can I help?" as ConverseStream sends it.
func textStream() [][]byte {
	return [][]byte{evStart, evText(0, "Hello"), evText(0, "! How"), evText(0, " can I help?"), evBlockStop(0), evStop, evMetadata}
}

// streamUpstream answers ConverseStream with frames, flushing each; with
// cut, the connection then breaks.
func streamUpstream(t *testing.T, frames [][]byte, cut bool) *providertest.Upstream {
	return converseUpstream(t, func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", bedrock.EventStreamType)
		w.Header().Set("X-Amzn-Requestid", "6bc4b5b4-0000-4000-8000-000000000002")
		w.WriteHeader(http.StatusOK)
		for _, f := range frames {
			w.Write(f)
			w.(http.Flusher).Flush()
		}
		if cut {
			panic(http.ErrAbortHandler)
		}
	})
}

// streamChat streams body from a ConverseStream answering frames and
// returns what each read of the answer gave and the error that ended it.
func streamChat(t *testing.T, frames [][]byte, body string) ([]string, error) {
	t.Helper()
	up := streamUpstream(t, frames, false)
	a, err := chat(t, openChatter(t, chatDeployment(up, claude, nil)), body)
	if err != nil {
		t.Fatal(err)
	}
	defer a.Body.Close()
	if a.ContentLength != -1 {
		t.Errorf("ContentLength %d", a.ContentLength)
	}
	providertest.AssertRequest(t, up.Last(t), providertest.Want{
		Method: http.MethodPost, Path: "/model/us.anthropic.claude-sonnet-4-5-20250929-v1%3A0/converse-stream",
		Header: map[string]string{"Accept": bedrock.EventStreamType, "Content-Type": "application/json"},
	})
	return providertest.Reads(a.Body)
}

const streamBody = `{"model":"claude","messages":[{"role":"user","content":"Hi"}],"stream":true}`

// Expected chunks.
func chunk(choice string) string {
	return `{"id":"*","object":"chat.completion.chunk","created":"*","model":"` + claude + `","choices":[` + choice + `]}`
}

var roleChunk = chunk(`{"index":0,"delta":{"role":"assistant","content":""},"logprobs":null,"finish_reason":null}`)

func textChunk(s string) string {
	return chunk(`{"index":0,"delta":{"content":` + strconv.Quote(s) + `},"logprobs":null,"finish_reason":null}`)
}

func reasoningChunk(s string) string {
	return chunk(`{"index":0,"delta":{"reasoning_content":` + strconv.Quote(s) + `},"logprobs":null,"finish_reason":null}`)
}

func toolStartChunk(index int, id, name string) string {
	return chunk(fmt.Sprintf(`{"index":0,"delta":{"role":"","tool_calls":[{"index":%d,"id":%q,"type":"function","function":{"name":%q,"arguments":""}}]},"logprobs":null,"finish_reason":null}`, index, id, name))
}

func toolArgsChunk(index int, args string) string {
	return chunk(fmt.Sprintf(`{"index":0,"delta":{"tool_calls":[{"index":%d,"function":{"arguments":%s}}]},"logprobs":null,"finish_reason":null}`, index, strconv.Quote(args)))
}

func finishChunk(reason string) string {
	return chunk(`{"index":0,"delta":{},"logprobs":null,"finish_reason":"` + reason + `"}`)
}

func usageChunk(u string) string {
	return `{"id":"*","object":"chat.completion.chunk","created":"*","model":"` + claude + `","choices":[],"usage":` + u + `}`
}

const usage21 = `{"prompt_tokens":12,"completion_tokens":9,"total_tokens":21,"prompt_tokens_details":{"cached_tokens":0},"completion_tokens_details":{"reasoning_tokens":0}}`

// checkStream compares a stream's events with want and checks each read
// carried one provider event's output (n reads).
func checkStream(t *testing.T, reads []string, want []string, n int) {
	t.Helper()
	got := providertest.Data(t, []byte(strings.Join(reads, "")))
	// toolStartChunk's "role":"" stands for no role member.
	for i := range want {
		want[i] = strings.Replace(want[i], `"role":"",`, "", 1)
	}
	if d := providertest.DiffChunks(want, got); d != "" {
		t.Error(d)
	}
	if len(reads) != n {
		t.Errorf("%d reads, want %d (one per provider event):\n%s", len(reads), n, strings.Join(reads, "|\n"))
	}
}

func TestConverseStreamText(t *testing.T) {
	reads, err := streamChat(t, textStream(), streamBody)
	if err != nil {
		t.Fatal(err)
	}
	// contentBlockStop says nothing: its read is messageStop's.
	checkStream(t, reads, []string{
		roleChunk, textChunk("Hello"), textChunk("! How"), textChunk(" can I help?"),
		finishChunk("stop"), usageChunk(usage21), "[DONE]",
	}, 6)
}

func TestConverseStreamToolUse(t *testing.T) {
	reads, err := streamChat(t, [][]byte{
		evStart, evText(0, "Checking."), evBlockStop(0),
		evToolStart(1, "tooluse_kZJMlvQmRJ6eAyJE5GIl7Q", "get_weather"),
		evToolInput(1, ""), evToolInput(1, `{"city": "Pa`), evToolInput(1, `ris"}`), evBlockStop(1),
		evToolStart(2, "tooluse_Wm4KpWl8Q0KZ1a_bz3E1mw", "get_weather"),
		evToolInput(2, `{"city":"Oslo"}`), evBlockStop(2),
		evMessageStop("tool_use"),
		esEvent("metadata", `{"metrics":{"latencyMs":1650},"p":"abc","usage":{"inputTokens":410,"outputTokens":120,"totalTokens":530,"cacheReadInputTokens":100,"cacheWriteInputTokens":0}}`),
	}, `{"model":"claude","messages":[{"role":"user","content":"Weather in Paris and Oslo?"}],"tools":[{"type":"function","function":{"name":"get_weather"}}],"stream":true}`)
	if err != nil {
		t.Fatal(err)
	}
	checkStream(t, reads, []string{
		roleChunk, textChunk("Checking."),
		toolStartChunk(0, "tooluse_kZJMlvQmRJ6eAyJE5GIl7Q", "get_weather"), toolArgsChunk(0, `{"city": "Pa`), toolArgsChunk(0, `ris"}`),
		toolStartChunk(1, "tooluse_Wm4KpWl8Q0KZ1a_bz3E1mw", "get_weather"), toolArgsChunk(1, `{"city":"Oslo"}`),
		finishChunk("tool_calls"),
		usageChunk(`{"prompt_tokens":510,"completion_tokens":120,"total_tokens":630,"prompt_tokens_details":{"cached_tokens":100},"completion_tokens_details":{"reasoning_tokens":0},"cache_read_input_tokens":100}`),
		"[DONE]",
	}, 9)
}

func TestConverseStreamReasoning(t *testing.T) {
	reads, err := streamChat(t, [][]byte{
		evStart,
		esEvent("contentBlockDelta", `{"contentBlockIndex":0,"delta":{"reasoningContent":{"text":"Two plus two"}},"p":"abcd"}`),
		esEvent("contentBlockDelta", `{"contentBlockIndex":0,"delta":{"reasoningContent":{"text":" is \"four\"."}},"p":"abcd"}`),
		esEvent("contentBlockDelta", `{"contentBlockIndex":0,"delta":{"reasoningContent":{"signature":"EqQBCkgIARABGAIiQL"}},"p":"ab"}`),
		evBlockStop(0),
		esEvent("contentBlockDelta", `{"contentBlockIndex":1,"delta":{"reasoningContent":{"redactedContent":"EmwKAhgBEgy3va3pzixw"}},"p":"ab"}`),
		evBlockStop(1),
		evText(2, "4"), evBlockStop(2), evStop, evMetadata,
	}, `{"model":"claude","messages":[{"role":"user","content":"2+2?"}],"reasoning_effort":"low","stream":true}`)
	if err != nil {
		t.Fatal(err)
	}
	checkStream(t, reads, []string{
		roleChunk, reasoningChunk("Two plus two"), reasoningChunk(` is "four".`), textChunk("4"),
		finishChunk("stop"), usageChunk(usage21), "[DONE]",
	}, 6)
}

func TestConverseStreamJSONMode(t *testing.T) {
	reads, err := streamChat(t, [][]byte{
		evStart, evToolStart(0, "tooluse_9", bedrock.ResponseFormatTool),
		evToolInput(0, `{"name": `), evToolInput(0, `"Ada"}`), evBlockStop(0),
		evMessageStop("tool_use"), evMetadata,
	}, `{"model":"claude","messages":[{"role":"user","content":"Invent a person."}],"response_format":{"type":"json_object"},"stream":true}`)
	if err != nil {
		t.Fatal(err)
	}
	// The forced tool's input is the content; the call is no tool call.
	checkStream(t, reads, []string{
		roleChunk, textChunk(`{"name": `), textChunk(`"Ada"}`), finishChunk("stop"), usageChunk(usage21), "[DONE]",
	}, 5)
}

func TestConverseStreamGuardrail(t *testing.T) {
	reads, err := streamChat(t, [][]byte{
		evStart, evText(0, "Sorry, the model cannot answer this question."), evBlockStop(0),
		evMessageStop("guardrail_intervened"),
		esEvent("metadata", `{"metrics":{"latencyMs":230},"p":"ab","trace":{"guardrail":{"inputAssessment":{"gr-1":{"topicPolicy":{"topics":[{"action":"BLOCKED","name":"Forbidden","type":"DENY"}]}}}}},"usage":{"inputTokens":9,"outputTokens":0,"totalTokens":9}}`),
	}, streamBody)
	if err != nil {
		t.Fatal(err)
	}
	checkStream(t, reads, []string{
		roleChunk, textChunk("Sorry, the model cannot answer this question."), finishChunk("content_filter"),
		usageChunk(`{"prompt_tokens":9,"completion_tokens":0,"total_tokens":9,"prompt_tokens_details":{"cached_tokens":0},"completion_tokens_details":{"reasoning_tokens":0}}`), "[DONE]",
	}, 4)
}

// TestConverseStreamWithoutMetadata: a stream whose usage never came ends
// with the finish and [DONE]; the chat endpoint estimates.
func TestConverseStreamWithoutMetadata(t *testing.T) {
	reads, err := streamChat(t, [][]byte{evStart, evText(0, "Hi"), evBlockStop(0), evMessageStop("max_tokens")}, streamBody)
	if err != nil {
		t.Fatal(err)
	}
	checkStream(t, reads, []string{roleChunk, textChunk("Hi"), finishChunk("length"), "[DONE]"}, 4)
}

// TestConverseStreamExceptionFirst: an exception Bedrock sends before any
// event is a provider error the router retries (throttling, the model's
// own 5xx) or returns.
func TestConverseStreamExceptionFirst(t *testing.T) {
	for _, tc := range []struct {
		frame  []byte
		status int
		code   string
	}{
		{esException("throttlingException", `{"message":"Too many requests, please wait before trying again."}`), 429, "throttlingException"},
		{esException("modelStreamErrorException", `{"message":"Model stream error","originalMessage":"Overloaded","originalStatusCode":529}`), 529, "modelStreamErrorException"},
		{esException("internalServerException", `{"message":"Internal server error"}`), 500, "internalServerException"},
		{esException("validationException", `{"message":"Input is too long for requested model."}`), 400, "validationException"},
		{esException("serviceUnavailableException", `{"message":"Bedrock is unable to process your request."}`), 503, "serviceUnavailableException"},
		{esMessage([][2]string{{":message-type", "error"}, {":error-code", "InternalFailure"}, {":error-message", "An internal error occurred."}}, ""), 500, "InternalFailure"},
	} {
		up := streamUpstream(t, [][]byte{tc.frame}, false)
		_, err := chat(t, openChatter(t, chatDeployment(up, claude, nil)), streamBody)
		var pe *models.ProviderError
		if !errors.As(err, &pe) || pe.Status != tc.status || pe.Code != tc.code || pe.Message == "" {
			t.Errorf("%s: %#v; want a provider error %d", tc.code, err, tc.status)
		}
	}
	up := streamUpstream(t, nil, false)
	_, err := chat(t, openChatter(t, chatDeployment(up, claude, nil)), streamBody)
	var pe *models.ProviderError
	if !errors.As(err, &pe) || !strings.Contains(pe.Message, "empty") {
		t.Errorf("an empty stream: %v", err)
	}
	json := converseUpstream(t, answerJSON(textAnswer))
	_, err = chat(t, openChatter(t, chatDeployment(json, claude, nil)), streamBody)
	if !errors.As(err, &pe) || !strings.Contains(pe.Message, "not an event stream") {
		t.Errorf("a JSON answer to a stream: %v", err)
	}
}

// TestConverseStreamFailsMidway: after the first event, a failure ends the
// stream with an error from Read, the chunks before it delivered: an
// exception as an *api.Error (the OpenAI error event), a cut as a plain
// error.
func TestConverseStreamFailsMidway(t *testing.T) {
	head := [][]byte{evStart, evText(0, "Hello")}
	for _, tc := range []struct {
		name   string
		frames [][]byte
		status int
		msg    string
	}{
		{"model stream error", frameList(esException("modelStreamErrorException", `{"message":"Model stream error","originalStatusCode":500}`)), 502, "modelStreamErrorException"},
		{"throttled", frameList(esException("throttlingException", `{"message":"Too many requests"}`)), 429, "rate limiting"},
		{"invalid", frameList(esException("validationException", `{"message":"Output blocked"}`)), 400, "Output blocked"},
		{"unreadable event", frameList(esEvent("contentBlockDelta", `{"contentBlockIndex":0,"delta":{"text":7}}`)), 502, "contentBlockDelta"},
		{"tool input without a tool", frameList(evToolInput(3, "{")), 502, "contentBlockDelta"},
		{"unreadable stop", frameList(esEvent("messageStop", `{"stopReason":1}`)), 502, "messageStop"},
		{"unreadable usage", frameList(evStop, esEvent("metadata", `{"usage":{"inputTokens":"x"}}`)), 502, "metadata"},
		{"a message over the limit", [][]byte{oversize()}, 502, "sluice reads messages of up to"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			reads, err := streamChat(t, append(append([][]byte{}, head...), tc.frames...), streamBody)
			var ae *api.Error
			if !errors.As(err, &ae) || ae.Status != tc.status || !strings.Contains(ae.Message, tc.msg) {
				t.Fatalf("error %#v; want %d saying %q", err, tc.status, tc.msg)
			}
			if got := providertest.Data(t, []byte(strings.Join(reads, ""))); len(got) < 2 {
				t.Errorf("the chunks before the error were not delivered: %q", got)
			}
		})
	}

	for name, frames := range map[string][][]byte{
		"ends before messageStop": {evStart, evText(0, "Hello")},
		"ends inside a message":   {evStart, evText(0, "Hello"), evText(0, "more")[:20]},
		"a bad checksum":          {evStart, evText(0, "Hello"), corrupt(evText(0, "more"))},
	} {
		reads, err := streamChat(t, frames, streamBody)
		var ae *api.Error
		if err == nil || errors.As(err, &ae) || len(reads) < 2 {
			t.Errorf("%s: %v after %d reads; want the stream cut", name, err, len(reads))
		}
	}

	// The connection breaks.
	up := streamUpstream(t, head, true)
	a, err := chat(t, openChatter(t, chatDeployment(up, claude, nil)), streamBody)
	if err != nil {
		t.Fatal(err)
	}
	defer a.Body.Close()
	if reads, err := providertest.Reads(a.Body); err == nil || len(reads) < 2 {
		t.Errorf("a broken connection: %v after %d reads", err, len(reads))
	}
}

func frameList(frames ...[]byte) [][]byte { return frames }

// oversize is a message whose prelude claims more than MaxStreamFrame.
func oversize() []byte {
	f := evText(0, "x")
	binary.BigEndian.PutUint32(f, bedrock.MaxStreamFrame+1)
	return f
}

// corrupt flips a payload byte, which the message checksum catches.
func corrupt(f []byte) []byte {
	f = bytes.Clone(f)
	f[len(f)-6] ^= 0xff
	return f
}

// TestConverseStreamReadBySDK checks the fixtures are ConverseStream
// answers: the official SDK reads them event by event.
func TestConverseStreamReadBySDK(t *testing.T) {
	up := streamUpstream(t, [][]byte{
		evStart, evText(0, "Checking."), evBlockStop(0), evToolStart(1, "tooluse_1", "get_weather"),
		evToolInput(1, `{"city": "Paris"}`), evBlockStop(1),
		esEvent("contentBlockDelta", `{"contentBlockIndex":2,"delta":{"reasoningContent":{"text":"Hm"}},"p":"abcd"}`),
		evMessageStop("tool_use"), evMetadata,
		esException("modelStreamErrorException", `{"message":"Model stream error","originalStatusCode":500}`),
	}, false)
	out, err := sdkClient(up.URL).ConverseStream(context.Background(), &bedrockruntime.ConverseStreamInput{
		ModelId:  aws.String(claude),
		Messages: []types.Message{{Role: types.ConversationRoleUser, Content: []types.ContentBlock{&types.ContentBlockMemberText{Value: "Hi"}}}},
	})
	if err != nil {
		t.Fatal(err)
	}
	s := out.GetStream()
	defer s.Close()
	var got []string
	for ev := range s.Events() {
		switch v := ev.(type) {
		case *types.ConverseStreamOutputMemberMessageStart:
			got = append(got, "start:"+string(v.Value.Role))
		case *types.ConverseStreamOutputMemberContentBlockStart:
			got = append(got, "tool:"+*v.Value.Start.(*types.ContentBlockStartMemberToolUse).Value.Name)
		case *types.ConverseStreamOutputMemberContentBlockDelta:
			switch d := v.Value.Delta.(type) {
			case *types.ContentBlockDeltaMemberText:
				got = append(got, "text:"+d.Value)
			case *types.ContentBlockDeltaMemberToolUse:
				got = append(got, "input:"+*d.Value.Input)
			case *types.ContentBlockDeltaMemberReasoningContent:
				got = append(got, "reasoning:"+d.Value.(*types.ReasoningContentBlockDeltaMemberText).Value)
			}
		case *types.ConverseStreamOutputMemberContentBlockStop:
			got = append(got, "stop")
		case *types.ConverseStreamOutputMemberMessageStop:
			got = append(got, "end:"+string(v.Value.StopReason))
		case *types.ConverseStreamOutputMemberMetadata:
			got = append(got, fmt.Sprintf("usage:%d", *v.Value.Usage.TotalTokens))
		}
	}
	want := "start:assistant text:Checking. stop tool:get_weather input:{\"city\": \"Paris\"} stop reasoning:Hm end:tool_use usage:21"
	if strings.Join(got, " ") != want {
		t.Errorf("the SDK read %q, want %q", strings.Join(got, " "), want)
	}
	var me *types.ModelStreamErrorException
	if !errors.As(s.Err(), &me) {
		t.Errorf("the SDK read the exception as %v", s.Err())
	}
}

// TestConverseStreamLong: a long stream flows event by event.
func TestConverseStreamLong(t *testing.T) {
	frames := [][]byte{evStart}
	for i := range 2000 {
		frames = append(frames, evText(0, "w"+strconv.Itoa(i)+" "))
	}
	frames = append(frames, evBlockStop(0), evStop, evMetadata)
	reads, err := streamChat(t, frames, streamBody)
	if err != nil {
		t.Fatal(err)
	}
	if len(reads) != 2003 {
		t.Errorf("%d reads for 2000 deltas", len(reads))
	}
	var text strings.Builder
	for _, d := range providertest.Data(t, []byte(strings.Join(reads, ""))) {
		if d == "[DONE]" {
			continue
		}
		var c struct {
			Choices []struct {
				Delta struct {
					Content string `json:"content"`
				} `json:"delta"`
			} `json:"choices"`
		}
		if err := json.Unmarshal([]byte(d), &c); err != nil {
			t.Fatal(err)
		}
		for _, ch := range c.Choices {
			text.WriteString(ch.Delta.Content)
		}
	}
	if !strings.HasPrefix(text.String(), "w0 w1 ") || !strings.HasSuffix(text.String(), "w1999 ") {
		t.Errorf("the text came out as %.40q…", text.String())
	}
}
