package server

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"regexp"
	"time"

	"github.com/sluice-gateway/sluice/pkg/batches"
	"github.com/sluice-gateway/sluice/pkg/callbacks/delivery"
	"github.com/sluice-gateway/sluice/pkg/files"
	"github.com/sluice-gateway/sluice/pkg/logevent"
	"github.com/sluice-gateway/sluice/pkg/store"
)

// Job is a function that serves no route: it runs on a schedule or consumes
// a queue. The jobs table (Jobs) declares each once — its name, its trigger,
// its handler and its needs — and everything else is derived from it: the
// Lambda entry point (pkg/gateway/lambdafn), the local process's background
// loops (gateway.RunJob) and the template check (pkg/deploy).
type Job struct {
	// Name is the Lambda function: functions/<Name>/main.go, its template
	// resource, its sample events.
	Name string
	// Schedule triggers a scheduled job; zero for a queue job.
	Schedule Schedule
	// Queue is the queue a queue job consumes; "" for a scheduled job.
	Queue Queue
	// Workers is how many messages a queue job handles at once: within one
	// Lambda invocation's batch, and in the local process.
	Workers int
	// Batch is how many messages one Lambda invocation of a queue job may
	// be given (0: Workers, at most 10) and BatchWindow how long the event
	// source gathers them: SQS hands more than 10 only with a window of at
	// least a second. Fewer, fuller invocations are what a job that is
	// cheap per message pays least for.
	Batch       int
	BatchWindow time.Duration
	// Needs is what the handler touches in the deployment.
	Needs []Capability
	// Memory (MB, 0: pkg/deploy's default) and Timeout size the job's
	// Lambda function; `make template` writes them into template.yaml.
	Memory  int
	Timeout time.Duration
	// Run builds a scheduled job's handler over the services.
	Run func(*Services) RunFunc
	// Handle builds a queue job's handler over the services.
	Handle func(*Services) MessageHandler
}

// Schedule is when a scheduled job runs.
type Schedule struct {
	// Cloud is the EventBridge schedule expression of the cloud's runs:
	// rate(1 hour), cron(0 3 * * ? *).
	Cloud string
	// Local is the local process's interval: a run at start, then one every
	// Local.
	Local time.Duration
}

// RunFunc is a scheduled job's handler: one run. It stops when ctx ends,
// leaving the rest to the next run.
type RunFunc func(ctx context.Context) error

// MessageHandler handles one queue message: nil means done (the message is
// deleted), an error leaves it for redelivery and, after the queue's receive
// limit, its dead-letter queue. It is the handler store.Consume runs locally
// and lambdaedge.SQS runs in the cloud.
type MessageHandler func(ctx context.Context, m store.Message) error

// Queue names a queue of the storage backend that a job consumes.
type Queue string

// The queues a job can consume.
const (
	// WorkQueue holds batch work (store.Backend.Work; the SQS WorkQueue in
	// the cloud).
	WorkQueue Queue = "work"
	// DeliveryQueue holds the log events published on the bus
	// (store.Backend.Deliveries; in the cloud the SQS DeliveryQueue, the
	// SNS topic's subscription).
	DeliveryQueue Queue = "deliveries"
)

// In returns q in backend b.
func (q Queue) In(b *store.Backend) (store.Queue, error) {
	switch q {
	case WorkQueue:
		return b.Work, nil
	case DeliveryQueue:
		return b.Deliveries, nil
	}
	return nil, fmt.Errorf("server: no queue %q", q)
}

// ScheduleMargin is how long before its invocation's deadline a scheduled
// run stops, so that it returns and logs what it did instead of being cut
// off.
const ScheduleMargin = 10 * time.Second

// scheduleExpression is EventBridge's schedule expression syntax.
var scheduleExpression = regexp.MustCompile(`^(rate\((1 (minute|hour|day)|([2-9]|[1-9][0-9]+) (minutes|hours|days))\)|cron\(\S+( \S+){5}\))$`)

