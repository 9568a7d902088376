package awsstore

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"strconv"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	dbtypes "github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/aws-sdk-go-v2/service/kms"
	kmstypes "github.com/aws/aws-sdk-go-v2/service/kms/types"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	s3types "github.com/aws/aws-sdk-go-v2/service/s3/types"
	"github.com/aws/aws-sdk-go-v2/service/sns"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	sqstypes "github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"github.com/sluice-gateway/sluice/pkg/store"
)

// Queue settings Provision applies; template.yaml must say the same.
const (
	// MaxReceives is how often a message is received before it moves to its
	// dead-letter queue (the RedrivePolicy's maxReceiveCount).
	MaxReceives = 5
	// WorkVisibility is 6 × the batch-worker's 15-minute timeout, as AWS
	// advises for a queue a function consumes; the worker shortens each
	// message's visibility to its chunk lease while it runs (pkg/batches).
	WorkVisibility = 90 * time.Minute
	// DeliveryVisibility covers one callback-delivery invocation.
	DeliveryVisibility = 5 * time.Minute
	// dlqRetention keeps dead letters for SQS's maximum, 14 days.
	dlqRetention = 14 * 24 * time.Hour
)

// prefixPattern keeps every derived name valid for every service: S3 is the
// strictest (lowercase, 63 characters).
var prefixPattern = regexp.MustCompile(`^[a-z0-9][a-z0-9-]{1,38}[a-z0-9]$`)

// Provision creates (or finds) every resource of one deployment, named after
// prefix: the table, the bucket, the work queue and the delivery queue with
// their dead-letter queues, the topic the delivery queue subscribes to with
// raw delivery, and the KMS key. Running it again changes nothing, so a tool
// may call it on every start.
func Provision(ctx context.Context, cfg aws.Config, prefix string) (Resources, error) {
	if !prefixPattern.MatchString(prefix) {
		return Resources{}, fmt.Errorf("provision: prefix %q must be 3-40 characters of [a-z0-9-], not starting or ending with '-'", prefix)
	}
	p := provisioner{clients: newClients(cfg), region: cfg.Region}
	res := Resources{Table: prefix + "-records", Bucket: prefix + "-files"}
	var err error
	if err = p.table(ctx, res.Table); err != nil {
		return Resources{}, err
	}
	if err = p.bucket(ctx, res.Bucket); err != nil {
		return Resources{}, err
	}
	if res.WorkQueueURL, res.WorkDLQURL, err = p.queueWithDLQ(ctx, prefix+"-work", WorkVisibility, MaxReceives); err != nil {
		return Resources{}, err
	}
	if res.TopicARN, err = p.topic(ctx, prefix+"-events"); err != nil {
		return Resources{}, err
	}
	if res.DeliveryQueueURL, res.DeliveryDLQURL, err = p.queueWithDLQ(ctx, prefix+"-delivery", DeliveryVisibility, MaxReceives); err != nil {
		return Resources{}, err
	}
	if err = p.subscribe(ctx, res.TopicARN, res.DeliveryQueueURL); err != nil {
		return Resources{}, err
	}
	if res.KMSKeyID, err = p.key(ctx, "alias/"+prefix+"-secrets"); err != nil {
		return Resources{}, err
	}
	return res, nil
}

// provisioner creates single resources idempotently. The conformance tests
// use it to make fresh resources per test.
type provisioner struct {
	clients
	region string
}

