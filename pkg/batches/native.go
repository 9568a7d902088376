package batches

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"strings"
	"time"

	"github.com/sluice-gateway/sluice/pkg/api"
	"github.com/sluice-gateway/sluice/pkg/auth"
	"github.com/sluice-gateway/sluice/pkg/batchinput"
	"github.com/sluice-gateway/sluice/pkg/config"
	"github.com/sluice-gateway/sluice/pkg/files"
	"github.com/sluice-gateway/sluice/pkg/ids"
	"github.com/sluice-gateway/sluice/pkg/logevent"
	"github.com/sluice-gateway/sluice/pkg/models"
	"github.com/sluice-gateway/sluice/pkg/store"
)

// Providers whose own batch API a native batch runs on.
const (
	NativeOpenAI  = "openai"
	NativeAzure   = "azure"
	NativeBedrock = "bedrock"
)

// nativeProviders lists them, for errors.
var nativeProviders = []string{NativeOpenAI, NativeAzure, NativeBedrock}

// Native batch defaults.
const (
	// DefaultRefreshAfter is how old a native batch's last poll may be
	// before a GET polls the provider again.
	DefaultRefreshAfter = 5 * time.Second
	// DefaultPollLimit bounds the native batches one run of the
	// batch-native-poll job polls (oldest first).
	DefaultPollLimit = 50
	// DefaultPollInterval is how often the local process polls (the
	// cloud's batch-native-poll runs every minute).
	DefaultPollInterval = time.Minute
	// maxEventLine bounds an output line read for its log event; a longer
	// line is copied but logs no usage.
	maxEventLine = 4 << 20
	// eventBurst is how many lines' log events are published at once (one
	// publish, Emitter.EmitAll).
	eventBurst = 64
)

// activeNativePK indexes the native batches still open (gsi2, by creation:
// the poll job takes the oldest first). They are not in ACTIVE: the
// engine's sweep has nothing to do for them.
const activeNativePK = "ACTIVE#NATIVE"

// Deployments is the model_list a native batch picks its deployment from,
// and opens it (models.Router).
type Deployments interface {
	Deployments() []config.Deployment
	OpenDeployment(ctx context.Context, i int) (models.Endpoint, models.Target, error)
}

// NativeDeps are what native batches need beyond the engine's Deps.
type NativeDeps struct {
	Deployments Deployments
	// Store is the blob store as a provider sees it (Bedrock reads its
	// input from, and writes its output to, its bucket).
	Store models.BatchStore
	// Events publishes a log event per mirrored output line.
	Events *logevent.Emitter
	// RefreshAfter and PollLimit: zero takes the defaults.
	RefreshAfter time.Duration
	PollLimit    int
}

// withDefaults is a copy of d with its zero settings defaulted.
func (d NativeDeps) withDefaults() *NativeDeps {
	if d.RefreshAfter <= 0 {
		d.RefreshAfter = DefaultRefreshAfter
	}
	if d.PollLimit <= 0 {
		d.PollLimit = DefaultPollLimit
	}
	return &d
}

// nativeDoc is what a batch record holds of its provider's batch.
type nativeDoc struct {
	Provider string `json:"provider"`
	// Deployment is the deployment's id (model_info.id, or
	// model_name#index), ModelGroup its model_name.
	Deployment string          `json:"deployment"`
	ModelGroup string          `json:"model_group"`
	Ref        models.BatchRef `json:"ref"`
	// Status is the provider's last status; Polled when it was read (Unix
	// nanoseconds).
	Status string        `json:"status"`
	Polled int64         `json:"polled_ns"`
	Counts RequestCounts `json:"counts"`
	Usage  Usage         `json:"usage"`
	// Cost is what its lines cost at the batch prices (nano-USD), added up
	// as their results are copied in.
	Cost int64 `json:"cost_nusd,omitempty"`
}

