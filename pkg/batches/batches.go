// Package batches owns the Batch API and the engine that runs it: batch
// records and their state machine, the HTTP handlers, and the worker that
// plans a batch (validates its input file as a whole and cuts it into
// chunks of byte ranges), runs each chunk's lines through the call layer as
// the key that created the batch, and finalizes it (the output and error
// files are manifests of the chunks' objects). The same code runs in the
// local process, on its durable queue, and in the cloud, as the
// batch-worker and batch-sweeper functions of the jobs table.
//
// Every input line ends up exactly once in the output file or the error
// file, whatever crashes, redeliveries and races happen: see the package's
// section of docs/architecture.md ("The batch engine") for how.
package batches

import (
	"context"
	"sync"
	"time"

	"github.com/sluice-gateway/sluice/pkg/auth"
	"github.com/sluice-gateway/sluice/pkg/batchinput"
	"github.com/sluice-gateway/sluice/pkg/files"
	"github.com/sluice-gateway/sluice/pkg/ids"
	"github.com/sluice-gateway/sluice/pkg/modelcall"
	"github.com/sluice-gateway/sluice/pkg/spend"
	"github.com/sluice-gateway/sluice/pkg/store"
	"github.com/sluice-gateway/sluice/pkg/traces"
)

// Batch statuses, as OpenAI names them.
const (
	StatusValidating = "validating"
	StatusFailed     = "failed"
	StatusInProgress = "in_progress"
	StatusFinalizing = "finalizing"
	StatusCompleted  = "completed"
	StatusExpired    = "expired"
	StatusCancelling = "cancelling"
	StatusCancelled  = "cancelled"
)

// terminal reports whether a batch in status has ended.
func terminal(status string) bool {
	switch status {
	case StatusFailed, StatusCompleted, StatusExpired, StatusCancelled:
		return true
	}
	return false
}

// Batch is the OpenAI Batch object.
type Batch struct {
	ID               string            `json:"id"`
	Object           string            `json:"object"`
	Endpoint         string            `json:"endpoint"`
	Errors           *Errors           `json:"errors"`
	InputFileID      string            `json:"input_file_id"`
	CompletionWindow string            `json:"completion_window"`
	Status           string            `json:"status"`
	OutputFileID     *string           `json:"output_file_id"`
	ErrorFileID      *string           `json:"error_file_id"`
	CreatedAt        int64             `json:"created_at"`
	InProgressAt     *int64            `json:"in_progress_at"`
	ExpiresAt        *int64            `json:"expires_at"`
	FinalizingAt     *int64            `json:"finalizing_at"`
	CompletedAt      *int64            `json:"completed_at"`
	FailedAt         *int64            `json:"failed_at"`
	ExpiredAt        *int64            `json:"expired_at"`
	CancellingAt     *int64            `json:"cancelling_at"`
	CancelledAt      *int64            `json:"cancelled_at"`
	RequestCounts    RequestCounts     `json:"request_counts"`
	Metadata         map[string]string `json:"metadata"`
	Usage            Usage             `json:"usage"`
	// ResponseCost is what the batch's lines have cost so far (USD, as
	// each line's log event is priced: its response_cost), and
	// ReservedCost what the batch still holds of its budgets (null when
	// it reserved nothing or has ended). Neither is OpenAI's: both are
	// extra fields that OpenAI's SDKs and LiteLLM keep or ignore
	// (docs/spend.md).
	ResponseCost float64  `json:"response_cost"`
	ReservedCost *float64 `json:"reserved_cost"`
}

// Errors is a batch's errors: the input lines its plan refused.
type Errors struct {
	Object string      `json:"object"`
	Data   []LineError `json:"data"`
}

// LineError is one entry of Errors. Line is the 1-based line of the input
// file, null for an entry about the file as a whole.
type LineError struct {
	Code    string  `json:"code"`
	Message string  `json:"message"`
	Param   *string `json:"param"`
	Line    *int    `json:"line"`
}

