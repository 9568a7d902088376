package awsstore_test

import (
	"context"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/kms"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/sns"
	"github.com/aws/aws-sdk-go-v2/service/sqs"

	"github.com/sluice-gateway/sluice/pkg/store"
	awsstore "github.com/sluice-gateway/sluice/pkg/store/aws"
	"github.com/sluice-gateway/sluice/pkg/store/aws/awstest"
	"github.com/sluice-gateway/sluice/pkg/store/storetest"
)

// The conformance suites, each instance on resources of its own. Cleanup is
// left to the emulator's end: the resources are small, and deleting them
// one by one would double the calls.

// provisionCtx bounds the creation of one test resource.
func provisionCtx(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	return ctx
}

func newTable(t *testing.T, cfg aws.Config) string {
	name := awstest.Prefix() + "-records"
	if err := awsstore.CreateTable(provisionCtx(t), cfg, name); err != nil {
		t.Fatal(err)
	}
	return name
}

func s3Client(cfg aws.Config) *s3.Client {
	return s3.NewFromConfig(cfg, func(o *s3.Options) { o.UsePathStyle = true })
}

func TestRecords(t *testing.T) {
	cfg := awstest.Config(t)
	storetest.Records(t, func(t *testing.T) store.Records {
		return awsstore.NewRecords(dynamodb.NewFromConfig(cfg), newTable(t, cfg))
	})
}

// TestBlobs must not run in parallel with anything: its streaming check
// measures the heap. (The suites run one after the other anyway: their
// subtests are parallel, and moto slows down under more load than that.)
func TestBlobs(t *testing.T) {
	cfg := awstest.Config(t)
	storetest.Blobs(t, func(t *testing.T) store.Blobs {
		bucket := awstest.Prefix() + "-files"
		if err := awsstore.CreateBucket(provisionCtx(t), cfg, bucket); err != nil {
			t.Fatal(err)
		}
		return awsstore.NewBlobs(s3Client(cfg), bucket, "some/prefix/")
	})
}

func TestQueue(t *testing.T) {
	cfg := awstest.Config(t)
	client := sqs.NewFromConfig(cfg)
	storetest.Queue(t, func(t *testing.T, qc storetest.QueueConfig) (store.Queue, store.Queue) {
		url, dlq, err := awsstore.CreateQueue(provisionCtx(t), cfg, awstest.Prefix()+"-work", qc.Visibility, qc.MaxReceives)
		if err != nil {
			t.Fatal(err)
		}
		return awsstore.NewQueue(client, url), awsstore.NewQueue(client, dlq)
	})
}

func TestBus(t *testing.T) {
	cfg := awstest.Config(t)
	storetest.Bus(t, func(t *testing.T) (store.Bus, store.Queue) {
		topic, queue, err := awsstore.CreateBus(provisionCtx(t), cfg, awstest.Prefix()+"-events")
		if err != nil {
			t.Fatal(err)
		}
		return awsstore.NewBus(sns.NewFromConfig(cfg), topic), awsstore.NewQueue(sqs.NewFromConfig(cfg), queue)
	})
}

func TestLimiter(t *testing.T) {
	cfg := awstest.Config(t)
	storetest.Limiter(t, func(t *testing.T) store.Limiter {
		return awsstore.NewLimiter(dynamodb.NewFromConfig(cfg), newTable(t, cfg))
	})
}

func TestSealer(t *testing.T) {
	cfg := awstest.Config(t)
	storetest.Sealer(t, func(t *testing.T) store.Sealer {
		key, err := awsstore.CreateKey(provisionCtx(t), cfg, "alias/"+awstest.Prefix())
		if err != nil {
			t.Fatal(err)
		}
		return awsstore.NewSealer(kms.NewFromConfig(cfg), key)
	})
}
