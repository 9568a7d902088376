package awsstore_test

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"maps"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	dbtypes "github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/aws-sdk-go-v2/service/sns"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	sqstypes "github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"github.com/sluice-gateway/sluice/pkg/store"
	awsstore "github.com/sluice-gateway/sluice/pkg/store/aws"
	"github.com/sluice-gateway/sluice/pkg/store/aws/awstest"
	"github.com/sluice-gateway/sluice/pkg/store/storetest"
)

func testCtx(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	t.Cleanup(cancel)
	return ctx
}

// TestProvisionIdempotent provisions twice and checks the second run finds
// exactly what the first made, configured as template.yaml describes it.
func TestProvisionIdempotent(t *testing.T) {
	t.Parallel()
	cfg, first := awstest.Resources(t)
	ctx := testCtx(t)
	prefix := strings.TrimSuffix(first.Table, "-records")
	second, err := awsstore.Provision(ctx, cfg, prefix)
	if err != nil {
		t.Fatalf("second Provision: %v", err)
	}
	if second != first {
		t.Fatalf("second Provision returned\n%+v\nfirst returned\n%+v", second, first)
	}
	for _, r := range []awsstore.Resources{first, second} {
		for _, v := range []string{r.Table, r.Bucket, r.WorkQueueURL, r.WorkDLQURL, r.TopicARN, r.DeliveryQueueURL, r.DeliveryDLQURL, r.KMSKeyID} {
			if v == "" {
				t.Fatalf("Provision left a resource empty: %+v", r)
			}
		}
	}

	// The table: on-demand, the listing GSI projecting everything, the sweep
	// GSI keys only, TTL on ttl.
	db := dynamodb.NewFromConfig(cfg)
	table, err := db.DescribeTable(ctx, &dynamodb.DescribeTableInput{TableName: &first.Table})
	if err != nil {
		t.Fatal(err)
	}
	if bm := table.Table.BillingModeSummary; bm == nil || bm.BillingMode != dbtypes.BillingModePayPerRequest {
		t.Errorf("billing mode %+v, want PAY_PER_REQUEST", bm)
	}
	gsis := map[string]dbtypes.ProjectionType{}
	for _, g := range table.Table.GlobalSecondaryIndexes {
		if g.Projection != nil {
			gsis[aws.ToString(g.IndexName)] = g.Projection.ProjectionType
		}
	}
	if want := map[string]dbtypes.ProjectionType{"gsi1": dbtypes.ProjectionTypeAll, "gsi2": dbtypes.ProjectionTypeKeysOnly}; !maps.Equal(gsis, want) {
		t.Errorf("GSIs %v, want %v (the sweep index keys only)", gsis, want)
	}
	ttl, err := db.DescribeTimeToLive(ctx, &dynamodb.DescribeTimeToLiveInput{TableName: &first.Table})
	if err != nil {
		t.Fatal(err)
	}
	if d := ttl.TimeToLiveDescription; d == nil || d.TimeToLiveStatus != dbtypes.TimeToLiveStatusEnabled || aws.ToString(d.AttributeName) != "ttl" {
		t.Errorf("TTL %+v, want enabled on ttl", d)
	}

	// Both queues dead-letter after 5 receives into their own DLQ.
	q := sqs.NewFromConfig(cfg)
	for queue, dlq := range map[string]string{first.WorkQueueURL: first.WorkDLQURL, first.DeliveryQueueURL: first.DeliveryDLQURL} {
		attrs, err := q.GetQueueAttributes(ctx, &sqs.GetQueueAttributesInput{QueueUrl: &queue, AttributeNames: []sqstypes.QueueAttributeName{sqstypes.QueueAttributeNameAll}})
		if err != nil {
			t.Fatal(err)
		}
		var redrive struct {
			Target string `json:"deadLetterTargetArn"`
			Max    any    `json:"maxReceiveCount"`
		}
		if err := json.Unmarshal([]byte(attrs.Attributes["RedrivePolicy"]), &redrive); err != nil {
			t.Fatalf("queue %s redrive policy %q: %v", queue, attrs.Attributes["RedrivePolicy"], err)
		}
		dlqName := dlq[strings.LastIndex(dlq, "/")+1:]
		if !strings.HasSuffix(redrive.Target, ":"+dlqName) || (redrive.Max != "5" && redrive.Max != float64(5)) {
			t.Errorf("queue %s redrive %+v, want %s after 5 receives", queue, redrive, dlqName)
		}
	}

	// One subscription only (a repeated Provision must not double
	// deliveries), with raw delivery.
	n := sns.NewFromConfig(cfg)
	subs, err := n.ListSubscriptionsByTopic(ctx, &sns.ListSubscriptionsByTopicInput{TopicArn: &first.TopicARN})
	if err != nil {
		t.Fatal(err)
	}
	if len(subs.Subscriptions) != 1 {
		t.Fatalf("topic has %d subscriptions after two Provisions, want 1", len(subs.Subscriptions))
	}
	sa, err := n.GetSubscriptionAttributes(ctx, &sns.GetSubscriptionAttributesInput{SubscriptionArn: subs.Subscriptions[0].SubscriptionArn})
	if err != nil {
		t.Fatal(err)
	}
	if sa.Attributes["RawMessageDelivery"] != "true" {
		t.Errorf("subscription attributes %v, want RawMessageDelivery true", sa.Attributes)
	}
}

func TestProvisionRejectsBadPrefix(t *testing.T) {
	t.Parallel()
	for _, p := range []string{"", "ab", "Upper", "-lead", "trail-", "under_score", strings.Repeat("a", 41)} {
		if _, err := awsstore.Provision(context.Background(), aws.Config{}, p); err == nil {
			t.Errorf("Provision accepted prefix %q", p)
		}
	}
}