// RequestCounts counts a batch's lines: every line of the input (total),
// those that answered (completed) and those that ran and failed (failed).
// Lines a cancel or the expiry kept from running are in neither count (and
// in the error file).
type RequestCounts struct {
	Total     int64 `json:"total"`
	Completed int64 `json:"completed"`
	Failed    int64 `json:"failed"`
}

// Usage is the token usage of a batch's lines so far.
type Usage struct {
	InputTokens         int64               `json:"input_tokens"`
	InputTokensDetails  InputTokensDetails  `json:"input_tokens_details"`
	OutputTokens        int64               `json:"output_tokens"`
	OutputTokensDetails OutputTokensDetails `json:"output_tokens_details"`
	TotalTokens         int64               `json:"total_tokens"`
}

// InputTokensDetails breaks input tokens down.
type InputTokensDetails struct {
	CachedTokens int64 `json:"cached_tokens"`
}

// OutputTokensDetails breaks output tokens down.
type OutputTokensDetails struct {
	ReasoningTokens int64 `json:"reasoning_tokens"`
}

// Principals rebuilds the principal of a stored key (auth.Service): a
// batch's lines run as the key that created it.
type Principals interface {
	PrincipalOf(ctx context.Context, token string) (auth.Principal, error)
}

// Models says which model names the gateway serves (models.Router).
type Models interface {
	Has(model string) bool
}

// Deps are what the service works on.
type Deps struct {
	Records store.Records
	Blobs   store.Blobs
	// Work is the work queue: plan, chunk and finalize messages.
	Work  store.Queue
	Files *files.Service
	// Keys rebuilds the creating key's principal for the lines; Admit
	// admits each line against that key's and team's limits, as the HTTP
	// edge admits a request.
	Keys  Principals
	Admit modelcall.Admitter
	// Operations are the model endpoints a line's url names.
	Operations modelcall.Operations
	Models     Models
	// Tracer, when on, makes a span of each line, linked to its batch.
	Tracer *traces.Tracer
	// Prices prices a dry run's tokens (nil: every model's cost unknown).
	Prices Prices
	// Budget reserves at create a batch's estimate against its caller's
	// budgets, refusing the batch when they cannot hold it (nil: no
	// check).
	Budget Budget
	// Native, when set, runs native batches: a create naming
	// custom_llm_provider openai, azure or bedrock (or a model of such a
	// deployment) runs on that provider's own batch API. nil: none.
	Native *NativeDeps
}

// Budget reserves a batch's estimate against its caller's budgets
// (spend.Budgets): the reservation and the writes that take it, which the
// create puts in its own transaction; Took and Released tell the
// process's admissions when a reservation was taken and given back.
type Budget interface {
	Budgeted(p auth.Principal) bool
	Reserve(ctx context.Context, p auth.Principal, cost float64) (spend.Reservation, []store.Write, error)
	Took(r spend.Reservation)
	Released(r spend.Reservation)
}

// Options tune the service. Zero values take the defaults.
type Options struct {
	// Windows are the completion windows a batch may ask for; nil: 24h.
	Windows []string
	// Concurrency is how many lines run at once in this process, across
	// every chunk it runs (default 100).
	Concurrency int
	// ChunkLines and ChunkBytes cut an input file into chunks: a chunk ends
	// after this many lines or once it holds this many bytes.
	ChunkLines int
	ChunkBytes int64
	// Lease is how long a chunk's lease lasts without renewal; a running
	// chunk renews it every Lease/4 and keeps its message hidden as long.
	Lease time.Duration
	// MaxRun bounds one run of a chunk (less when the invocation's deadline
	// comes first): then it saves what it did and queues the rest.
	MaxRun time.Duration
	// RetryDelay is the first delay before a failed message is delivered
	// again; it triples with each receive.
	RetryDelay time.Duration
	// StatusEvery is how often a running chunk rereads its batch (a cancel,
	// the expiry).
	StatusEvery time.Duration
	// ProgressEvery is how often a running chunk publishes the lines it
	// finished since its last commit to the batch's counts (one write per
	// run and interval, and only when lines finished), so progress moves
	// while a chunk runs rather than when it ends.
	ProgressEvery time.Duration
	// StaleAfter is how long a batch may sit in validating, or with every
	// chunk done and no finalize, before the sweep sends its message again.
	StaleAfter time.Duration
	// SingleProcess says this process is the only one on its store (the
	// embedded backend, which its lock makes so): a lease held by another
	// process is void, since that process has ended.
	SingleProcess bool
	// MaxLineBytes bounds an input line (the JSON body limit).
	MaxLineBytes int
	// Now is the clock (expiry, leases); nil means time.Now.
	Now func() time.Time
}