// createNative runs nb on the provider's own batch API: it picks the
// deployment, streams the input to the provider (each line's model
// rewritten to the provider's name for it, every line checked as it goes)
// and records the batch with the provider's ids. A line the provider
// cannot take is a 400 naming it; a provider that refuses the batch makes
// it a failed batch carrying the provider's message.
func (s *Service) createNative(ctx context.Context, p auth.Principal, nb NewBatch, window time.Duration, res taken) (Batch, error) {
	if s.native == nil {
		return Batch{}, api.InvalidValue("custom_llm_provider", "This gateway runs no native batches.")
	}
	provider := strings.ToLower(nb.Provider)
	if provider != "" && !contains(nativeProviders, provider) {
		return Batch{}, api.InvalidValue("custom_llm_provider", "Invalid custom_llm_provider '%s': native batches run on %s.", nb.Provider, quoteAll(nativeProviders))
	}
	f, err := s.deps.Files.Get(ctx, p, nb.InputFileID)
	if err != nil {
		var ae *api.Error
		if errors.As(err, &ae) && ae.Status == http.StatusNotFound {
			return Batch{}, api.NotFound("No such File object: %s (input_file_id).", nb.InputFileID)
		}
		return Batch{}, err
	}
	if f.Purpose != files.PurposeBatch {
		return Batch{}, api.InvalidValue("input_file_id", "File %s has purpose '%s'; a batch's input file must have purpose 'batch'.", f.ID, f.Purpose)
	}
	model := nb.Model
	if model == "" {
		if model, err = s.firstModel(ctx, f); err != nil {
			return Batch{}, err
		}
	}
	pick, err := s.pickDeployment(ctx, p, provider, model, nb.Model != "")
	if err != nil {
		return Batch{}, err
	}
	now := s.now()
	st := &state{status: StatusValidating, counters: map[string]int64{}, doc: batchDoc{
		ID: ids.New(ids.Batch), Team: f.Team, KeyToken: p.KeyToken(), Admin: p.Admin,
		Endpoint: nb.Endpoint, InputFileID: f.ID, Window: nb.CompletionWindow,
		Created: now.UnixNano(), Expires: now.Add(window).UnixNano(),
		Metadata: nb.Metadata, OutputExpiresAfter: int64(nb.OutputExpiresAfter / time.Second),
		OutFile: ids.New(ids.File), ErrFile: ids.New(ids.File),
		Native: &nativeDoc{Provider: pick.provider, Deployment: pick.target.DeploymentID, ModelGroup: pick.target.ModelGroup},
	}}

	lines, stop := s.nativeLines(ctx, p, f, nb.Endpoint, pick)
	ref, err := pick.api.SubmitBatch(ctx, &models.BatchInput{
		ID: st.doc.ID, Endpoint: nb.Endpoint, Window: nb.CompletionWindow, Metadata: nb.Metadata,
		Lines: lines, Store: s.native.Store,
	})
	if lineErr := stop(); lineErr != nil {
		return Batch{}, lineErr // the line sluice refused, whatever the provider made of the cut upload
	}
	if err != nil {
		var pe *models.ProviderError
		if !errors.As(err, &pe) {
			return Batch{}, fmt.Errorf("batches: native batch on %s: %w", pick.provider, err)
		}
		// The provider refused: the batch exists, failed, with its message.
		st.status = StatusFailed
		st.doc.Failed = now.UnixNano()
		st.doc.Errors = []LineError{{Code: providerErrorCode(pe), Message: fmt.Sprintf("%s refused the batch: %s", pick.provider, pe.Message)}}
	} else {
		st.doc.Native.Ref = ref
		st.doc.Native.Polled = now.UnixNano()
		st.doc.Reserve = res.doc // a refused batch reserves nothing
	}
	rec, err := st.record()
	if err != nil {
		return Batch{}, err
	}
	all := store.Record{Key: batchAllKey(st.doc.ID), GSI1: store.IndexKey{PK: allBatchesPK, SK: rec.GSI1.SK}}
	writes := []store.Write{
		{Kind: store.WritePut, Record: rec, Cond: store.Cond{Absent: true}},
		{Kind: store.WritePut, Record: all, Cond: store.Cond{Absent: true}},
	}
	if nb.IdempotencyKey != "" {
		body, _ := json.Marshal(idempotencyDoc{Batch: st.doc.ID, Request: requestHash(nb)}) // strings only
		writes = append(writes, store.Write{Kind: store.WritePut, Cond: store.Cond{Absent: true}, Record: store.Record{
			Key: idempotencyKey(p, nb.IdempotencyKey), Body: body, ExpiresAt: now.Add(idempotencyTTL),
		}})
	}
	if st.doc.Reserve != nil {
		writes = append(writes, res.writes...)
	}
	if err := s.deps.Records.Transact(ctx, writes); err != nil {
		err = res.failed(err)
		if st.status != StatusFailed {
			// Nothing left half-made: the provider's batch is cancelled.
			if cerr := pick.api.CancelBatch(context.WithoutCancel(ctx), ref); cerr != nil {
				slog.WarnContext(ctx, "batches: native batch not recorded and not cancelled", "batch", st.doc.ID, "provider_batch", ref.BatchID, "error", cerr)
			}
		}
		return Batch{}, fmt.Errorf("batches: create native %s: %w", st.doc.ID, err)
	}
	s.took(res)
	slog.InfoContext(ctx, "batches: native batch created", "batch", st.doc.ID, "provider", pick.provider, "provider_batch", ref.BatchID, "status", st.status)
	return st.object(), nil
}