// Jobs returns the jobs table: every function that serves no route.
func Jobs() []Job {
	return []Job{
		// Finishes file expiry and deletion: expired files and uploads lose
		// their bytes and records, interrupted deletions complete.
		{Name: "files-sweep", Schedule: Schedule{Cloud: "rate(1 hour)", Local: files.DefaultSweepInterval}, Timeout: 10 * time.Minute,
			Needs: []Capability{RecordsRead, RecordsWrite, FilesDelete}, Run: func(s *Services) RunFunc { return s.sweepFiles }},
		// Plans, runs and finalizes batches: each message is a plan, a
		// chunk of lines (run through the model operations as the
		// creating key) or a finalize. Workers chunks at once share the
		// process's SLUICE_BATCH_CONCURRENCY lines in flight.
		{Name: "batch-worker", Queue: WorkQueue, Workers: batchWorkers, Needs: batchWork, Memory: 1024, Timeout: 15 * time.Minute,
			Handle: func(s *Services) MessageHandler { return s.Batches.Work }},
		// Finds batches past their window (their finalize expires them) and
		// resends what a stuck batch may have lost.
		{Name: "batch-sweeper", Schedule: Schedule{Cloud: "rate(5 minutes)", Local: batches.DefaultSweepInterval}, Timeout: 2 * time.Minute,
			Needs: []Capability{RecordsRead, WorkSend}, Run: func(s *Services) RunFunc { return s.sweepBatches }},
		// Polls the open native batches (oldest first, a bounded number a
		// run), mirrors their state and copies the output and error files
		// of those that ended, with a log event per line.
		{Name: "batch-native-poll", Schedule: Schedule{Cloud: "rate(1 minute)", Local: batches.DefaultPollInterval}, Timeout: 5 * time.Minute,
			Needs: nativeBatch(RecordsRead, RecordsWrite, FilesRead, FilesWrite, FilesDelete), Run: func(s *Services) RunFunc { return s.pollNativeBatches }},
		// Delivers log events to the logging callbacks (pkg/callbacks/delivery):
		// a message at a time per worker, the destinations' requests shared
		// between them.
		// An invocation takes up to 100 messages gathered for a second: one
		// invocation per call's message would cost as much as the call's own.
		{Name: "callback-delivery", Queue: DeliveryQueue, Workers: 32, Batch: 100, BatchWindow: time.Second, Timeout: 45 * time.Second,
			Needs:  []Capability{RecordsRead, RecordsWrite, ClaimCheckRead, DeliveryDeadLetter, Seal, ProviderSecrets},
			Handle: func(s *Services) MessageHandler { return s.countThenDeliver }},
	}
}

// countThenDeliver counts the spend of a delivery message's log events
// (pkg/spend: exactly once, however often the message comes), then
// delivers them. A message that cannot be counted now is left for
// redelivery; one that cannot be read goes to the delivery, which
// dead-letters it.
func (s *Services) countThenDeliver(ctx context.Context, m store.Message) error {
	// A dead letter (msg.Callback) is not counted: its events were, before
	// the delivery that gave up on them. A named message is counted once
	// by its name (spend.Counter).
	if msg, err := delivery.DecodeMessage(m); err == nil && msg.Callback == "" {
		if err := s.Counter.CountMessage(ctx, msg.Name, msg.Events); err != nil {
			return err
		}
	}
	return s.Delivery.Handle(ctx, m)
}

// DeliverEvents is the delivery queue's job (countThenDeliver) for the log
// events of message m held in memory already: the local process's handoff
// (pkg/handoff) gives them to it without a queue transaction when the job
// runs in the emitter's process (gateway.RunJob). They are counted by the
// message's ID, the name its queue copy carries if the handoff writes one.
func (s *Services) DeliverEvents(ctx context.Context, m store.Message, events []*logevent.Event) error {
	if err := s.Counter.CountMessage(ctx, m.ID, events); err != nil {
		return err
	}
	return s.Delivery.HandleEvents(ctx, m, events)
}

// nativeBatch is what a function serving native batches needs besides
// caps: the provider's credentials, Bedrock's batch jobs, and the log
// events of mirrored lines.
func nativeBatch(caps ...Capability) []Capability {
	return append(append(caps, passthroughCall...), BedrockBatch)
}

// pollNativeBatches runs one poll of the native batches and logs it.
func (s *Services) pollNativeBatches(ctx context.Context) error {
	res, err := s.Batches.PollNative(ctx)
	if err != nil {
		return fmt.Errorf("batches: native poll (%d polled): %w", res.Polled, err)
	}
	level := slog.LevelDebug
	if res.Ended+res.Failed > 0 {
		level = slog.LevelInfo
	}
	slog.Log(ctx, level, "batches: native poll done", "polled", res.Polled, "ended", res.Ended, "failed", res.Failed)
	return nil
}

// batchWorkers is how many work messages the batch worker handles at once:
// the SQS event source's batch size, so that every message an invocation
// receives starts at once.
const batchWorkers = 10

// batchWork is what the batch worker touches: the batch and chunk records
// (and the key and team records of the key a batch runs as), the input's
// bytes, its result objects (written, and removed when a run loses its
// chunk), the work queue (the next messages; each one's visibility), the
// rate-limit windows its lines are admitted against, and a model call's
// needs.
var batchWork = append([]Capability{RecordsRead, RecordsWrite, Limits, FilesRead, FilesWrite, FilesDelete, WorkSend, WorkExtend}, modelCall...)

