package awsstore

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strconv"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sns"
	snstypes "github.com/aws/aws-sdk-go-v2/service/sns/types"

	"github.com/sluice-gateway/sluice/pkg/store"
)

// SNS limits that shape Publish.
const (
	snsMaxBatch      = 10
	snsMaxBatchBytes = 256 << 10
	// snsMaxAttributes is what raw delivery carries over to SQS: SQS takes at
	// most 10 message attributes.
	snsMaxAttributes = 10
)

// Bus implements store.Bus on an SNS topic. Each event is published as
// store.EncodeEvent(e), its attributes also as SNS message attributes for
// subscription filter policies. Subscriptions are SQS queues with raw
// message delivery (see Provision), so a subscriber's Queue receives exactly
// EncodeEvent(e), as from the local bus.
type Bus struct {
	sns      *sns.Client
	topicARN string
}

var _ store.Bus = (*Bus)(nil)

// NewBus returns the bus adapter for the topic topicARN.
func NewBus(client *sns.Client, topicARN string) *Bus {
	return &Bus{sns: client, topicARN: topicARN}
}

// Publish sends events with PublishBatch, ten (or 256 KiB) at a time.
func (b *Bus) Publish(ctx context.Context, events ...store.Event) error {
	var batch []snstypes.PublishBatchRequestEntry
	size, sent := 0, 0
	flush := func() error {
		if err := b.publishBatch(ctx, batch); err != nil {
			return fmt.Errorf("sns publish (%d of %d sent): %w", sent, len(events), err)
		}
		sent += len(batch)
		batch, size = nil, 0
		return nil
	}
	for _, ev := range events {
		msg := string(store.EncodeEvent(ev))
		n := len(msg)
		for k, v := range ev.Attributes {
			n += len(k) + len(v) + len("String")
		}
		if len(batch) == snsMaxBatch || (len(batch) > 0 && size+n > snsMaxBatchBytes) {
			if err := flush(); err != nil {
				return err
			}
		}
		batch = append(batch, snstypes.PublishBatchRequestEntry{
			Id:                aws.String(strconv.Itoa(len(batch))),
			Message:           &msg,
			MessageAttributes: snsAttributes(ev.Attributes),
		})
		size += n
	}
	if len(batch) > 0 {
		return flush()
	}
	return nil
}

func (b *Bus) publishBatch(ctx context.Context, entries []snstypes.PublishBatchRequestEntry) error {
	for attempt := 1; ; attempt++ {
		out, err := b.sns.PublishBatch(ctx, &sns.PublishBatchInput{TopicArn: &b.topicARN, PublishBatchRequestEntries: entries})
		if err != nil {
			return wrap(err, "sns publish batch to %s", b.topicARN)
		}
		if len(out.Failed) == 0 {
			return nil
		}
		byID := map[string]snstypes.PublishBatchRequestEntry{}
		for _, e := range entries {
			byID[aws.ToString(e.Id)] = e
		}
		entries = entries[:0]
		for _, f := range out.Failed {
			if f.SenderFault || attempt == 3 {
				return fmt.Errorf("sns publish batch to %s: entry %s failed: %s: %s",
					b.topicARN, aws.ToString(f.Id), aws.ToString(f.Code), aws.ToString(f.Message))
			}
			entries = append(entries, byID[aws.ToString(f.Id)])
		}
		if err := sleep(ctx, backoff(attempt)); err != nil {
			return err
		}
	}
}

// snsAttributes renders event attributes as SNS string attributes. SNS
// refuses empty values, and raw delivery to SQS carries at most ten: the
// body carries every attribute anyway, these only serve filter policies.
func snsAttributes(attrs map[string]string) map[string]snstypes.MessageAttributeValue {
	out := map[string]snstypes.MessageAttributeValue{}
	for _, k := range slices.Sorted(maps.Keys(attrs)) {
		if attrs[k] == "" || len(out) == snsMaxAttributes {
			continue
		}
		out[k] = snstypes.MessageAttributeValue{DataType: aws.String("String"), StringValue: aws.String(attrs[k])}
	}
	if len(out) == 0 {
		return nil
	}
	return out
}
