package awsstore

import (
	"context"
	"fmt"
	"strconv"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	sqstypes "github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"github.com/sluice-gateway/sluice/pkg/store"
)

// SQS limits that shape Send and Receive.
const (
	sqsMaxBatch      = 10        // entries per SendMessageBatch, messages per ReceiveMessage
	sqsMaxBatchBytes = 256 << 10 // payload of one SendMessageBatch
	sqsMaxWait       = 20        // seconds of one long poll
	sqsMaxVisibility = 12 * 3600 // seconds
	shortPollEvery   = 50 * time.Millisecond
)

// Queue implements store.Queue on an SQS standard queue. The visibility
// timeout and the dead letter (the RedrivePolicy's maxReceiveCount) are the
// queue's own attributes, set by Provision.
type Queue struct {
	sqs *sqs.Client
	url string
}

var _ store.Queue = (*Queue)(nil)

// NewQueue returns the queue adapter for the queue at url.
func NewQueue(client *sqs.Client, url string) *Queue {
	return &Queue{sqs: client, url: url}
}

// Send enqueues bodies with SendMessageBatch, ten (or 256 KiB) at a time,
// resending entries SQS reports as failed on its side.
func (q *Queue) Send(ctx context.Context, bodies ...[]byte) error {
	var batch []sqstypes.SendMessageBatchRequestEntry
	size := 0
	for i, b := range bodies {
		e := encodeMessage(strconv.Itoa(len(batch)), b)
		n := len(aws.ToString(e.MessageBody)) + 64
		if len(batch) == sqsMaxBatch || (len(batch) > 0 && size+n > sqsMaxBatchBytes) {
			if err := q.sendBatch(ctx, batch); err != nil {
				return fmt.Errorf("sqs send (%d of %d sent): %w", i-len(batch), len(bodies), err)
			}
			batch, size = nil, 0
			e.Id = aws.String("0")
		}
		batch = append(batch, e)
		size += n
	}
	if len(batch) > 0 {
		if err := q.sendBatch(ctx, batch); err != nil {
			return fmt.Errorf("sqs send (%d of %d sent): %w", len(bodies)-len(batch), len(bodies), err)
		}
	}
	return nil
}

func (q *Queue) sendBatch(ctx context.Context, entries []sqstypes.SendMessageBatchRequestEntry) error {
	for attempt := 1; ; attempt++ {
		out, err := q.sqs.SendMessageBatch(ctx, &sqs.SendMessageBatchInput{QueueUrl: &q.url, Entries: entries})
		if err != nil {
			return wrap(err, "sqs send batch to %s", q.url)
		}
		if len(out.Failed) == 0 {
			return nil
		}
		byID := map[string]sqstypes.SendMessageBatchRequestEntry{}
		for _, e := range entries {
			byID[aws.ToString(e.Id)] = e
		}
		entries = entries[:0]
		for _, f := range out.Failed {
			if f.SenderFault || attempt == 3 {
				return fmt.Errorf("sqs send batch to %s: entry %s failed: %s: %s",
					q.url, aws.ToString(f.Id), aws.ToString(f.Code), aws.ToString(f.Message))
			}
			entries = append(entries, byID[aws.ToString(f.Id)])
		}
		if err := sleep(ctx, backoff(attempt)); err != nil {
			return err
		}
	}
}

// Receive long-polls for up to wait (SQS polls whole seconds, at most 20);
// a wait under a second is spent in short polls, so a caller asking for a
// brief wait gets one.
func (q *Queue) Receive(ctx context.Context, limit int, wait time.Duration) ([]store.Message, error) {
	limit = min(sqsMaxBatch, limit)
	if limit < 1 {
		return nil, nil
	}
	deadline := time.Now().Add(wait)
	for {
		secs := int32(min(time.Until(deadline)/time.Second, sqsMaxWait))
		out, err := q.sqs.ReceiveMessage(ctx, &sqs.ReceiveMessageInput{
			QueueUrl:                    &q.url,
			MaxNumberOfMessages:         int32(limit),
			WaitTimeSeconds:             max(secs, 0),
			MessageSystemAttributeNames: []sqstypes.MessageSystemAttributeName{sqstypes.MessageSystemAttributeNameApproximateReceiveCount},
			MessageAttributeNames:       []string{store.QueueEncodingAttribute},
		})
		if err != nil {
			return nil, wrap(err, "sqs receive from %s", q.url)
		}
		if len(out.Messages) > 0 {
			msgs := make([]store.Message, 0, len(out.Messages))
			for _, m := range out.Messages {
				msg, err := decodeMessage(m)
				if err != nil {
					return nil, fmt.Errorf("sqs receive from %s: %w", q.url, err)
				}
				msgs = append(msgs, msg)
			}
			return msgs, nil
		}
		left := time.Until(deadline)
		if left <= 0 {
			return nil, nil
		}
		if secs == 0 {
			if err := sleep(ctx, min(left, shortPollEvery)); err != nil {
				return nil, err
			}
		}
	}
}

// Ack deletes a received message.
func (q *Queue) Ack(ctx context.Context, m store.Message) error {
	_, err := q.sqs.DeleteMessage(ctx, &sqs.DeleteMessageInput{QueueUrl: &q.url, ReceiptHandle: &m.Receipt})
	if err != nil {
		return wrap(err, "sqs ack %s", m.ID)
	}
	return nil
}

// Extend hides a received message for d more, rounded up to whole seconds.
func (q *Queue) Extend(ctx context.Context, m store.Message, d time.Duration) error {
	secs := min((d+time.Second-1)/time.Second, sqsMaxVisibility)
	_, err := q.sqs.ChangeMessageVisibility(ctx, &sqs.ChangeMessageVisibilityInput{
		QueueUrl: &q.url, ReceiptHandle: &m.Receipt, VisibilityTimeout: int32(max(secs, 0)),
	})
	if err != nil {
		return wrap(err, "sqs extend %s", m.ID)
	}
	return nil
}

// encodeMessage renders a body as a batch entry, in store's queue-body
// encoding (the Lambda edge decodes SQS events with the same codec).
func encodeMessage(id string, b []byte) sqstypes.SendMessageBatchRequestEntry {
	body, enc := store.EncodeQueueBody(b)
	e := sqstypes.SendMessageBatchRequestEntry{Id: &id, MessageBody: &body}
	if enc != "" {
		e.MessageAttributes = map[string]sqstypes.MessageAttributeValue{
			store.QueueEncodingAttribute: {DataType: aws.String("String"), StringValue: aws.String(enc)},
		}
	}
	return e
}

func decodeMessage(m sqstypes.Message) (store.Message, error) {
	msg := store.Message{ID: aws.ToString(m.MessageId), Receipt: aws.ToString(m.ReceiptHandle)}
	if n, err := strconv.Atoi(m.Attributes[string(sqstypes.MessageSystemAttributeNameApproximateReceiveCount)]); err == nil {
		msg.Receives = n
	}
	body, err := store.DecodeQueueBody(aws.ToString(m.Body), aws.ToString(m.MessageAttributes[store.QueueEncodingAttribute].StringValue))
	if err != nil {
		return store.Message{}, fmt.Errorf("message %s: %w", msg.ID, err)
	}
	msg.Body = body
	return msg, nil
}
