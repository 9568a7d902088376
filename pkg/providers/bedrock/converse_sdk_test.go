package bedrock_test

import (
	"context"
	"encoding/base64"
	"errors"
	"net/http"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/bedrockruntime"
	"github.com/aws/aws-sdk-go-v2/service/bedrockruntime/document"
	"github.com/aws/aws-sdk-go-v2/service/bedrockruntime/types"

	"github.com/sluice-gateway/sluice/pkg/providers/providertest"
)

// The official SDK is the reference for Converse's wire shapes: these tests
// hold sluice's translation and the fakes' answers to what it sends and
// reads.

// sdkClient is the AWS SDK's Bedrock runtime client, pointed at url.
func sdkClient(url string) *bedrockruntime.Client {
	return bedrockruntime.New(bedrockruntime.Options{
		Region: "us-east-1", BaseEndpoint: aws.String(url), RetryMaxAttempts: 1,
		Credentials: credentials.NewStaticCredentialsProvider(testKeyID, testSecret, ""),
	})
}

// TestConverseRequestMatchesSDK sends the same conversation through sluice
// (as an OpenAI request) and through the SDK (as its types) and compares
// the bodies Bedrock receives; the SDK also reads the fake's answer.
func TestConverseRequestMatchesSDK(t *testing.T) {
	png := []byte("\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR")
	pdf := []byte("%PDF-1.4\n%\xe2\xe3\xcf\xd3\n")
	up := converseUpstream(t, answerJSON(textAnswer))

	in := &bedrockruntime.ConverseInput{
		ModelId: aws.String(claude),
		System: []types.SystemContentBlock{
			&types.SystemContentBlockMemberText{Value: "You are terse."},
			&types.SystemContentBlockMemberCachePoint{Value: types.CachePointBlock{Type: types.CachePointTypeDefault}},
		},
		Messages: []types.Message{
			{Role: types.ConversationRoleUser, Content: []types.ContentBlock{
				&types.ContentBlockMemberText{Value: "What is in the picture?"},
				&types.ContentBlockMemberImage{Value: types.ImageBlock{Format: types.ImageFormatPng, Source: &types.ImageSourceMemberBytes{Value: png}}},
				&types.ContentBlockMemberDocument{Value: types.DocumentBlock{Format: types.DocumentFormatPdf, Name: aws.String("brief"), Source: &types.DocumentSourceMemberBytes{Value: pdf}}},
			}},
			{Role: types.ConversationRoleAssistant, Content: []types.ContentBlock{
				&types.ContentBlockMemberReasoningContent{Value: &types.ReasoningContentBlockMemberReasoningText{Value: types.ReasoningTextBlock{Text: aws.String("Zoom first."), Signature: aws.String("sig-1")}}},
				&types.ContentBlockMemberText{Value: "Let me look."},
				&types.ContentBlockMemberToolUse{Value: types.ToolUseBlock{ToolUseId: aws.String("tooluse_1"), Name: aws.String("zoom"), Input: document.NewLazyDocument(map[string]any{"factor": 2})}},
			}},
			{Role: types.ConversationRoleUser, Content: []types.ContentBlock{
				&types.ContentBlockMemberToolResult{Value: types.ToolResultBlock{ToolUseId: aws.String("tooluse_1"), Content: []types.ToolResultContentBlock{&types.ToolResultContentBlockMemberText{Value: "zoomed"}}}},
			}},
		},
		InferenceConfig: &types.InferenceConfiguration{MaxTokens: aws.Int32(512), Temperature: aws.Float32(0.5), TopP: aws.Float32(0.75), StopSequences: []string{"END"}},
		ToolConfig: &types.ToolConfiguration{
			Tools: []types.Tool{&types.ToolMemberToolSpec{Value: types.ToolSpecification{
				Name: aws.String("zoom"), Description: aws.String("Zoom in"),
				InputSchema: &types.ToolInputSchemaMemberJson{Value: document.NewLazyDocument(map[string]any{"type": "object", "properties": map[string]any{"factor": map[string]any{"type": "number"}}})},
			}}},
			ToolChoice: &types.ToolChoiceMemberTool{Value: types.SpecificToolChoice{Name: aws.String("zoom")}},
		},
		AdditionalModelRequestFields: document.NewLazyDocument(map[string]any{"top_k": 40}),
	}
	out, err := sdkClient(up.URL).Converse(context.Background(), in)
	if err != nil {
		t.Fatalf("the SDK does not read the fake's answer: %v", err)
	}
	if text, ok := out.Output.(*types.ConverseOutputMemberMessage).Value.Content[0].(*types.ContentBlockMemberText); !ok || text.Value != "Hello! How can I help you today?" || out.StopReason != types.StopReasonEndTurn || *out.Usage.TotalTokens != 23 {
		t.Errorf("the SDK read %+v", out)
	}
	sdk := up.Last(t)

	b64 := base64.StdEncoding.EncodeToString
	a, err := chat(t, openChatter(t, chatDeployment(up, claude, nil)), `{"model":"claude","messages":[
		{"role":"system","content":"You are terse.","cache_control":{"type":"ephemeral"}},
		{"role":"user","content":[
			{"type":"text","text":"What is in the picture?"},
			{"type":"image_url","image_url":{"url":"data:image/png;base64,`+b64(png)+`"}},
			{"type":"file","file":{"file_data":"data:application/pdf;base64,`+b64(pdf)+`","filename":"brief.pdf"}}]},
		{"role":"assistant","content":"Let me look.","thinking_blocks":[{"type":"thinking","thinking":"Zoom first.","signature":"sig-1"}],
			"tool_calls":[{"id":"tooluse_1","type":"function","function":{"name":"zoom","arguments":"{\"factor\":2}"}}]},
		{"role":"tool","tool_call_id":"tooluse_1","content":"zoomed"}],
		"max_tokens":512,"temperature":0.5,"top_p":0.75,"stop":"END","top_k":40,
		"tools":[{"type":"function","function":{"name":"zoom","description":"Zoom in","parameters":{"type":"object","properties":{"factor":{"type":"number"}}}}}],
		"tool_choice":{"type":"function","function":{"name":"zoom"}}}`)
	if err != nil {
		t.Fatal(err)
	}
	completion(t, a)
	providertest.AssertRequest(t, up.Last(t), providertest.Want{Method: sdk.Method, Path: sdk.Path, Body: string(sdk.Body)})
	if sdk.Path != claudePath {
		t.Errorf("the SDK sent %s, sluice %s", sdk.Path, claudePath)
	}
}