func contains(list []string, v string) bool {
	for _, s := range list {
		if s == v {
			return true
		}
	}
	return false
}

// providerErrorCode is the code a provider's refusal gets in the batch's
// errors.
func providerErrorCode(pe *models.ProviderError) string {
	if pe.Code != "" {
		return pe.Code
	}
	return "provider_error"
}

// errFirstLine stops the read of a file's first line.
var errFirstLine = errors.New("batches: first line read")

// firstModel is the body.model of f's first line: the model a native batch
// without a model in its create runs on.
func (s *Service) firstModel(ctx context.Context, f files.Stored) (string, error) {
	var model string
	var lineErr error
	v := batchinput.NewValidator(batchinput.Options{MaxLineBytes: s.opts.MaxLineBytes, OnLine: func(l batchinput.Line) error {
		m, err := lineModel(l)
		if err != nil {
			lineErr = err
		}
		model = m
		return errFirstLine
	}})
	rc, err := s.deps.Files.Open(ctx, f, 0, -1)
	if err != nil {
		return "", err
	}
	defer rc.Close()
	_, err = io.Copy(v, rc)
	if err == nil {
		err = v.Close()
	}
	switch {
	case lineErr != nil:
		return "", lineErr
	case model != "":
		return model, nil
	case err != nil && !errors.Is(err, errFirstLine):
		return "", lineError(1, "invalid_request", "Line 1 of the input file cannot be read: %v", err)
	}
	return "", api.InvalidValue("input_file_id", "The input file has no request line.")
}

// lineModel reads a line's body.model.
func lineModel(l batchinput.Line) (string, error) {
	var b struct {
		Model string `json:"model"`
	}
	if err := json.Unmarshal(l.Body, &b); err != nil || b.Model == "" {
		return "", lineError(l.Number, "missing_required_parameter", "Line %d has no body.model.", l.Number)
	}
	return b.Model, nil
}

// lineError is a 400 naming an input line.
func lineError(line int, code, format string, args ...any) *api.Error {
	e := api.InvalidValue(fmt.Sprintf("line %d", line), format, args...)
	e.Code = code
	return e
}

// pick is the deployment a native batch runs on.
type pick struct {
	provider string
	index    int
	cfg      config.Deployment
	target   models.Target
	api      models.Batcher
}

