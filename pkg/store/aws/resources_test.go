package awsstore_test

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"

	"github.com/sluice-gateway/sluice/pkg/store"
	awsstore "github.com/sluice-gateway/sluice/pkg/store/aws"
)

func TestResourcesEnvRoundTrip(t *testing.T) {
	want := awsstore.Resources{
		Table: "t", Bucket: "b", WorkQueueURL: "http://q/work", WorkDLQURL: "http://q/work-dlq",
		TopicARN: "arn:aws:sns:us-east-1:123456789012:events", DeliveryQueueURL: "http://q/delivery",
		DeliveryDLQURL: "http://q/delivery-dlq", KMSKeyID: "arn:aws:kms:us-east-1:123456789012:key/k",
	}
	lines := want.Env()
	if len(lines) != 8 || !strings.HasPrefix(lines[0], "SLUICE_TABLE=") {
		t.Fatalf("Env() = %q", lines)
	}
	env := map[string]string{}
	for _, l := range lines {
		name, value, _ := strings.Cut(l, "=")
		env[name] = value
	}
	getenv := func(k string) string { return env[k] }
	got, err := awsstore.ResourcesFromEnv(getenv)
	if err != nil || got != want {
		t.Fatalf("ResourcesFromEnv() = %+v, %v; want %+v", got, err, want)
	}

	// The work queue's dead-letter queue is optional; the others are named when missing.
	delete(env, "SLUICE_WORK_DLQ_URL")
	env["SLUICE_BUCKET"] = ""
	delete(env, "SLUICE_KMS_KEY_ID")
	_, err = awsstore.ResourcesFromEnv(getenv)
	if err == nil || !strings.Contains(err.Error(), "SLUICE_BUCKET, SLUICE_KMS_KEY_ID") || strings.Contains(err.Error(), "DLQ") {
		t.Fatalf("ResourcesFromEnv() with two missing: %v", err)
	}
	want.WorkDLQURL = ""
	if slices.ContainsFunc(want.Env(), func(l string) bool { return strings.HasPrefix(l, "SLUICE_WORK_DLQ_URL") }) {
		t.Fatalf("Env() lists an empty optional variable: %q", want.Env())
	}
}

func TestOpenNeedsResources(t *testing.T) {
	t.Parallel()
	_, err := awsstore.Open(context.Background(), aws.Config{}, awsstore.Resources{Table: "t"})
	if err == nil || !strings.Contains(err.Error(), "Bucket") {
		t.Fatalf("Open with missing resources: %v", err)
	}
}

// TestUnavailable points a backend at a closed port: every error must wrap
// store.ErrUnavailable, so the gateway answers 503.
func TestUnavailable(t *testing.T) {
	t.Parallel()
	cfg := aws.Config{
		Region:           "us-east-1",
		Credentials:      credentials.NewStaticCredentialsProvider("test", "test", ""),
		BaseEndpoint:     aws.String("http://127.0.0.1:1"),
		RetryMaxAttempts: 1,
	}
	b, err := awsstore.Open(context.Background(), cfg, awsstore.Resources{
		Table: "t", Bucket: "b", WorkQueueURL: "http://127.0.0.1:1/123456789012/w", TopicARN: "arn:aws:sns:us-east-1:123456789012:e",
		DeliveryQueueURL: "http://127.0.0.1:1/123456789012/d", DeliveryDLQURL: "http://127.0.0.1:1/123456789012/dd", KMSKeyID: "k",
	})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	_, getErr := b.Records.Get(ctx, store.Key{PK: "a", SK: "b"})
	_, sizeErr := b.Blobs.Size(ctx, "k")
	_, takeErr := b.Limiter.Take(ctx, "s", time.Minute, store.Take{Counter: "rpm", Limit: 1, N: 1})
	_, sealErr := b.Sealer.Seal(ctx, []byte("x"), nil)
	for what, err := range map[string]error{
		"Ping": b.Ping(ctx), "Get": getErr, "Size": sizeErr, "Take": takeErr, "Seal": sealErr,
		"Send": b.Work.Send(ctx, []byte("x")), "Publish": b.Bus.Publish(ctx, store.Event{Body: []byte("x")}),
	} {
		if !errors.Is(err, store.ErrUnavailable) {
			t.Errorf("%s against a closed port: %v, want ErrUnavailable", what, err)
		}
	}
}