// table creates the single table: pk/sk, gsi1 and gsi2 with every
// attribute projected, on-demand billing, TTL on ttl.
func (p provisioner) table(ctx context.Context, name string) error {
	_, err := p.db.DescribeTable(ctx, &dynamodb.DescribeTableInput{TableName: &name})
	var notFound *dbtypes.ResourceNotFoundException
	switch {
	case errors.As(err, &notFound):
		err = p.createTable(ctx, name)
		var inUse *dbtypes.ResourceInUseException
		if err != nil && !errors.As(err, &inUse) { // in use: created concurrently
			return wrap(err, "provision table %s", name)
		}
	case err != nil:
		return wrap(err, "provision table %s", name)
	}
	waiter := dynamodb.NewTableExistsWaiter(p.db, func(o *dynamodb.TableExistsWaiterOptions) {
		o.MinDelay = 200 * time.Millisecond
		o.MaxDelay = 5 * time.Second
	})
	if err := waiter.Wait(ctx, &dynamodb.DescribeTableInput{TableName: &name}, 5*time.Minute); err != nil {
		return wrap(err, "provision table %s: wait for it", name)
	}
	ttl, err := p.db.DescribeTimeToLive(ctx, &dynamodb.DescribeTimeToLiveInput{TableName: &name})
	if err != nil {
		return wrap(err, "provision table %s: describe ttl", name)
	}
	if d := ttl.TimeToLiveDescription; d != nil && (d.TimeToLiveStatus == dbtypes.TimeToLiveStatusEnabled ||
		d.TimeToLiveStatus == dbtypes.TimeToLiveStatusEnabling) {
		return nil
	}
	_, err = p.db.UpdateTimeToLive(ctx, &dynamodb.UpdateTimeToLiveInput{
		TableName:               &name,
		TimeToLiveSpecification: &dbtypes.TimeToLiveSpecification{AttributeName: aws.String(attrTTL), Enabled: aws.Bool(true)},
	})
	if err != nil {
		return wrap(err, "provision table %s: enable ttl", name)
	}
	return nil
}

func (p provisioner) createTable(ctx context.Context, name string) error {
	attrs := []string{attrPK, attrSK, attrGSI1PK, attrGSI1SK, attrGSI2PK, attrGSI2SK}
	defs := make([]dbtypes.AttributeDefinition, len(attrs))
	for i, a := range attrs {
		defs[i] = dbtypes.AttributeDefinition{AttributeName: aws.String(a), AttributeType: dbtypes.ScalarAttributeTypeS}
	}
	keys := func(pk, sk string) []dbtypes.KeySchemaElement {
		return []dbtypes.KeySchemaElement{
			{AttributeName: aws.String(pk), KeyType: dbtypes.KeyTypeHash},
			{AttributeName: aws.String(sk), KeyType: dbtypes.KeyTypeRange},
		}
	}
	projection := func(ix store.Index) *dbtypes.Projection {
		if ix.KeysOnly() {
			return &dbtypes.Projection{ProjectionType: dbtypes.ProjectionTypeKeysOnly}
		}
		return &dbtypes.Projection{ProjectionType: dbtypes.ProjectionTypeAll}
	}
	_, err := p.db.CreateTable(ctx, &dynamodb.CreateTableInput{
		TableName:            &name,
		BillingMode:          dbtypes.BillingModePayPerRequest,
		AttributeDefinitions: defs,
		KeySchema:            keys(attrPK, attrSK),
		GlobalSecondaryIndexes: []dbtypes.GlobalSecondaryIndex{
			{IndexName: aws.String(string(store.GSI1)), KeySchema: keys(attrGSI1PK, attrGSI1SK), Projection: projection(store.GSI1)},
			{IndexName: aws.String(string(store.GSI2)), KeySchema: keys(attrGSI2PK, attrGSI2SK), Projection: projection(store.GSI2)},
		},
	})
	return err
}

// bucket creates a private bucket.
func (p provisioner) bucket(ctx context.Context, name string) error {
	_, err := p.s3.HeadBucket(ctx, &s3.HeadBucketInput{Bucket: &name})
	if err == nil {
		return nil
	}
	in := &s3.CreateBucketInput{Bucket: &name}
	if p.region != "" && p.region != "us-east-1" { // us-east-1 refuses its own name as a constraint
		in.CreateBucketConfiguration = &s3types.CreateBucketConfiguration{LocationConstraint: s3types.BucketLocationConstraint(p.region)}
	}
	_, err = p.s3.CreateBucket(ctx, in)
	var owned *s3types.BucketAlreadyOwnedByYou
	if err != nil && !errors.As(err, &owned) {
		return wrap(err, "provision bucket %s", name)
	}
	return nil
}

