package awsstore_test

import (
	"errors"
	"strings"
	"sync"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/secretsmanager"
	"github.com/aws/aws-sdk-go-v2/service/ssm"
	ssmtypes "github.com/aws/aws-sdk-go-v2/service/ssm/types"

	"github.com/sluice-gateway/sluice/pkg/store"
	awsstore "github.com/sluice-gateway/sluice/pkg/store/aws"
	"github.com/sluice-gateway/sluice/pkg/store/aws/awstest"
)

func TestSecret(t *testing.T) {
	t.Parallel()
	cfg := awstest.Config(t)
	ctx := testCtx(t)
	sm := secretsmanager.NewFromConfig(cfg)
	p := awstest.Prefix()
	plain, structured := p+"/master-key", p+"/providers"
	for name, value := range map[string]string{
		plain:      "sk-master-0123",
		structured: `{"openai":"sk-openai","anthropic":"sk-ant","port":8443,"nested":{"a":1}}`,
	} {
		if _, err := sm.CreateSecret(ctx, &secretsmanager.CreateSecretInput{Name: aws.String(name), SecretString: aws.String(value)}); err != nil {
			t.Fatal(err)
		}
	}
	s := awsstore.NewSecretStore(cfg)
	for _, tc := range []struct{ name, key, want string }{
		{plain, "", "sk-master-0123"},
		{structured, "openai", "sk-openai"},
		{structured, "anthropic", "sk-ant"},
		{structured, "port", "8443"},
		{structured, "nested", `{"a":1}`},
	} {
		got, err := s.Secret(ctx, tc.name, tc.key)
		if err != nil || got != tc.want {
			t.Errorf("Secret(%s, %q) = %q, %v; want %q", tc.name, tc.key, got, err, tc.want)
		}
	}

	_, err := s.Secret(ctx, p+"/missing", "")
	if !errors.Is(err, store.ErrNotFound) || !strings.Contains(err.Error(), p+"/missing") {
		t.Errorf("missing secret: %v, want ErrNotFound naming it", err)
	}
	_, err = s.Secret(ctx, structured, "gemini")
	if !errors.Is(err, store.ErrNotFound) || !strings.Contains(err.Error(), `"gemini"`) {
		t.Errorf("missing key: %v, want ErrNotFound naming the key", err)
	}
	if _, err = s.Secret(ctx, plain, "field"); err == nil || !strings.Contains(err.Error(), "not a JSON object") {
		t.Errorf("key of a non-JSON secret: %v", err)
	}

	// Read once per process: a changed secret keeps its first value, also
	// for concurrent readers.
	if _, err := sm.PutSecretValue(ctx, &secretsmanager.PutSecretValueInput{SecretId: aws.String(plain), SecretString: aws.String("rotated")}); err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	for range 20 {
		wg.Go(func() {
			if got, err := s.Secret(ctx, plain, ""); err != nil || got != "sk-master-0123" {
				t.Errorf("cached Secret = %q, %v; want the first value", got, err)
			}
		})
	}
	wg.Wait()
	if got, err := awsstore.NewSecretStore(cfg).Secret(ctx, plain, ""); err != nil || got != "rotated" {
		t.Errorf("a new store reads %q, %v; want the current value", got, err)
	}

	// A failed read is not cached.
	late := p + "/late"
	if _, err := s.Secret(ctx, late, ""); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("secret not yet created: %v", err)
	}
	if _, err := sm.CreateSecret(ctx, &secretsmanager.CreateSecretInput{Name: aws.String(late), SecretString: aws.String("now")}); err != nil {
		t.Fatal(err)
	}
	if got, err := s.Secret(ctx, late, ""); err != nil || got != "now" {
		t.Errorf("secret created after a failed read: %q, %v", got, err)
	}
}

func TestFetchConfig(t *testing.T) {
	t.Parallel()
	cfg, res := awstest.Resources(t)
	ctx := testCtx(t)
	yaml := "model_list:\n  - model_name: gpt-4o\n    litellm_params: {model: openai/gpt-4o}\n"
	if _, err := s3Client(cfg).PutObject(ctx, &s3.PutObjectInput{Bucket: &res.Bucket, Key: aws.String("config/sluice.yaml"), Body: strings.NewReader(yaml)}); err != nil {
		t.Fatal(err)
	}
	param := "/" + awstest.Prefix() + "/config"
	if _, err := ssm.NewFromConfig(cfg).PutParameter(ctx, &ssm.PutParameterInput{Name: &param, Value: &yaml, Type: ssmtypes.ParameterTypeSecureString}); err != nil {
		t.Fatal(err)
	}
	for _, loc := range []string{"s3://" + res.Bucket + "/config/sluice.yaml", "ssm:" + param} {
		got, err := awsstore.FetchConfig(ctx, cfg, loc)
		if err != nil || string(got) != yaml {
			t.Errorf("FetchConfig(%s) = %q, %v; want the document", loc, got, err)
		}
	}
	for _, loc := range []string{"s3://" + res.Bucket + "/config/missing.yaml", "ssm:" + param + "-missing"} {
		if _, err := awsstore.FetchConfig(ctx, cfg, loc); !errors.Is(err, store.ErrNotFound) {
			t.Errorf("FetchConfig(%s): %v, want ErrNotFound", loc, err)
		}
	}
	for _, loc := range []string{"s3://", "s3://bucket-only", "s3:///key", "ssm:", "/etc/sluice.yaml", "gs://b/k"} {
		if _, err := awsstore.FetchConfig(ctx, cfg, loc); err == nil {
			t.Errorf("FetchConfig(%q) succeeded", loc)
		}
	}
}
