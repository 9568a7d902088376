package lambdaedge

import (
	"context"
	"fmt"
	"log/slog"
	"runtime/debug"
	"strconv"
	"sync"

	"github.com/aws/aws-lambda-go/events"

	"github.com/sluice-gateway/sluice/pkg/store"
)

// MessageHandler handles one queue message. It is the same signature
// store.Consume takes, so a worker runs unchanged in the local process and
// behind an SQS event source. A nil error means done (SQS deletes the
// message); an error leaves it for redelivery and, after the queue's
// maxReceiveCount, the dead-letter queue.
type MessageHandler func(ctx context.Context, m store.Message) error

// SQS returns the Lambda handler of an SQS-triggered worker: each message of
// the batch goes to handle, at most concurrency at once (all of them when
// concurrency < 1), and the answer lists exactly the messages that failed —
// a returned error, a panic, or a body that cannot be decoded — as partial
// batch failures (the event source needs FunctionResponseTypes:
// [ReportBatchItemFailures]). The batch itself never fails: what succeeded is
// not run again. Each handler gets the invocation's deadline.
//
// The queues are standard queues: messages are independent, so they run
// concurrently and one failure does not hold back the others.
func SQS(handle MessageHandler, concurrency int) func(context.Context, events.SQSEvent) (events.SQSEventResponse, error) {
	return func(ctx context.Context, e events.SQSEvent) (events.SQSEventResponse, error) {
		ctx = invocationContext(ctx, "")
		failed := make([]bool, len(e.Records))
		limit := concurrency
		if limit < 1 || limit > len(e.Records) {
			limit = len(e.Records)
		}
		slots := make(chan struct{}, max(limit, 1))
		var wg sync.WaitGroup
		for i, rec := range e.Records {
			slots <- struct{}{}
			wg.Go(func() {
				defer func() { <-slots }()
				mctx := withLogAttrs(ctx, slog.String("message_id", rec.MessageId))
				if err := handleMessage(mctx, handle, rec); err != nil {
					failed[i] = true
					slog.WarnContext(mctx, "message failed; left for redelivery", "error", err)
				}
			})
		}
		wg.Wait()
		resp := events.SQSEventResponse{BatchItemFailures: []events.SQSBatchItemFailure{}}
		for i, f := range failed {
			if f {
				resp.BatchItemFailures = append(resp.BatchItemFailures, events.SQSBatchItemFailure{ItemIdentifier: e.Records[i].MessageId})
			}
		}
		return resp, nil
	}
}

// handleMessage decodes one record and runs handle on it, turning a panic
// into that message's failure.
func handleMessage(ctx context.Context, handle MessageHandler, rec events.SQSMessage) (err error) {
	defer func() {
		if p := recover(); p != nil {
			slog.ErrorContext(ctx, "message handler panicked", "panic", fmt.Sprint(p), "stack", string(debug.Stack()))
			err = panicError{p}
		}
	}()
	m, err := Message(rec)
	if err != nil {
		return err
	}
	return handle(ctx, m)
}

// Message turns an SQS event record into the store.Message the AWS queue
// adapter would have received for it: the body decoded with store's queue-body
// codec (store.DecodeQueueBody, as that adapter encodes it), the receive count, and the receipt handle (so a long-running
// handler can Extend the message through the queue).
func Message(rec events.SQSMessage) (store.Message, error) {
	m := store.Message{ID: rec.MessageId, Receipt: rec.ReceiptHandle}
	if n, err := strconv.Atoi(rec.Attributes["ApproximateReceiveCount"]); err == nil {
		m.Receives = n
	}
	var enc string
	if a, ok := rec.MessageAttributes[store.QueueEncodingAttribute]; ok && a.StringValue != nil {
		enc = *a.StringValue
	}
	body, err := store.DecodeQueueBody(rec.Body, enc)
	if err != nil {
		return store.Message{}, fmt.Errorf("message %s: %w", rec.MessageId, err)
	}
	m.Body = body
	return m, nil
}