// queueWithDLQ creates a queue whose messages move to name+"-dlq" after
// maxReceives receives.
func (p provisioner) queueWithDLQ(ctx context.Context, name string, visibility time.Duration, maxReceives int) (url, dlqURL string, err error) {
	dlqURL, err = p.queue(ctx, name+"-dlq", map[string]string{
		string(sqstypes.QueueAttributeNameMessageRetentionPeriod): seconds(dlqRetention),
	})
	if err != nil {
		return "", "", err
	}
	dlqARN, err := p.queueARN(ctx, dlqURL)
	if err != nil {
		return "", "", err
	}
	redrive, _ := json.Marshal(map[string]string{
		"deadLetterTargetArn": dlqARN,
		"maxReceiveCount":     strconv.Itoa(maxReceives),
	})
	url, err = p.queue(ctx, name, map[string]string{
		string(sqstypes.QueueAttributeNameVisibilityTimeout): seconds(visibility),
		string(sqstypes.QueueAttributeNameRedrivePolicy):     string(redrive),
	})
	return url, dlqURL, err
}

// queue creates a standard queue, or brings an existing one's attributes up
// to date (CreateQueue alone fails when attributes differ).
func (p provisioner) queue(ctx context.Context, name string, attrs map[string]string) (string, error) {
	got, err := p.sqs.GetQueueUrl(ctx, &sqs.GetQueueUrlInput{QueueName: &name})
	var missing *sqstypes.QueueDoesNotExist
	switch {
	case errors.As(err, &missing) || apiCode(err) == "AWS.SimpleQueueService.NonExistentQueue":
		out, err := p.sqs.CreateQueue(ctx, &sqs.CreateQueueInput{QueueName: &name, Attributes: attrs})
		if err != nil {
			return "", wrap(err, "provision queue %s", name)
		}
		return aws.ToString(out.QueueUrl), nil
	case err != nil:
		return "", wrap(err, "provision queue %s", name)
	}
	if _, err := p.sqs.SetQueueAttributes(ctx, &sqs.SetQueueAttributesInput{QueueUrl: got.QueueUrl, Attributes: attrs}); err != nil {
		return "", wrap(err, "provision queue %s: set attributes", name)
	}
	return aws.ToString(got.QueueUrl), nil
}

func (p provisioner) queueARN(ctx context.Context, url string) (string, error) {
	out, err := p.sqs.GetQueueAttributes(ctx, &sqs.GetQueueAttributesInput{
		QueueUrl: &url, AttributeNames: []sqstypes.QueueAttributeName{sqstypes.QueueAttributeNameQueueArn},
	})
	if err != nil {
		return "", wrap(err, "provision queue %s: get arn", url)
	}
	return out.Attributes[string(sqstypes.QueueAttributeNameQueueArn)], nil
}

// topic creates the log-event topic (CreateTopic is idempotent).
func (p provisioner) topic(ctx context.Context, name string) (string, error) {
	out, err := p.sns.CreateTopic(ctx, &sns.CreateTopicInput{Name: &name})
	if err != nil {
		return "", wrap(err, "provision topic %s", name)
	}
	return aws.ToString(out.TopicArn), nil
}