// TestConverseAnswersReadBySDK checks the fixtures the answer tests replay
// are answers the SDK reads as Converse's.
func TestConverseAnswersReadBySDK(t *testing.T) {
	for _, answer := range []string{
		`{"output":{"message":{"content":[{"reasoningContent":{"reasoningText":{"text":"Two plus two is four.","signature":"EqQBCkgIARABGAIiQL"}}},{"reasoningContent":{"redactedContent":"EmwKAhgBEgy3va3pzixw"}},{"text":"4"}],"role":"assistant"}},"stopReason":"end_turn","usage":{"inputTokens":50,"outputTokens":30,"totalTokens":80}}`,
		`{"metrics":{"latencyMs":1650},"output":{"message":{"content":[{"text":"Let me check both."},{"toolUse":{"input":{"city":"Paris","unit":"celsius"},"name":"get_weather","toolUseId":"tooluse_kZJMlvQmRJ6eAyJE5GIl7Q"}}],"role":"assistant"}},"stopReason":"tool_use","usage":{"inputTokens":410,"outputTokens":120,"totalTokens":530}}`,
		`{"metrics":{"latencyMs":802},"output":{"message":{"content":[{"text":"Hello! "}],"role":"assistant"}},"stopReason":"end_turn","usage":{"cacheReadInputTokens":1024,"cacheWriteInputTokens":300,"inputTokens":12,"outputTokens":9,"totalTokens":1345}}`,
	} {
		up := converseUpstream(t, answerJSON(answer))
		out, err := sdkClient(up.URL).Converse(context.Background(), &bedrockruntime.ConverseInput{
			ModelId:  aws.String(claude),
			Messages: []types.Message{{Role: types.ConversationRoleUser, Content: []types.ContentBlock{&types.ContentBlockMemberText{Value: "Hi"}}}},
		})
		if err != nil || out.Usage == nil || out.StopReason == "" {
			t.Errorf("the SDK does not read %s: %v", answer, err)
		}
	}
	up := converseUpstream(t, func(w http.ResponseWriter, r *http.Request) {
		bedrockError(w, http.StatusTooManyRequests, "ThrottlingException", "Too many requests, please wait before trying again.")
	})
	_, err := sdkClient(up.URL).Converse(context.Background(), &bedrockruntime.ConverseInput{
		ModelId:  aws.String(claude),
		Messages: []types.Message{{Role: types.ConversationRoleUser, Content: []types.ContentBlock{&types.ContentBlockMemberText{Value: "Hi"}}}},
	})
	var te *types.ThrottlingException
	if !errors.As(err, &te) || te.ErrorMessage() != "Too many requests, please wait before trying again." {
		t.Errorf("the SDK reads the fake's error as %v", err)
	}
}