// TestBackend drives a whole Backend from Open: every adapter on the
// provisioned resources, events through the real subscription.
func TestBackend(t *testing.T) {
	t.Parallel()
	b := awstest.Backend(t)
	ctx := testCtx(t)
	if err := b.Ping(ctx); err != nil {
		t.Fatalf("Ping: %v", err)
	}

	// Work queue.
	if err := b.Work.Send(ctx, []byte(`{"kind":"plan"}`)); err != nil {
		t.Fatal(err)
	}
	msgs, err := b.Work.Receive(ctx, 10, 5*time.Second)
	if err != nil || len(msgs) != 1 || string(msgs[0].Body) != `{"kind":"plan"}` {
		t.Fatalf("work Receive: %v %+v", err, msgs)
	}
	if err := b.Work.Ack(ctx, msgs[0]); err != nil {
		t.Fatal(err)
	}

	// Bus to Deliveries through SNS raw delivery.
	ev := store.Event{Attributes: map[string]string{"team": "team-1", "status": "success"}, Body: []byte(`{"id":"req_1"}`)}
	if err := b.Bus.Publish(ctx, ev); err != nil {
		t.Fatal(err)
	}
	msgs, err = b.Deliveries.Receive(ctx, 10, 5*time.Second)
	if err != nil || len(msgs) != 1 {
		t.Fatalf("deliveries Receive: %v, %d messages", err, len(msgs))
	}
	got, err := store.DecodeEvent(msgs[0])
	if err != nil || string(got.Body) != string(ev.Body) || got.Attributes["team"] != "team-1" {
		t.Fatalf("delivered event %+v (%v), want %+v", got, err, ev)
	}

	// Limiter and records share the table; a refusal reports what is left.
	// The limiter reads the real clock: the three takes must fall in one
	// minute's window.
	storetest.WithinOneLimitWindow(t, 10*time.Second)
	if d, err := b.Limiter.Take(ctx, "key-1", time.Minute, store.Take{Counter: "rpm", Limit: 10, N: 7}); err != nil || !d.Allowed || d.Remaining != 3 {
		t.Fatalf("Take 7 of 10: %+v %v", d, err)
	}
	if d, err := b.Limiter.Take(ctx, "key-1", time.Minute, store.Take{Counter: "rpm", Limit: 10, N: 5}); err != nil || d.Allowed || d.Remaining != 3 {
		t.Fatalf("Take 5 more of 10: %+v %v, want refused with 3 remaining", d, err)
	}
	if d, err := b.Limiter.Take(ctx, "key-1", time.Minute, store.Take{Counter: "rpm", Limit: 10, N: 11}); err != nil || d.Allowed || d.Remaining != 3 {
		t.Fatalf("Take 11 of 10: %+v %v, want refused with 3 remaining", d, err)
	}

	// A presigned URL reads the blob without credentials.
	data := []byte("presigned content")
	if _, err := b.Blobs.Put(ctx, "files/f1", bytes.NewReader(data)); err != nil {
		t.Fatal(err)
	}
	url, err := b.Blobs.(store.Presigner).PresignGet(ctx, "files/f1", time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK || !bytes.Equal(body, data) {
		t.Fatalf("GET presigned URL: %d %q", resp.StatusCode, body)
	}
	if err := b.Close(); err != nil {
		t.Fatal(err)
	}
}

// TestSealedSecretAtRest stores a sealed secret the way the callbacks
// package does and checks the table item never holds the plaintext.
func TestSealedSecretAtRest(t *testing.T) {
	t.Parallel()
	cfg, res := awstest.Resources(t)
	b, err := awsstore.Open(context.Background(), cfg, res)
	if err != nil {
		t.Fatal(err)
	}
	ctx := testCtx(t)
	secret := []byte("lf-sk-THIS-IS-THE-PLAINTEXT-SECRET")
	encCtx := map[string]string{"team": "team-1", "callback": "langfuse"}
	sealed, err := b.Sealer.Seal(ctx, secret, encCtx)
	if err != nil {
		t.Fatal(err)
	}
	key := store.Key{PK: "TEAM#team-1", SK: "CALLBACK#langfuse#success"}
	if err := b.Records.Put(ctx, store.Record{Key: key, Body: sealed}, store.Cond{}); err != nil {
		t.Fatal(err)
	}
	raw, err := dynamodb.NewFromConfig(cfg).GetItem(ctx, &dynamodb.GetItemInput{
		TableName: &res.Table,
		Key:       map[string]dbtypes.AttributeValue{"pk": &dbtypes.AttributeValueMemberS{Value: key.PK}, "sk": &dbtypes.AttributeValueMemberS{Value: key.SK}},
	})
	if err != nil || raw.Item == nil {
		t.Fatalf("raw GetItem: %v", err)
	}
	stored, ok := raw.Item["body"].(*dbtypes.AttributeValueMemberB)
	if !ok {
		t.Fatalf("stored item has no binary body: %v", raw.Item)
	}
	for _, frag := range [][]byte{secret, []byte("PLAINTEXT"), secret[6:20]} {
		if bytes.Contains(stored.Value, frag) {
			t.Fatalf("the stored bytes contain %q", frag)
		}
	}
	rec, err := b.Records.Get(ctx, key)
	if err != nil {
		t.Fatal(err)
	}
	pt, err := b.Sealer.Open(ctx, rec.Body, encCtx)
	if err != nil || !bytes.Equal(pt, secret) {
		t.Fatalf("Open of the stored secret: %q %v", pt, err)
	}
}
