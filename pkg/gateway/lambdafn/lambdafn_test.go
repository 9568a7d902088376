package lambdafn_test

import (
	"context"
	"encoding/json"
	"errors"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-lambda-go/lambdacontext"
	"github.com/google/go-cmp/cmp"

	"github.com/sluice-gateway/sluice/pkg/gateway/gatewaytest"
	"github.com/sluice-gateway/sluice/pkg/gateway/lambdafn"
	"github.com/sluice-gateway/sluice/pkg/server"
	"github.com/sluice-gateway/sluice/pkg/store"
)

func services(t *testing.T) *server.Services {
	return gatewaytest.Start(t, gatewaytest.Backends()[0], gatewaytest.Options{}).Services
}

func invocation(t *testing.T, deadline time.Time) context.Context {
	ctx := lambdacontext.NewContext(context.Background(), &lambdacontext.LambdaContext{AwsRequestID: "c2d9e1f0-job"})
	ctx, cancel := context.WithDeadline(ctx, deadline)
	t.Cleanup(cancel)
	return ctx
}

// TestQueueJobHandler: a queue job (a test job, in no production table)
// becomes an SQS handler that runs each message through the job's handler
// and answers exactly the failed ones as partial batch failures.
func TestQueueJobHandler(t *testing.T) {
	var mu sync.Mutex
	var got []string
	job := server.Job{
		Name: "test-worker", Queue: server.WorkQueue, Workers: 2,
		Handle: func(*server.Services) server.MessageHandler {
			return func(ctx context.Context, m store.Message) error {
				mu.Lock()
				got = append(got, string(m.Body))
				mu.Unlock()
				if string(m.Body) == `{"chunk":2}` {
					return errors.New("the provider answered 503")
				}
				return nil
			}
		},
	}
	h, err := lambdafn.JobHandler(services(t), job)
	if err != nil {
		t.Fatal(err)
	}
	var e events.SQSEvent
	for i, body := range []string{`{"chunk":1}`, `{"chunk":2}`, `{"chunk":3}`} {
		e.Records = append(e.Records, events.SQSMessage{
			MessageId: []string{"m1", "m2", "m3"}[i], ReceiptHandle: "AQEB", Body: body,
			Attributes: map[string]string{"ApproximateReceiveCount": "1"}, EventSource: "aws:sqs",
		})
	}
	payload, _ := json.Marshal(e)
	out, err := h.Invoke(invocation(t, time.Now().Add(time.Minute)), payload)
	if err != nil {
		t.Fatal(err)
	}
	var resp events.SQSEventResponse
	if err := json.Unmarshal(out, &resp); err != nil {
		t.Fatalf("answer %s: %v", out, err)
	}
	want := events.SQSEventResponse{BatchItemFailures: []events.SQSBatchItemFailure{{ItemIdentifier: "m2"}}}
	if diff := cmp.Diff(want, resp); diff != "" {
		t.Errorf("answer (-want +got):\n%s", diff)
	}
	slices.Sort(got)
	if want := []string{`{"chunk":1}`, `{"chunk":2}`, `{"chunk":3}`}; !slices.Equal(got, want) {
		t.Errorf("handled %v, want %v", got, want)
	}
}

// TestScheduledJobHandler: a scheduled job's run stops server.ScheduleMargin
// before the invocation's deadline.
func TestScheduledJobHandler(t *testing.T) {
	var runDeadline time.Time
	job := server.Job{
		Name: "test-sweeper", Schedule: server.Schedule{Cloud: "rate(1 hour)", Local: time.Hour},
		Run: func(*server.Services) server.RunFunc {
			return func(ctx context.Context) error {
				runDeadline, _ = ctx.Deadline()
				return nil
			}
		},
	}
	h, err := lambdafn.JobHandler(services(t), job)
	if err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(10 * time.Minute)
	if _, err := h.Invoke(invocation(t, deadline), []byte(`{"detail-type":"Scheduled Event","source":"aws.events","detail":{}}`)); err != nil {
		t.Fatal(err)
	}
	if want := deadline.Add(-server.ScheduleMargin); !runDeadline.Equal(want) {
		t.Errorf("the run's deadline %v, want %v", runDeadline, want)
	}
}

// TestHandler: a name of the jobs table gets its job's handler, a name of
// the route table its routes', anything else an error (an init failure).
func TestHandler(t *testing.T) {
	s := services(t)
	for _, fn := range []string{"files-sweep", "batch-worker", "health", "passthrough-anthropic"} {
		if _, err := lambdafn.Handler(s, fn); err != nil {
			t.Errorf("%s: %v", fn, err)
		}
	}
	if _, err := lambdafn.Handler(s, "no-such-function"); err == nil {
		t.Error("a function that is in neither table has a handler")
	}
	if _, err := lambdafn.JobHandler(s, server.Job{Name: "half", Queue: server.WorkQueue}); err == nil {
		t.Error("a job without workers or a handler has a handler")
	}
}