// pickDeployment finds the deployment of provider (any of the native ones
// when "") that model names: its model_name, or (from a line) its
// provider's model or deployment name. An Azure deployment must be a
// global-batch one (model_info.mode: batch). The caller's key must be
// allowed the deployment's model_name.
func (s *Service) pickDeployment(ctx context.Context, p auth.Principal, provider, model string, fromBody bool) (pick, error) {
	where := "line 1"
	bad := func(format string, args ...any) error {
		if fromBody {
			return api.InvalidValue("model", format, args...)
		}
		return lineError(1, "invalid_value", "Line 1: "+format, args...)
	}
	if fromBody {
		where = "model"
	}
	for i, d := range s.native.Deployments.Deployments() {
		dp := d.Params.Provider()
		if !contains(nativeProviders, dp) || (provider != "" && dp != provider) {
			continue
		}
		if d.ModelName != model && (fromBody || d.Params.ProviderModel() != model) {
			continue
		}
		if dp == NativeAzure && d.ModelInfo.Mode != "batch" {
			return pick{}, bad("Model '%s' is an Azure deployment that is not a global-batch deployment (model_info.mode: batch): Azure runs batches only on global-batch deployments.", model)
		}
		if !p.AllowsModel(d.ModelName) {
			return pick{}, api.Forbidden("This key may not use model '%s' (%s).", d.ModelName, where)
		}
		ep, target, err := s.native.Deployments.OpenDeployment(ctx, i)
		if err != nil {
			return pick{}, err
		}
		b, ok := ep.(models.Batcher)
		if !ok {
			return pick{}, bad("Model '%s' (provider %s) does not run native batches.", model, dp)
		}
		return pick{provider: dp, index: i, cfg: d, target: target, api: b}, nil
	}
	if provider == "" {
		return pick{}, bad("Model '%s' is not a deployment of %s on this gateway: a native batch runs on one.", model, quoteAll(nativeProviders))
	}
	return pick{}, bad("Model '%s' is not a %s deployment of this gateway.", model, provider)
}

// nativeLines streams f's lines as the provider is to get them: each one
// checked (the batch's endpoint; a model of the picked deployment's
// provider — for Azure a global-batch deployment on the same resource, for
// Bedrock the same model — that the key may use) and its model rewritten
// to the provider's name. stop ends the stream and returns the line error
// that cut it, if any.
func (s *Service) nativeLines(ctx context.Context, p auth.Principal, f files.Stored, endpoint string, pk pick) (io.Reader, func() error) {
	pr, pw := io.Pipe()
	var lineErr error
	urlOf := func(u string) string { return u }
	if b, ok := pk.api.(interface{ BatchURL(string) string }); ok {
		urlOf = b.BatchURL
	}
	deps := s.native.Deployments.Deployments()
	done := make(chan struct{})
	go func() {
		defer close(done)
		v := batchinput.NewValidator(batchinput.Options{MaxLineBytes: s.opts.MaxLineBytes, OnLine: func(l batchinput.Line) error {
			out, err := s.nativeLine(p, l, endpoint, pk, deps, urlOf)
			if err != nil {
				lineErr = err
				return err
			}
			_, err = pw.Write(out)
			return err
		}})
		rc, err := s.deps.Files.Open(ctx, f, 0, -1)
		if err == nil {
			_, err = io.Copy(v, rc)
			rc.Close()
			if err == nil {
				err = v.Close()
			}
		}
		if lineErr != nil {
			err = lineErr
		}
		pw.CloseWithError(err)
	}()
	return pr, func() error {
		pr.CloseWithError(errors.New("batches: the provider stopped reading"))
		<-done
		return lineErr
	}
}

