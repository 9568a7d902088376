package deploy_test

import (
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/sluice-gateway/sluice/pkg/deploy"
	"github.com/sluice-gateway/sluice/pkg/server"
)

// withJob returns template.yaml generated with job added to the jobs table,
// and the functions.
func withJob(t *testing.T, job server.Job) (deploy.Template, []deploy.Function) {
	t.Helper()
	fns, err := deploy.FunctionsOf(server.Routes(), append(server.Jobs(), job))
	if err != nil {
		t.Fatal(err)
	}
	return generated(t, fns), fns
}

// TestQueueJobTemplate: what make template writes for a queue job passes
// the check, so a worker of a later issue is one entry in the jobs table and
// its handler.
func TestQueueJobTemplate(t *testing.T) {
	fns, err := deploy.FunctionsOf(server.Routes(), append(server.Jobs(), testJob()))
	if err != nil {
		t.Fatal(err)
	}
	text, err := deploy.Generate(readTemplate(t), fns)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range deploy.Check(text, fns) {
		t.Error(p)
	}
	ev := event(mustParse(t, text), "BatchTestFunction", "Queue")
	if deploy.Render(ev["Queue"]) != "${WorkQueue.Arn}" || deploy.Render(ev["ScalingConfig"]) != `{"MaximumConcurrency":{"Ref":"BatchTestMaxConcurrency"}}` ||
		!slices.Contains(ev["FunctionResponseTypes"].([]any), any("ReportBatchItemFailures")) {
		t.Errorf("batch-test's queue event: %v", ev)
	}
}

func mustParse(t *testing.T, text []byte) deploy.Template {
	t.Helper()
	tmpl, err := deploy.Parse(text)
	if err != nil {
		t.Fatal(err)
	}
	return tmpl
}

// TestQueueJobCoreDrift: the core holds what a queue job's generated
// section relies on: a visibility timeout that outlasts its retries and its
// batching window, a dead-letter queue that is watched, and for the
// delivery queue the topic's subscription and its permission to send.
func TestQueueJobCoreDrift(t *testing.T) {
	delivery := func(j *server.Job) { j.Queue, j.Timeout = server.DeliveryQueue, 45*time.Second }
	for _, tc := range []struct {
		name   string
		mutate func(deploy.Template)
		job    func(*server.Job)
		want   []string
	}{
		{"a queue that redelivers while a retry runs", func(d deploy.Template) { props(d, "WorkQueue")["VisibilityTimeout"] = 600 }, nil,
			[]string{"function batch-test: queue WorkQueue VisibilityTimeout 600 s, want at least 6 × (Timeout + batching window) = 720 s"}},
		{"a batching window the visibility does not cover", nil, func(j *server.Job) { j.Timeout, j.BatchWindow = 15*time.Minute, time.Minute },
			[]string{"want at least 6 × (Timeout + batching window) = 5760 s"}},
		{"no dead-letter queue", func(d deploy.Template) { delete(props(d, "WorkQueue"), "RedrivePolicy") }, nil,
			[]string{"function batch-test: queue WorkQueue has no RedrivePolicy"}},
		{"a dead-letter queue nobody watches", func(d deploy.Template) { delete(resources(d), "WorkDeadLettersAlarm") }, nil,
			[]string{"dead-letter queue WorkDeadLetters (of WorkQueue): no CloudWatch alarm"}},
		{"a delivery consumer the topic does not feed", func(d deploy.Template) { delete(resources(d), "DeliverySubscription") }, delivery,
			[]string{"function batch-test: queue DeliveryQueue is not subscribed to topic Events"}},
		{"a delivery queue the topic may not send to", func(d deploy.Template) { delete(resources(d), "DeliveryQueuePolicy") }, delivery,
			[]string{"function batch-test: queue DeliveryQueue has no policy letting topic Events send to it"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			job := testJob()
			if tc.job != nil {
				tc.job(&job)
			}
			d, fns := withJob(t, job)
			if tc.mutate != nil {
				tc.mutate(d)
			}
			problems := deploy.CheckCore(d, fns)
			for _, want := range tc.want {
				if !slices.ContainsFunc(problems, func(p error) bool { return strings.Contains(p.Error(), want) }) {
					t.Errorf("no problem says %q; got:\n%s", want, join(problems))
				}
			}
		})
	}
}

// TestGenerateCountsTheRolesPolicies: a job whose capabilities take more
// managed policies than a role may have (SAM's three included) is refused
// by make template, which says to bundle them.
func TestGenerateCountsTheRolesPolicies(t *testing.T) {
	job := testJob()
	job.Needs = []server.Capability{server.RecordsRead, server.RecordsWrite, server.FilesDelete, server.Seal, server.WorkSend}
	fns, err := deploy.FunctionsOf(server.Routes(), append(server.Jobs(), job))
	if err != nil {
		t.Fatal(err)
	}
	_, err = deploy.Generate(readTemplate(t), fns)
	if err == nil || !strings.Contains(err.Error(), "function batch-test: ") || !strings.Contains(err.Error(), "with the 3 SAM attaches, over 7") {
		t.Errorf("Generate: %v, want the policy count refused", err)
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
	for _, p := range deploy.CheckCore(tmpl, fns) {
		t.Error(p)
	}
	for _, id := range []string{deploy.JobErrorsAlarmID(0), deploy.JobErrorsAlarmID(1)} {
		if n := len(props(tmpl, id)["Metrics"].([]any)); n > deploy.MaxAlarmMetrics+1 {
			t.Errorf("alarm %s reads %d metrics", id, n-1)
		}
	}
}
