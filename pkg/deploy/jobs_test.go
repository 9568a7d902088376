package deploy_test

import (
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/sluice-gateway/sluice/pkg/deploy"
	"github.com/sluice-gateway/sluice/pkg/server"
)

// withQueueJob returns template.yaml generated with the test job (testJob)
// added to the jobs table, and the functions.
func withQueueJob(t *testing.T) (deploy.Template, []deploy.Function) {
	t.Helper()
	fns, err := deploy.FunctionsOf(server.Routes(), append(server.Jobs(), testJob()))
	if err != nil {
		t.Fatal(err)
	}
	return generated(t, fns), fns
}

// TestQueueJobTemplate: what make template writes for a queue job is what
// it needs, so a worker of a later issue is one entry in the jobs table and
// its handler.
func TestQueueJobTemplate(t *testing.T) {
	tmpl, fns := withQueueJob(t)
	for _, p := range deploy.Check(tmpl, fns) {
		t.Error(p)
	}
}

// TestQueueJobDrift: the check holds a queue job's template to the job:
// its queue, partial batch failures, a concurrency cap that is a parameter
// within Lambda's range, a visibility timeout that outlasts its retries, a
// dead-letter queue, the topic's subscription for the delivery queue.
func TestQueueJobDrift(t *testing.T) {
	work := func(d deploy.Template) map[string]any { return event(d, "BatchTestFunction", "Queue") }
	for _, tc := range []struct {
		name   string
		mutate func(deploy.Template)
		job    func(*server.Job)
		want   []string
	}{
		{"no queue event", func(d deploy.Template) { delete(events(d, "BatchTestFunction"), "Queue") }, nil,
			[]string{"function batch-test: 0 SQS events, want 1 (WorkQueue)"}},
		{"another queue", func(d deploy.Template) { work(d)["Queue"] = getAtt("DeliveryQueue", "Arn") }, nil,
			[]string{`function batch-test: event Queue: Queue "${DeliveryQueue.Arn}", want !GetAtt WorkQueue.Arn`}},
		{"a failed message failing the whole batch", func(d deploy.Template) { delete(work(d), "FunctionResponseTypes") }, nil,
			[]string{"function batch-test: event Queue: FunctionResponseTypes lacks ReportBatchItemFailures"}},
		{"a concurrency cap the operator cannot set", func(d deploy.Template) {
			work(d)["ScalingConfig"] = map[string]any{"MaximumConcurrency": 10}
		}, nil, []string{`function batch-test: event Queue: ScalingConfig.MaximumConcurrency "10", want !Ref BatchTestMaxConcurrency`}},
		{"no concurrency cap", func(d deploy.Template) { delete(work(d), "ScalingConfig") }, nil,
			[]string{`ScalingConfig.MaximumConcurrency "", want !Ref BatchTestMaxConcurrency`}},
		{"a concurrency cap Lambda refuses", func(d deploy.Template) { m(m(d["Parameters"])["BatchTestMaxConcurrency"])["MinValue"] = 1 }, nil,
			[]string{"parameter BatchTestMaxConcurrency: want 2 ≤ MinValue ≤ Default ≤ MaxValue ≤ 1000"}},
		{"a queue that redelivers while a retry runs", func(d deploy.Template) { props(d, "WorkQueue")["VisibilityTimeout"] = 600 }, nil,
			[]string{"function batch-test: event Queue: queue WorkQueue VisibilityTimeout 600 s, want at least 6 × (Timeout + batching window) = 720 s"}},
		{"a batching window the visibility does not cover", func(d deploy.Template) { work(d)["MaximumBatchingWindowInSeconds"] = 800 }, nil,
			[]string{"want at least 6 × (Timeout + batching window) = 5520 s"}},
		{"no dead-letter queue", func(d deploy.Template) { delete(props(d, "WorkQueue"), "RedrivePolicy") }, nil,
			[]string{"function batch-test: event Queue: queue WorkQueue has no RedrivePolicy"}},
		{"a dead-letter queue nobody watches", func(d deploy.Template) { delete(resources(d), "WorkDeadLettersAlarm") }, nil,
			[]string{"dead-letter queue WorkDeadLetters (of WorkQueue): no CloudWatch alarm"}},
		{"a delivery consumer the topic does not feed", func(d deploy.Template) {
			work(d)["Queue"] = getAtt("DeliveryQueue", "Arn")
			props(d, "BatchTestFunction")["Timeout"] = 45
			delete(resources(d), "DeliverySubscription")
		}, func(j *server.Job) { j.Queue = server.DeliveryQueue },
			[]string{"function batch-test: queue DeliveryQueue is not subscribed to topic Events"}},
		{"a delivery queue the topic may not send to", func(d deploy.Template) {
			work(d)["Queue"] = getAtt("DeliveryQueue", "Arn")
			props(d, "BatchTestFunction")["Timeout"] = 45
			delete(resources(d), "DeliveryQueuePolicy")
		}, func(j *server.Job) { j.Queue = server.DeliveryQueue },
			[]string{"function batch-test: queue DeliveryQueue has no policy letting topic Events send to it"}},
		{"grants beyond the job's needs", func(d deploy.Template) { addPolicy(d, "BatchTestFunction", ref("FilesDeletePolicy")) }, nil,
			[]string{"function batch-test: is granted s3:DeleteObject on ${Files.Arn}/files/*"}},
		{"the poller's policy counted", func(d deploy.Template) {
			for _, p := range []string{"FilesReadPolicy", "FilesWritePolicy", "FilesDeletePolicy"} {
				addPolicy(d, "BatchTestFunction", ref(p))
			}
		}, nil, []string{"function batch-test: 8 managed policies with the 3 SAM attaches, over 7"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			d, _ := withQueueJob(t)
			tc.mutate(d)
			job := testJob()
			if tc.job != nil {
				tc.job(&job)
			}
			fns, err := deploy.FunctionsOf(server.Routes(), append(server.Jobs(), job))
			if err != nil {
				t.Fatal(err)
			}
			problems := deploy.Check(d, fns)
			for _, want := range tc.want {
				if !slices.ContainsFunc(problems, func(p error) bool { return strings.Contains(p.Error(), want) }) {
					t.Errorf("no problem says %q; got:\n%s", want, join(problems))
				}
			}
		})
	}
}

// TestJobErrorAlarmsSplit: past MaxAlarmMetrics jobs, the jobs' errors take
// a second metric-math alarm, and the check passes.
func TestJobErrorAlarmsSplit(t *testing.T) {
	jobs := server.Jobs()
	for i := 0; len(jobs) <= deploy.MaxAlarmMetrics; i++ {
		j := testJob()
		j.Name = fmt.Sprintf("batch-test-%d", i)
		jobs = append(jobs, j)
	}
	fns, err := deploy.FunctionsOf(server.Routes(), jobs)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := generated(t, fns)
	for _, p := range deploy.Check(tmpl, fns) {
		t.Error(p)
	}
	for _, id := range []string{deploy.JobErrorsAlarmID(0), deploy.JobErrorsAlarmID(1)} {
		if n := len(props(tmpl, id)["Metrics"].([]any)); n > deploy.MaxAlarmMetrics+1 {
			t.Errorf("alarm %s reads %d metrics", id, n-1)
		}
	}
}
