package awsstore

import (
	"context"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
)

// Single-resource provisioning for the conformance tests, which need a fresh
// table, queue or topic per suite instance rather than a whole deployment.

func CreateTable(ctx context.Context, cfg aws.Config, name string) error {
	return provisioner{clients: newClients(cfg), region: cfg.Region}.table(ctx, name)
}

func CreateBucket(ctx context.Context, cfg aws.Config, name string) error {
	return provisioner{clients: newClients(cfg), region: cfg.Region}.bucket(ctx, name)
}

func CreateQueue(ctx context.Context, cfg aws.Config, name string, visibility time.Duration, maxReceives int) (url, dlqURL string, err error) {
	return provisioner{clients: newClients(cfg), region: cfg.Region}.queueWithDLQ(ctx, name, visibility, maxReceives)
}

// CreateBus creates a topic with one subscribed queue.
func CreateBus(ctx context.Context, cfg aws.Config, name string) (topicARN, queueURL string, err error) {
	p := provisioner{clients: newClients(cfg), region: cfg.Region}
	if topicARN, err = p.topic(ctx, name); err != nil {
		return "", "", err
	}
	if queueURL, _, err = p.queueWithDLQ(ctx, name+"-sub", 30*time.Second, MaxReceives); err != nil {
		return "", "", err
	}
	return topicARN, queueURL, p.subscribe(ctx, topicARN, queueURL)
}

func CreateKey(ctx context.Context, cfg aws.Config, alias string) (string, error) {
	return provisioner{clients: newClients(cfg), region: cfg.Region}.key(ctx, alias)
}

// PathStyle reports whether the adapter's S3 client for cfg addresses
// buckets by path.
func PathStyle(cfg aws.Config) bool { return newS3Client(cfg).Options().UsePathStyle }
