package models

import (
	"context"
	"fmt"
	"io"

	"github.com/sluice-gateway/sluice/pkg/api"
	"github.com/sluice-gateway/sluice/pkg/config"
)

// Batcher is an Endpoint whose provider runs batches itself, at about half
// the price of single calls (OpenAI's and Azure's Batch API, Bedrock's
// batch inference): the native batches of pkg/batches.
type Batcher interface {
	// SubmitBatch hands the batch's input to the provider and creates the
	// provider's batch. When it fails it leaves nothing behind: a file it
	// uploaded for a batch the provider refused is deleted again.
	SubmitBatch(ctx context.Context, in *BatchInput) (BatchRef, error)
	// PollBatch reads the provider's batch.
	PollBatch(ctx context.Context, ref BatchRef) (BatchState, error)
	// CancelBatch asks the provider to cancel its batch.
	CancelBatch(ctx context.Context, ref BatchRef) error
	// BatchResults opens the provider's output (ResultsOut) or error
	// (ResultsErr) lines in file (BatchState.OutputFile, ErrorFile), as
	// OpenAI batch output lines; nil when there is no such file.
	BatchResults(ctx context.Context, ref BatchRef, kind, file string, st BatchStore) (io.ReadCloser, error)
}

// BatchCleaner is a Batcher that leaves objects of its own in sluice's
// store (Bedrock's input and output): CleanBatch removes them once the
// batch's results are copied.
type BatchCleaner interface {
	CleanBatch(ctx context.Context, ref BatchRef, st BatchStore) error
}

// Kinds of BatchResults.
const (
	ResultsOut = "output"
	ResultsErr = "error"
)

// BatchInput is a batch as a provider's batch API is given it.
type BatchInput struct {
	// ID is sluice's batch id (batch_…): the provider's metadata and job
	// names carry it, so the provider's console leads back to sluice.
	ID       string
	Endpoint string // /v1/chat/completions, /v1/embeddings, …
	Window   string // 24h
	Metadata map[string]string
	// Lines are the batch's JSONL lines, each line's body.model already
	// the provider's model (or deployment) name. Read once, streaming.
	Lines io.Reader
	// Store is sluice's blob store, for a provider that reads its input
	// from (and writes its output to) a bucket (Bedrock).
	Store BatchStore
}

// BatchStore is sluice's blob store as a native batch uses it.
type BatchStore interface {
	Put(ctx context.Context, key string, r io.Reader) (int64, error)
	Get(ctx context.Context, key string, offset, length int64) (io.ReadCloser, error)
	Delete(ctx context.Context, key string) error
	// S3URI is key's s3:// URI; ok is false when the store is not in S3.
	S3URI(key string) (uri string, ok bool)
}

// BatchRef names a provider's batch: what sluice keeps to poll, cancel and
// read it.
type BatchRef struct {
	// FileID is the provider's input file (OpenAI, Azure) or the key of the
	// input object in sluice's store (Bedrock).
	FileID string `json:"file_id"`
	// BatchID is the provider's batch id (OpenAI, Azure) or job ARN (Bedrock).
	BatchID string `json:"batch_id"`
	// Prefix is where in sluice's store the batch's objects live (Bedrock).
	Prefix string `json:"prefix,omitempty"`
	// Endpoint is the batch's endpoint (Bedrock converts output by it).
	Endpoint string `json:"endpoint,omitempty"`
}

// BatchState is a provider's batch as polled, in OpenAI's terms. Times are
// Unix seconds, 0 for not yet.
type BatchState struct {
	Status                           string // OpenAI's batch statuses
	Total, Completed, Failed         int64
	InProgressAt, FinalizingAt       int64
	CompletedAt, FailedAt, ExpiredAt int64
	CancellingAt, CancelledAt        int64
	// OutputFile and ErrorFile name the provider's results of each kind
	// once the batch has ended ("" for none), for BatchResults.
	OutputFile, ErrorFile string
	// Errors are the provider's errors about the batch as a whole (or its
	// lines, for a batch it refused).
	Errors []BatchError
}

// BatchError is one of a provider batch's errors.
type BatchError struct {
	Code    string
	Message string
	Param   string
	Line    int // 1-based; 0 when about the whole batch
}

// Deployments returns the model_list, in order: a native batch picks its
// deployment from it (OpenDeployment).
func (r *Router) Deployments() []config.Deployment {
	out := make([]config.Deployment, len(r.list))
	for i, d := range r.list {
		out[i] = d.cfg
	}
	return out
}

// OpenDeployment opens the i-th deployment of the model_list (as
// Deployments lists it) and returns its endpoint and target.
func (r *Router) OpenDeployment(ctx context.Context, i int) (Endpoint, Target, error) {
	if i < 0 || i >= len(r.list) {
		return nil, Target{}, fmt.Errorf("models: no deployment %d", i)
	}
	d := r.list[i]
	if d.mock != nil {
		return nil, d.target, api.InvalidValue("model", "Model '%s' answers with a mock_response: it has no provider to run a batch.", d.target.ModelGroup)
	}
	ep, err := r.open(ctx, d)
	return ep, d.target, err
}