// LookupJob returns the job named name.
func LookupJob(name string) (Job, bool) {
	for _, j := range Jobs() {
		if j.Name == name {
			return j, true
		}
	}
	return Job{}, false
}

// Validate checks a job's declaration: a name and exactly one trigger, with
// the handler and settings that trigger needs.
func (j Job) Validate() error {
	var errs []error
	if j.Name == "" {
		errs = append(errs, errors.New("no name"))
	}
	switch scheduled, queued := j.Schedule != (Schedule{}), j.Queue != ""; {
	case scheduled && queued:
		errs = append(errs, errors.New("both a schedule and a queue"))
	case scheduled:
		if !scheduleExpression.MatchString(j.Schedule.Cloud) {
			errs = append(errs, fmt.Errorf("schedule %q is not an EventBridge rate(…) or cron(…) expression", j.Schedule.Cloud))
		}
		if j.Schedule.Local <= 0 {
			errs = append(errs, errors.New("no local interval"))
		}
		if j.Run == nil || j.Handle != nil {
			errs = append(errs, errors.New("a scheduled job has a Run handler and no Handle"))
		}
	case queued:
		if _, err := j.Queue.In(&store.Backend{}); err != nil {
			errs = append(errs, err)
		}
		if j.Workers < 1 {
			errs = append(errs, fmt.Errorf("workers = %d, want ≥ 1", j.Workers))
		}
		errs = append(errs, j.checkBatch()...)
		if j.Handle == nil || j.Run != nil {
			errs = append(errs, errors.New("a queue job has a Handle handler and no Run"))
		}
	default:
		errs = append(errs, errors.New("no trigger: want a schedule or a queue"))
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("server: job %q: %w", j.Name, err)
	}
	return nil
}

// Capabilities is what job j needs, sorted.
func (j Job) Capabilities() []Capability { return SortCapabilities(j.Needs) }

// sweepBatches runs one batch sweep and logs what it queued.
func (s *Services) sweepBatches(ctx context.Context) error {
	res, err := s.Batches.Sweep(ctx)
	if err != nil {
		return fmt.Errorf("batches: sweep (%d expired, %d resent): %w", res.Expired, res.Resent, err)
	}
	level := slog.LevelDebug
	if res.Expired+res.Resent > 0 {
		level = slog.LevelInfo
	}
	slog.Log(ctx, level, "batches: sweep done", "expired", res.Expired, "resent", res.Resent)
	// In a Lambda function no one scrapes: the sweep reports the gauges.
	s.Metrics.EmitGauges(ctx)
	return nil
}

// sweepFiles runs one files sweep and logs what it removed.
func (s *Services) sweepFiles(ctx context.Context) error {
	res, err := s.Files.Sweep(ctx)
	if err != nil {
		return fmt.Errorf("files: sweep (%d files and %d uploads removed, %d failed): %w", res.Files, res.Uploads, res.Failed, err)
	}
	level := slog.LevelDebug
	if res.Files+res.Uploads > 0 {
		level = slog.LevelInfo
	}
	slog.Log(ctx, level, "files: sweep done", "files", res.Files, "uploads", res.Uploads)
	return nil
}

// Lambda's limits on an SQS event source (CreateEventSourceMapping): a
// standard queue's batch takes up to 10,000 messages, more than 10 only with
// a batching window, which is at most 300 s.
const (
	maxBatch          = 10000
	maxUnwindowed     = 10
	maxBatchingWindow = 300 * time.Second
)

// BatchSize is how many messages one Lambda invocation of the queue job may
// be given.
func (j Job) BatchSize() int {
	if j.Batch > 0 {
		return j.Batch
	}
	return min(max(j.Workers, 1), maxUnwindowed)
}

func (j Job) checkBatch() []error {
	var errs []error
	if j.Batch < 0 || j.Batch > maxBatch {
		errs = append(errs, fmt.Errorf("batch = %d, want 0 to %d", j.Batch, maxBatch))
	}
	if j.BatchWindow < 0 || j.BatchWindow > maxBatchingWindow || j.BatchWindow%time.Second != 0 {
		errs = append(errs, fmt.Errorf("batch window %v, want whole seconds up to %v", j.BatchWindow, maxBatchingWindow))
	}
	if j.BatchSize() > maxUnwindowed && j.BatchWindow < time.Second {
		errs = append(errs, fmt.Errorf("batch = %d needs a batch window of at least 1s (SQS hands more than %d messages only with one)", j.BatchSize(), maxUnwindowed))
	}
	return errs
}