// nativeLine checks one line and renders it for the provider.
func (s *Service) nativeLine(p auth.Principal, l batchinput.Line, endpoint string, pk pick, deps []config.Deployment, urlOf func(string) string) ([]byte, error) {
	if l.URL != endpoint {
		return nil, lineError(l.Number, "invalid_url", "Line %d's url '%s' is not the batch's endpoint '%s'.", l.Number, l.URL, endpoint)
	}
	var body map[string]json.RawMessage
	if err := json.Unmarshal(l.Body, &body); err != nil {
		return nil, lineError(l.Number, "invalid_request", "Line %d's body is not a JSON object.", l.Number)
	}
	model, err := lineModel(l)
	if err != nil {
		return nil, err
	}
	name, err := s.providerModel(p, l.Number, model, pk, deps)
	if err != nil {
		return nil, err
	}
	body["model"], _ = json.Marshal(name)
	out, err := json.Marshal(struct {
		CustomID string                     `json:"custom_id"`
		Method   string                     `json:"method"`
		URL      string                     `json:"url"`
		Body     map[string]json.RawMessage `json:"body"`
	}{l.CustomID, http.MethodPost, urlOf(l.URL), body})
	if err != nil {
		return nil, lineError(l.Number, "invalid_request", "Line %d cannot be re-encoded: %v", l.Number, err)
	}
	return append(out, '\n'), nil
}

// providerModel is the provider's name for a line's model.
func (s *Service) providerModel(p auth.Principal, line int, model string, pk pick, deps []config.Deployment) (string, error) {
	for _, d := range deps {
		if d.Params.Provider() != pk.provider || (d.ModelName != model && d.Params.ProviderModel() != model) {
			continue
		}
		if !p.AllowsModel(d.ModelName) {
			return "", api.Forbidden("This key may not use model '%s' (line %d).", d.ModelName, line)
		}
		switch pk.provider {
		case NativeAzure:
			if d.ModelInfo.Mode != "batch" {
				return "", lineError(line, "invalid_value", "Line %d's model '%s' is not a global-batch deployment (model_info.mode: batch): Azure runs batches only on global-batch deployments.", line, model)
			}
			if d.Params.APIBase != pk.cfg.Params.APIBase {
				return "", lineError(line, "invalid_value", "Line %d's model '%s' is a deployment of another Azure resource than the batch's (%s).", line, model, pk.target.ModelGroup)
			}
		case NativeBedrock:
			if d.Params.ProviderModel() != pk.cfg.Params.ProviderModel() {
				return "", lineError(line, "invalid_value", "Line %d's model '%s' is not the batch's model '%s': a Bedrock batch runs one model.", line, model, pk.target.ModelGroup)
			}
		}
		return d.Params.ProviderModel(), nil
	}
	if pk.provider == NativeAzure {
		return "", lineError(line, "invalid_value", "Line %d's model '%s' is not an Azure global-batch deployment of this gateway.", line, model)
	}
	if pk.provider == NativeBedrock {
		return "", lineError(line, "invalid_value", "Line %d's model '%s' is not the batch's model '%s': a Bedrock batch runs one model.", line, model, pk.target.ModelGroup)
	}
	if p.RestrictsModels() {
		return "", api.Forbidden("This key may not use model '%s' (line %d).", model, line)
	}
	return model, nil // an OpenAI model the config does not name
}

// openNative finds the native batch's deployment again and opens it.
func (s *Service) openNative(ctx context.Context, n *nativeDoc) (models.Batcher, error) {
	if s.native == nil {
		return nil, errors.New("batches: native batches are not enabled")
	}
	for i, d := range s.native.Deployments.Deployments() {
		id := d.ModelInfo.ID
		if id == "" {
			id = fmt.Sprintf("%s#%d", d.ModelName, i)
		}
		if id != n.Deployment {
			continue
		}
		ep, _, err := s.native.Deployments.OpenDeployment(ctx, i)
		if err != nil {
			return nil, err
		}
		if b, ok := ep.(models.Batcher); ok {
			return b, nil
		}
	}
	return nil, fmt.Errorf("batches: deployment %s of the native batch is no longer configured", n.Deployment)
}
