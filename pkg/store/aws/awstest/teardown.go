package awstest

import (
	"context"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/kms"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	s3types "github.com/aws/aws-sdk-go-v2/service/s3/types"
	"github.com/aws/aws-sdk-go-v2/service/sns"
	"github.com/aws/aws-sdk-go-v2/service/sqs"

	awsstore "github.com/sluice-gateway/sluice/pkg/store/aws"
)

// teardown deletes what Resources provisioned, so a long test run does not
// grow the emulator. Failures are logged, not fatal: the emulator goes away
// at the end of the run anyway.
func teardown(t testing.TB, cfg aws.Config, res awsstore.Resources) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	logErr := func(what string, err error) {
		if err != nil {
			t.Logf("awstest: teardown %s: %v", what, err)
		}
	}
	q := sqs.NewFromConfig(cfg)
	for _, url := range []string{res.WorkQueueURL, res.WorkDLQURL, res.DeliveryQueueURL, res.DeliveryDLQURL} {
		if url != "" {
			_, err := q.DeleteQueue(ctx, &sqs.DeleteQueueInput{QueueUrl: &url})
			logErr("queue "+url, err)
		}
	}
	n := sns.NewFromConfig(cfg)
	if subs, err := n.ListSubscriptionsByTopic(ctx, &sns.ListSubscriptionsByTopicInput{TopicArn: &res.TopicARN}); err == nil {
		for _, s := range subs.Subscriptions {
			_, err := n.Unsubscribe(ctx, &sns.UnsubscribeInput{SubscriptionArn: s.SubscriptionArn})
			logErr("subscription", err)
		}
	}
	_, err := n.DeleteTopic(ctx, &sns.DeleteTopicInput{TopicArn: &res.TopicARN})
	logErr("topic", err)
	_, err = dynamodb.NewFromConfig(cfg).DeleteTable(ctx, &dynamodb.DeleteTableInput{TableName: &res.Table})
	logErr("table", err)
	logErr("bucket", deleteBucket(ctx, cfg, res.Bucket))
	k := kms.NewFromConfig(cfg)
	if out, err := k.DescribeKey(ctx, &kms.DescribeKeyInput{KeyId: &res.KMSKeyID}); err == nil {
		_, err := k.ScheduleKeyDeletion(ctx, &kms.ScheduleKeyDeletionInput{KeyId: out.KeyMetadata.KeyId, PendingWindowInDays: aws.Int32(7)})
		logErr("key", err)
	}
}

// deleteBucket empties and deletes a bucket.
func deleteBucket(ctx context.Context, cfg aws.Config, bucket string) error {
	client := s3.NewFromConfig(cfg, func(o *s3.Options) { o.UsePathStyle = true })
	pages := s3.NewListObjectsV2Paginator(client, &s3.ListObjectsV2Input{Bucket: &bucket})
	for pages.HasMorePages() {
		page, err := pages.NextPage(ctx)
		if err != nil {
			return err
		}
		if len(page.Contents) == 0 {
			continue
		}
		var ids []s3types.ObjectIdentifier
		for _, o := range page.Contents {
			ids = append(ids, s3types.ObjectIdentifier{Key: o.Key})
		}
		if _, err := client.DeleteObjects(ctx, &s3.DeleteObjectsInput{Bucket: &bucket, Delete: &s3types.Delete{Objects: ids}}); err != nil {
			return err
		}
	}
	_, err := client.DeleteBucket(ctx, &s3.DeleteBucketInput{Bucket: &bucket})
	return err
}