// Defaults.
const (
	DefaultConcurrency = 100
	DefaultChunkLines  = 1000
	DefaultChunkBytes  = 8 << 20
	DefaultLease       = 2 * time.Minute
	DefaultMaxRun      = 10 * time.Minute
	DefaultRetryDelay  = 10 * time.Second
	DefaultStatusEvery = 2 * time.Second
	// DefaultProgressEvery keeps a batch's request_counts moving at least
	// every 2 s while its lines finish (issue 34).
	DefaultProgressEvery = time.Second
	DefaultStaleAfter    = 5 * time.Minute
	// DefaultWindow is OpenAI's completion window.
	DefaultWindow = "24h"
	// DefaultSweepInterval is how often the local process runs the sweep
	// (the cloud's batch-sweeper runs every 5 minutes).
	DefaultSweepInterval = time.Minute
)

// maxPieces bounds the pieces a chunk records (one per run that saved
// progress without finishing it), so that a chunk record stays small and an
// output file's manifest (one object per piece) stays within files.MaxParts.
const maxPieces = 32

// Service is the batches capability. It knows nothing of HTTP: Handlers
// serve it, and the worker (Work) and the sweep (Sweep) run on it.
type Service struct {
	deps     Deps
	opts     Options
	sem      chan struct{} // one token per line running in this process
	instance string        // this process, in the leases it takes
	wake     wakeup        // chunk records this process changed
	// lineBuffers hold answers being made into output lines.
	lineBuffers sync.Pool
	// closing holds the batches this process saw start closing (a cancel
	// or the expiry): its runs stop starting their lines at once, where
	// other processes' runs notice within StatusEvery.
	closing sync.Map // batch id → struct{}
	// native runs native batches (Deps.Native, with its defaults); nil: none.
	native *NativeDeps
}

// NewService returns the batches service.
func NewService(deps Deps, opts Options) *Service {
	if len(opts.Windows) == 0 {
		opts.Windows = []string{DefaultWindow}
	}
	if opts.Concurrency <= 0 {
		opts.Concurrency = DefaultConcurrency
	}
	if opts.ChunkLines <= 0 {
		opts.ChunkLines = DefaultChunkLines
	}
	if opts.ChunkBytes <= 0 {
		opts.ChunkBytes = DefaultChunkBytes
	}
	if opts.Lease <= 0 {
		opts.Lease = DefaultLease
	}
	if opts.MaxRun <= 0 {
		opts.MaxRun = DefaultMaxRun
	}
	if opts.RetryDelay <= 0 {
		opts.RetryDelay = DefaultRetryDelay
	}
	if opts.StatusEvery <= 0 {
		opts.StatusEvery = DefaultStatusEvery
	}
	if opts.ProgressEvery <= 0 {
		opts.ProgressEvery = DefaultProgressEvery
	}
	if opts.StaleAfter <= 0 {
		opts.StaleAfter = DefaultStaleAfter
	}
	if opts.MaxLineBytes <= 0 {
		opts.MaxLineBytes = batchinput.DefaultMaxLineBytes
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	s := &Service{
		deps: deps, opts: opts,
		sem:      make(chan struct{}, opts.Concurrency),
		instance: ids.New(""),
		wake:     newWakeup(),
	}
	s.lineBuffers.New = func() any { b := make([]byte, 0, 64<<10); return &b }
	if deps.Native != nil {
		s.native = deps.Native.withDefaults()
	}
	return s
}

func (s *Service) now() time.Time { return s.opts.Now() }
