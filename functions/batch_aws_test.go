package functions_test

import (
	"context"
	"encoding/json"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	sqstypes "github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"github.com/sluice-gateway/sluice/pkg/lambdaedge/rie/rietest"
	"github.com/sluice-gateway/sluice/pkg/store/aws/awstest"
)

// TestBatchFromWorkQueueAWS runs a batch to completion the way the deployed
// stack does, on moto_server: files-upload and batches-create under
// aws-lambda-rie put the input and the plan message on the SQS work queue;
// then, as Lambda's event source mapping, the test receives what the queue
// holds, hands it to batch-worker under the emulator as an SQS event and
// deletes what the worker did not report failed, until the queue is empty;
// batch-get then reads the batch completed.
func TestBatchFromWorkQueueAWS(t *testing.T) {
	cfg, res := awstest.Resources(t)
	rieBin := rietest.Binary(t)
	bins := builtBootstraps(t)
	w := newWorld(t)
	es := &emulators{t: t, rieBin: rieBin, env: functionEnv(t, w, awsEnv(res)), out: logSink(t)}
	defer es.stop()
	r := &run{ids: map[string]string{}}
	invokeStep := func(s step) {
		t.Helper()
		e, _ := es.get(s.function(), bins[s.function()])
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		out, err := e.Invoke(ctx, r.event(t, s))
		if err != nil || out.Error != nil {
			t.Fatalf("%s: %v %v", s.sample, err, out)
		}
		r.check(t, s, false, out.Payload)
	}
	first := func(sample string) step {
		return scenario[slices.IndexFunc(scenario, func(s step) bool { return s.sample == sample })]
	}
	invokeStep(first("files-upload/upload-batch-input.json"))
	invokeStep(first("batches-create/create.json"))

	client := sqs.NewFromConfig(cfg)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	handled, empty := 0, 0
	for empty < 2 { // two empty receives in a row: nothing is in flight
		got, err := client.ReceiveMessage(ctx, &sqs.ReceiveMessageInput{
			QueueUrl: aws.String(res.WorkQueueURL), MaxNumberOfMessages: 10, WaitTimeSeconds: 1,
			MessageAttributeNames:       []string{"All"},
			MessageSystemAttributeNames: []sqstypes.MessageSystemAttributeName{sqstypes.MessageSystemAttributeNameAll},
		})
		if err != nil {
			t.Fatal(err)
		}
		if len(got.Messages) == 0 {
			empty++
			continue
		}
		empty = 0
		var ev events.SQSEvent
		for _, m := range got.Messages {
			ev.Records = append(ev.Records, sqsRecord(m, res.WorkQueueURL))
		}
		payload, err := json.Marshal(ev)
		if err != nil {
			t.Fatal(err)
		}
		e, _ := es.get("batch-worker", bins["batch-worker"])
		out, err := e.Invoke(ctx, payload)
		if err != nil || out.Error != nil {
			t.Fatalf("batch-worker: %v %v", err, out)
		}
		var resp events.SQSEventResponse
		if err := json.Unmarshal(out.Payload, &resp); err != nil {
			t.Fatalf("batch-worker answered %s: %v", out.Payload, err)
		}
		if len(resp.BatchItemFailures) > 0 {
			t.Fatalf("batch-worker failed messages %v", resp.BatchItemFailures)
		}
		for _, m := range got.Messages {
			if _, err := client.DeleteMessage(ctx, &sqs.DeleteMessageInput{QueueUrl: aws.String(res.WorkQueueURL), ReceiptHandle: m.ReceiptHandle}); err != nil {
				t.Fatal(err)
			}
			handled++
		}
	}
	// A plan, at least one chunk and a finalize.
	if handled < 3 {
		t.Errorf("batch-worker handled %d messages from the work queue, want a plan, a chunk and a finalize at least", handled)
	}
	invokeStep(step{sample: "batch-get/get.json", status: 200, contains: `"status":"completed"`})
	invokeStep(step{sample: "batch-get/get.json", status: 200, contains: `"completed":2`})
}

// sqsRecord renders a received SQS message as Lambda's event source mapping
// puts it in an SQS event.
func sqsRecord(m sqstypes.Message, queueURL string) events.SQSMessage {
	rec := events.SQSMessage{
		MessageId: aws.ToString(m.MessageId), ReceiptHandle: aws.ToString(m.ReceiptHandle),
		Body: aws.ToString(m.Body), Md5OfBody: aws.ToString(m.MD5OfBody), Attributes: m.Attributes,
		EventSource: "aws:sqs", EventSourceARN: "arn:aws:sqs:us-east-1:123456789012:" + queueURL[strings.LastIndex(queueURL, "/")+1:],
		AWSRegion: "us-east-1", MessageAttributes: map[string]events.SQSMessageAttribute{},
	}
	for k, v := range m.MessageAttributes {
		rec.MessageAttributes[k] = events.SQSMessageAttribute{StringValue: v.StringValue, BinaryValue: v.BinaryValue, DataType: aws.ToString(v.DataType)}
	}
	return rec
}
