package awsstore

import (
	"context"
	"fmt"
	"strings"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"

	"github.com/sluice-gateway/sluice/pkg/store"
)

// Open builds a store.Backend on provisioned resources. It makes no calls:
// a Lambda's init stays fast, and Ping is what checks that AWS answers.
// Blob keys are used as given (no prefix).
func Open(ctx context.Context, cfg aws.Config, res Resources) (*store.Backend, error) {
	var missing []string
	for _, f := range []struct{ name, val string }{
		{"Table", res.Table}, {"Bucket", res.Bucket}, {"WorkQueueURL", res.WorkQueueURL},
		{"TopicARN", res.TopicARN}, {"DeliveryQueueURL", res.DeliveryQueueURL}, {"DeliveryDLQURL", res.DeliveryDLQURL},
		{"KMSKeyID", res.KMSKeyID},
	} {
		if f.val == "" {
			missing = append(missing, f.name)
		}
	}
	if len(missing) > 0 {
		return nil, fmt.Errorf("aws backend: resources missing: %s", strings.Join(missing, ", "))
	}
	c := newClients(cfg)
	return &store.Backend{
		Records:    NewRecords(c.db, res.Table),
		Blobs:      NewBlobs(c.s3, res.Bucket, ""),
		Work:       NewQueue(c.sqs, res.WorkQueueURL),
		Bus:        NewBus(c.sns, res.TopicARN),
		Deliveries: NewQueue(c.sqs, res.DeliveryQueueURL),
		// The delivery worker sends what it gives up on here itself.
		DeliveryDeadLetters: NewQueue(c.sqs, res.DeliveryDLQURL),
		Limiter:             NewLimiter(c.db, res.Table),
		Sealer:              NewSealer(c.kms, res.KMSKeyID),
		Ping:                pinger(c.db, res.Table),
		Close:               func() error { return nil }, // the SDK clients hold nothing to release
	}, nil
}

// pinger reads one key that never exists: the cheapest call that proves the
// table answers and the function may read it.
func pinger(db *dynamodb.Client, table string) func(context.Context) error {
	return func(ctx context.Context) error {
		_, err := db.GetItem(ctx, &dynamodb.GetItemInput{
			TableName: &table, Key: keyItem(store.Key{PK: "PING", SK: "PING"}),
		})
		if err != nil {
			return wrap(err, "dynamodb ping %s", table)
		}
		return nil
	}
}
