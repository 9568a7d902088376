package passthrough_test

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	awshttp "github.com/aws/aws-sdk-go-v2/aws/transport/http"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/bedrockruntime"
	brtypes "github.com/aws/aws-sdk-go-v2/service/bedrockruntime/types"
	"github.com/aws/smithy-go"
	"github.com/aws/smithy-go/middleware"
	smithyhttp "github.com/aws/smithy-go/transport/http"

	"github.com/sluice-gateway/sluice/pkg/gateway/gatewaytest"
	"github.com/sluice-gateway/sluice/pkg/store/storetest"
)

// TestBedrockSDKReadsSluiceRefusals: sluice's own refusals on /bedrock are
// in AWS's JSON error shape, so the real bedrockruntime client reports
// them with their type and message (not "UnknownError").
func TestBedrockSDKReadsSluiceRefusals(t *testing.T) {
	w := newWorld(t)
	gatewaytest.Run(t, w.opts, func(t *testing.T, g *gatewaytest.Gateway) {
		team, key := g.TeamKey()
		client := func(key string) *bedrockruntime.Client {
			return bedrockruntime.New(bedrockruntime.Options{
				Region: "us-east-1", BaseEndpoint: aws.String(g.URL + "/bedrock"), RetryMaxAttempts: 1,
				Credentials: credentials.NewStaticCredentialsProvider(clientAKID, clientSecret, ""),
				APIOptions:  []func(*middleware.Stack) error{smithyhttp.AddHeaderValue("X-Sluice-Api-Key", key)},
			})
		}
		converse := func(c *bedrockruntime.Client, model string) error {
			_, err := c.Converse(t.Context(), &bedrockruntime.ConverseInput{
				ModelId: aws.String(model),
				Messages: []brtypes.Message{{Role: brtypes.ConversationRoleUser,
					Content: []brtypes.ContentBlock{&brtypes.ContentBlockMemberText{Value: "Hi"}}}},
			})
			return err
		}
		const model = "us.anthropic.claude-3-5-sonnet-20241022-v2:0"
		check := func(name string, err error, status int, code, message string) {
			t.Helper()
			var apiErr smithy.APIError
			if !errors.As(err, &apiErr) {
				t.Fatalf("%s: not an API error: %v", name, err)
			}
			if apiErr.ErrorCode() != code || !strings.Contains(apiErr.ErrorMessage(), message) {
				t.Errorf("%s: %s %q, want %s with %q", name, apiErr.ErrorCode(), apiErr.ErrorMessage(), code, message)
			}
			var respErr *awshttp.ResponseError
			if !errors.As(err, &respErr) || respErr.HTTPStatusCode() != status {
				t.Errorf("%s: status %v, want %d", name, err, status)
			}
		}

		err := converse(client("sk-not-a-key"), model)
		check("401", err, 401, "UnrecognizedClientException", "API key")

		limited := g.NewKey(team, map[string]any{"models": []string{"other-model"}})
		err = converse(client(limited), model)
		var denied *brtypes.AccessDeniedException
		if !errors.As(err, &denied) {
			t.Errorf("403: not an AccessDeniedException: %v", err)
		}
		check("403", err, 403, "AccessDeniedException", "may not use the model")

		err = converse(client(key), "a/../b")
		var invalid *brtypes.ValidationException
		if !errors.As(err, &invalid) {
			t.Errorf("400: not a ValidationException: %v", err)
		}
		check("400", err, 400, "ValidationException", "canonical form")

		storetest.WithinOneLimitWindow(t, 10*time.Second)
		slow := g.NewKey(team, map[string]any{"rpm_limit": 1})
		if err := converse(client(slow), model); err != nil {
			t.Fatalf("first call within the limit: %v", err)
		}
		err = converse(client(slow), model)
		var throttled *brtypes.ThrottlingException
		if !errors.As(err, &throttled) {
			t.Errorf("429: not a ThrottlingException: %v", err)
		}
		check("429", err, 429, "ThrottlingException", "")

		// Other prefixes keep OpenAI's shape only.
		resp := g.Do("GET", "/anthropic/v1/models", "sk-not-a-key", nil)
		if resp.Status != 401 || resp.Header.Get("X-Amzn-Errortype") != "" {
			t.Errorf("/anthropic 401: %d %v", resp.Status, resp.Header)
		}
		// And on /bedrock the OpenAI members are there too.
		resp = g.Do("GET", "/bedrock/async-invoke", "sk-not-a-key", nil)
		body := resp.JSON(t)
		if _, ok := body["error"].(map[string]any)["code"]; !ok || body["message"] == "" {
			t.Errorf("/bedrock 401 body: %s", resp.Body)
		}
	})
}