// subscribe subscribes a queue to a topic with raw message delivery, so the
// queue receives each event's body with its attributes as SQS message
// attributes, and lets the topic send to the queue. An existing
// subscription is reused: a second one would deliver every event twice.
func (p provisioner) subscribe(ctx context.Context, topicARN, queueURL string) error {
	queueARN, err := p.queueARN(ctx, queueURL)
	if err != nil {
		return err
	}
	policy, _ := json.Marshal(map[string]any{
		"Version": "2012-10-17",
		"Statement": []map[string]any{{
			"Effect":    "Allow",
			"Principal": map[string]string{"Service": "sns.amazonaws.com"},
			"Action":    "sqs:SendMessage",
			"Resource":  queueARN,
			"Condition": map[string]any{"ArnEquals": map[string]string{"aws:SourceArn": topicARN}},
		}},
	})
	if _, err := p.sqs.SetQueueAttributes(ctx, &sqs.SetQueueAttributesInput{
		QueueUrl: &queueURL, Attributes: map[string]string{string(sqstypes.QueueAttributeNamePolicy): string(policy)},
	}); err != nil {
		return wrap(err, "provision subscription: queue policy of %s", queueURL)
	}
	raw := map[string]string{"RawMessageDelivery": "true"}
	pages := sns.NewListSubscriptionsByTopicPaginator(p.sns, &sns.ListSubscriptionsByTopicInput{TopicArn: &topicARN})
	for pages.HasMorePages() {
		page, err := pages.NextPage(ctx)
		if err != nil {
			return wrap(err, "provision subscription: list subscriptions of %s", topicARN)
		}
		for _, s := range page.Subscriptions {
			if aws.ToString(s.Protocol) == "sqs" && aws.ToString(s.Endpoint) == queueARN {
				_, err := p.sns.SetSubscriptionAttributes(ctx, &sns.SetSubscriptionAttributesInput{
					SubscriptionArn: s.SubscriptionArn, AttributeName: aws.String("RawMessageDelivery"), AttributeValue: aws.String("true"),
				})
				if err != nil {
					return wrap(err, "provision subscription %s", aws.ToString(s.SubscriptionArn))
				}
				return nil
			}
		}
	}
	_, err = p.sns.Subscribe(ctx, &sns.SubscribeInput{
		TopicArn: &topicARN, Protocol: aws.String("sqs"), Endpoint: &queueARN,
		Attributes: raw, ReturnSubscriptionArn: true,
	})
	if err != nil {
		return wrap(err, "provision subscription of %s to %s", queueARN, topicARN)
	}
	return nil
}

// key finds the symmetric key behind alias, or creates both. KMS keys have
// no name, so the alias is what makes this idempotent.
func (p provisioner) key(ctx context.Context, alias string) (string, error) {
	got, err := p.kms.DescribeKey(ctx, &kms.DescribeKeyInput{KeyId: &alias})
	if err == nil {
		return aws.ToString(got.KeyMetadata.Arn), nil
	}
	var notFound *kmstypes.NotFoundException
	if !errors.As(err, &notFound) {
		return "", wrap(err, "provision key %s", alias)
	}
	created, err := p.kms.CreateKey(ctx, &kms.CreateKeyInput{
		Description: aws.String("sluice: seals team callback secrets (" + alias + ")"),
		KeySpec:     kmstypes.KeySpecSymmetricDefault,
		KeyUsage:    kmstypes.KeyUsageTypeEncryptDecrypt,
	})
	if err != nil {
		return "", wrap(err, "provision key %s", alias)
	}
	keyID := created.KeyMetadata.KeyId
	if _, err := p.kms.CreateAlias(ctx, &kms.CreateAliasInput{AliasName: &alias, TargetKeyId: keyID}); err != nil {
		var exists *kmstypes.AlreadyExistsException
		if !errors.As(err, &exists) {
			return "", wrap(err, "provision key %s: create alias", alias)
		}
		// Created concurrently: use the key the alias names, drop ours.
		_, _ = p.kms.ScheduleKeyDeletion(ctx, &kms.ScheduleKeyDeletionInput{KeyId: keyID, PendingWindowInDays: aws.Int32(7)})
		return p.key(ctx, alias)
	}
	return aws.ToString(created.KeyMetadata.Arn), nil
}

func seconds(d time.Duration) string {
	return strconv.Itoa(int(d / time.Second))
}
