package lambdaedge

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	sqstypes "github.com/aws/aws-sdk-go-v2/service/sqs/types"

	awsstore "github.com/sluice-gateway/sluice/pkg/store/aws"
	"github.com/sluice-gateway/sluice/pkg/store/aws/awstest"
)

// TestSQSMessageMatchesAWSQueue sends bodies through the AWS queue adapter
// (which encodes what SQS cannot carry), receives them raw as Lambda's event
// source mapping would, and checks Message decodes each to what was sent:
// the SQS edge and pkg/store/aws agree on the encoding. Runs on moto_server.
func TestSQSMessageMatchesAWSQueue(t *testing.T) {
	cfg := awstest.Config(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	client := sqs.NewFromConfig(cfg)
	created, err := client.CreateQueue(ctx, &sqs.CreateQueueInput{QueueName: aws.String(awstest.Prefix())})
	if err != nil {
		t.Fatal(err)
	}
	url := aws.ToString(created.QueueUrl)
	defer client.DeleteQueue(context.WithoutCancel(ctx), &sqs.DeleteQueueInput{QueueUrl: &url})

	bodies := [][]byte{[]byte(`{"kind":"plan","batch":"batch_1"}`), {}, {0x00, 0xff, 0x01}, []byte("tab\tand \u00e9")}
	if err := awsstore.NewQueue(client, url).Send(ctx, bodies...); err != nil {
		t.Fatal(err)
	}
	var got [][]byte
	for len(got) < len(bodies) && ctx.Err() == nil {
		out, err := client.ReceiveMessage(ctx, &sqs.ReceiveMessageInput{
			QueueUrl: &url, MaxNumberOfMessages: 10, WaitTimeSeconds: 1,
			MessageAttributeNames:       []string{"All"},
			MessageSystemAttributeNames: []sqstypes.MessageSystemAttributeName{sqstypes.MessageSystemAttributeNameAll},
		})
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range out.Messages {
			m, err := Message(lambdaRecord(m))
			if err != nil {
				t.Fatal(err)
			}
			if m.Receives != 1 {
				t.Errorf("receives %d", m.Receives)
			}
			got = append(got, m.Body)
		}
	}
	for _, b := range bodies {
		if !slices.ContainsFunc(got, func(g []byte) bool { return string(g) == string(b) }) {
			t.Errorf("body %q not received; got %q", b, got)
		}
	}
}

// lambdaRecord renders a received SQS message as the event source mapping
// puts it in an SQS event.
func lambdaRecord(m sqstypes.Message) events.SQSMessage {
	rec := events.SQSMessage{
		MessageId: aws.ToString(m.MessageId), ReceiptHandle: aws.ToString(m.ReceiptHandle),
		Body: aws.ToString(m.Body), Attributes: m.Attributes, EventSource: "aws:sqs",
		MessageAttributes: map[string]events.SQSMessageAttribute{},
	}
	for k, v := range m.MessageAttributes {
		rec.MessageAttributes[k] = events.SQSMessageAttribute{StringValue: v.StringValue, DataType: aws.ToString(v.DataType)}
	}
	return rec
}
