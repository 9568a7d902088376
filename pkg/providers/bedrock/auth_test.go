package bedrock_test

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"

	"github.com/sluice-gateway/sluice/pkg/models"
	"github.com/sluice-gateway/sluice/pkg/providers/bedrock"
	"github.com/sluice-gateway/sluice/pkg/providers/bedrock/bedrocktest"
)

func env(m map[string]string) func(string) string { return func(k string) string { return m[k] } }

func TestResolvePrecedence(t *testing.T) {
	chain := func(ctx context.Context, region string) (aws.CredentialsProvider, string, error) {
		return credentials.NewStaticCredentialsProvider("AKIDCHAIN", "chain-secret", ""), "eu-west-3", nil
	}
	failing := func(ctx context.Context, region string) (aws.CredentialsProvider, string, error) {
		return nil, "", errors.New("no profile")
	}
	for _, tc := range []struct {
		name       string
		keys       bedrock.Keys
		env        map[string]string
		chain      bedrock.DefaultChain
		wantKey    string
		wantRegion string
		wantErr    bool
	}{
		{name: "config keys win", keys: bedrock.Keys{Region: "us-west-2", AccessKeyID: "AKIDCONF", SecretAccessKey: "s"},
			env: map[string]string{"AWS_ACCESS_KEY_ID": "AKIDENV", "AWS_SECRET_ACCESS_KEY": "e", "AWS_REGION": "us-east-1"}, chain: chain,
			wantKey: "AKIDCONF", wantRegion: "us-west-2"},
		{name: "environment next", env: map[string]string{"AWS_ACCESS_KEY_ID": "AKIDENV", "AWS_SECRET_ACCESS_KEY": "e", "AWS_DEFAULT_REGION": "ap-south-1"},
			chain: chain, wantKey: "AKIDENV", wantRegion: "ap-south-1"},
		{name: "AWS_REGION before AWS_DEFAULT_REGION", env: map[string]string{"AWS_ACCESS_KEY_ID": "A", "AWS_SECRET_ACCESS_KEY": "e", "AWS_REGION": "us-east-2", "AWS_DEFAULT_REGION": "ap-south-1"},
			wantKey: "A", wantRegion: "us-east-2"},
		{name: "chain last, with its region", chain: chain, wantKey: "AKIDCHAIN", wantRegion: "eu-west-3"},
		{name: "chain with configured region", keys: bedrock.Keys{Region: "us-west-2"}, chain: chain, wantKey: "AKIDCHAIN", wantRegion: "us-west-2"},
		{name: "nothing at all", wantErr: true},
		{name: "chain fails", chain: failing, wantErr: true},
		{name: "half a key pair", keys: bedrock.Keys{Region: "us-east-1", AccessKeyID: "A"}, wantErr: true},
		{name: "no region", keys: bedrock.Keys{AccessKeyID: "A", SecretAccessKey: "s"}, wantErr: true},
		{name: "region that would re-aim the host", keys: bedrock.Keys{Region: "evil.example.com/x", AccessKeyID: "A", SecretAccessKey: "s"}, wantErr: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			a, err := bedrock.Resolve(context.Background(), tc.keys, models.Resolver{Getenv: env(tc.env)}, tc.chain)
			if tc.wantErr {
				if !errors.Is(err, bedrock.ErrNoCredentials) {
					t.Fatalf("err = %v, want ErrNoCredentials", err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if a.Region != tc.wantRegion {
				t.Errorf("region %q, want %q", a.Region, tc.wantRegion)
			}
			req := httptest.NewRequest("POST", "https://bedrock-runtime.x.amazonaws.com/model/m/invoke", nil)
			req.ContentLength = 0
			if err := a.Sign(context.Background(), req, nil); err != nil {
				t.Fatal(err)
			}
			sig, err := bedrocktest.ParseAuthorization(req.Header.Get("Authorization"))
			if err != nil || sig.AccessKeyID != tc.wantKey || sig.Region != tc.wantRegion || sig.Service != "bedrock" {
				t.Errorf("signature %+v %v", sig, err)
			}
		})
	}
}

func TestSignIsVerifiableOverTheExactBytes(t *testing.T) {
	a, err := bedrock.NewAuth(context.Background(), bedrock.Keys{Region: "us-east-1", AccessKeyID: "AKIDTEST", SecretAccessKey: "secret", SessionToken: "session"}, bedrock.Keys{}, nil)
	if err != nil {
		t.Fatal(err)
	}
	secret := func(id string) (string, string, bool) { return "secret", "session", id == "AKIDTEST" }
	var verifyErr error
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		_, verifyErr = bedrocktest.Verify(r, body, secret)
	}))
	defer srv.Close()

	body := []byte(`{"messages":[{"role":"user","content":[{"text":"hi"}]}]}`)
	arn := "arn:aws:bedrock:us-east-1:123456789012:inference-profile/us.anthropic.claude-3-5-sonnet-20241022-v2:0"
	req, _ := http.NewRequest("POST", srv.URL+bedrock.ModelPath(arn, "converse")+"?b=2&a=1", bytes.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	if err := a.Sign(context.Background(), req, body); err != nil {
		t.Fatal(err)
	}
	// Unsigned headers added afterwards do not disturb the signature.
	req.Header.Set("Accept", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if verifyErr != nil {
		t.Fatal(verifyErr)
	}

	// A body changed after signing is caught.
	req2, _ := http.NewRequest("POST", srv.URL+"/model/m/invoke", bytes.NewReader([]byte("changed")))
	if err := a.Sign(context.Background(), req2, []byte("original")); err != nil {
		t.Fatal(err)
	}
	req2.ContentLength = int64(len("changed"))
	resp, err = http.DefaultClient.Do(req2)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if verifyErr == nil || !strings.Contains(verifyErr.Error(), "mismatch") {
		t.Fatalf("tampered body verified: %v", verifyErr)
	}
}

func TestChainRetrieveFailureIsNoCredentials(t *testing.T) {
	chain := func(ctx context.Context, region string) (aws.CredentialsProvider, string, error) {
		return aws.CredentialsProviderFunc(func(context.Context) (aws.Credentials, error) {
			return aws.Credentials{}, errors.New("no EC2 IMDS role found")
		}), "us-east-1", nil
	}
	a, err := bedrock.NewAuth(context.Background(), bedrock.Keys{}, bedrock.Keys{}, chain)
	if err != nil {
		t.Fatal(err)
	}
	req := httptest.NewRequest("POST", "https://h/x", nil)
	if err := a.Sign(context.Background(), req, nil); !errors.Is(err, bedrock.ErrNoCredentials) {
		t.Fatalf("err = %v", err)
	}
}

func TestEscapeModelID(t *testing.T) {
	for id, want := range map[string]string{
		"anthropic.claude-3-5-sonnet-20241022-v2:0":                                   "anthropic.claude-3-5-sonnet-20241022-v2%3A0",
		"us.amazon.nova-pro-v1:0":                                                     "us.amazon.nova-pro-v1%3A0",
		"arn:aws:bedrock:us-east-1:123456789012:application-inference-profile/abc123": "arn%3Aaws%3Abedrock%3Aus-east-1%3A123456789012%3Aapplication-inference-profile%2Fabc123",
		"amazon.titan-embed-text-v2:0":                                                "amazon.titan-embed-text-v2%3A0",
	} {
		if got := bedrock.EscapeModelID(id); got != want {
			t.Errorf("EscapeModelID(%q) = %q, want %q", id, got, want)
		}
	}
	if got := bedrock.ModelPath("m:0", "invoke-with-response-stream"); got != "/model/m%3A0/invoke-with-response-stream" {
		t.Errorf("ModelPath = %q", got)
	}
	if bedrock.RuntimeEndpoint("us-east-1") != "https://bedrock-runtime.us-east-1.amazonaws.com" ||
		bedrock.AgentRuntimeEndpoint("eu-west-1") != "https://bedrock-agent-runtime.eu-west-1.amazonaws.com" {
		t.Error("endpoints")
	}
}
