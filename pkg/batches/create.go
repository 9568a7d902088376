package batches

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/sluice-gateway/sluice/pkg/api"
	"github.com/sluice-gateway/sluice/pkg/auth"
	"github.com/sluice-gateway/sluice/pkg/batchinput"
	"github.com/sluice-gateway/sluice/pkg/config"
	"github.com/sluice-gateway/sluice/pkg/files"
	"github.com/sluice-gateway/sluice/pkg/ids"
	"github.com/sluice-gateway/sluice/pkg/store"
)

// Metadata limits, as OpenAI sets them.
const (
	maxMetadataPairs = 16
	maxMetadataKey   = 64
	maxMetadataValue = 512
)

// idempotencyTTL is how long an Idempotency-Key names its batch.
const idempotencyTTL = 24 * time.Hour

// NewBatch is what POST /v1/batches asks for.
type NewBatch struct {
	InputFileID      string
	Endpoint         string
	CompletionWindow string
	Metadata         map[string]string
	// OutputExpiresAfter, when set, makes the output and error files expire
	// that long after they are created (anchor created_at).
	OutputExpiresAfter time.Duration
	// IdempotencyKey, when set, makes a retry of the same request return the
	// batch the first one created.
	IdempotencyKey string
	// Provider (custom_llm_provider) or Model (a deployment's model_name)
	// make it a native batch, run by that provider's own batch API
	// (native.go).
	Provider string
	Model    string
}

// Create validates nb, stores the batch as validating and queues its plan.
// A missing or unknown value is a 400 naming it; an input file p may not
// see is a 404, one whose purpose is not batch a 400. With an
// IdempotencyKey p used before (within a day) for the same request, it
// returns that request's batch; for another request, a 409.
func (s *Service) Create(ctx context.Context, p auth.Principal, nb NewBatch) (Batch, error) {
	window, err := s.check(nb)
	if err != nil {
		return Batch{}, err
	}
	if nb.IdempotencyKey != "" {
		if b, ok, err := s.replay(ctx, p, nb); ok || err != nil {
			return b, err
		}
	}
	res, err := s.reserve(ctx, p, nb)
	if err != nil {
		return Batch{}, err
	}
	if nb.Provider != "" || nb.Model != "" {
		return s.createNative(ctx, p, nb, window, res)
	}
	f, err := s.deps.Files.Get(ctx, p, nb.InputFileID)
	if err != nil {
		var ae *api.Error
		if errors.As(err, &ae) && ae.Status == 404 {
			return Batch{}, api.NotFound("No such File object: %s (input_file_id).", nb.InputFileID)
		}
		return Batch{}, err
	}
	if f.Purpose != files.PurposeBatch {
		return Batch{}, api.InvalidValue("input_file_id", "File %s has purpose '%s'; a batch's input file must have purpose 'batch'.", f.ID, f.Purpose)
	}

	now := s.now()
	st := &state{status: StatusValidating, counters: map[string]int64{}, doc: batchDoc{
		ID: ids.New(ids.Batch), Team: f.Team, KeyToken: p.KeyToken(), Admin: p.Admin,
		Endpoint: nb.Endpoint, InputFileID: f.ID, Window: nb.CompletionWindow,
		Created: now.UnixNano(), Expires: now.Add(window).UnixNano(),
		Metadata: nb.Metadata, OutputExpiresAfter: int64(nb.OutputExpiresAfter / time.Second),
		OutFile: ids.New(ids.File), ErrFile: ids.New(ids.File),
		ChunkLines: s.opts.ChunkLines, ChunkBytes: s.opts.ChunkBytes,
		Reserve: res.doc,
	}}
	rec, err := st.record()
	if err != nil {
		return Batch{}, err
	}
	all := store.Record{Key: batchAllKey(st.doc.ID), GSI1: store.IndexKey{PK: allBatchesPK, SK: rec.GSI1.SK}}
	writes := []store.Write{
		{Kind: store.WritePut, Record: rec, Cond: store.Cond{Absent: true}},
		{Kind: store.WritePut, Record: all, Cond: store.Cond{Absent: true}},
		{Kind: store.WritePut, Record: store.Record{Key: inputKey(f.ID, st.doc.ID)}, Cond: store.Cond{Absent: true}},
	}
	if nb.IdempotencyKey != "" {
		body, _ := json.Marshal(idempotencyDoc{Batch: st.doc.ID, Request: requestHash(nb)}) // strings only
		writes = append(writes, store.Write{Kind: store.WritePut, Cond: store.Cond{Absent: true}, Record: store.Record{
			Key: idempotencyKey(p, nb.IdempotencyKey), Body: body, ExpiresAt: now.Add(idempotencyTTL),
		}})
	}
	err = s.deps.Records.Transact(ctx, append(writes, res.writes...))
	if errors.Is(err, store.ErrConditionFailed) && nb.IdempotencyKey != "" {
		// The same key, used at the same time: the other request won.
		if b, ok, err := s.replay(ctx, p, nb); ok || err != nil {
			return b, err
		}
	}
	if err = res.failed(err); err != nil {
		return Batch{}, fmt.Errorf("batches: create: %w", err)
	}
	s.took(res)
	// The batch exists: a failed send leaves it validating, and the sweep
	// sends its plan again (StaleAfter).
	if err := s.send(ctx, message{Kind: kindPlan, Batch: st.doc.ID}); err != nil {
		slog.WarnContext(ctx, "batches: plan not queued; the sweep will queue it", "batch", st.doc.ID, "error", err)
	}
	return st.object(), nil
}

// check validates nb's values and returns its completion window.
func (s *Service) check(nb NewBatch) (time.Duration, error) {
	switch {
	case nb.InputFileID == "":
		return 0, api.MissingParam("input_file_id")
	case nb.Endpoint == "":
		return 0, api.MissingParam("endpoint")
	case nb.CompletionWindow == "":
		return 0, api.MissingParam("completion_window")
	}
	if served := s.endpoints(); !slices.Contains(served, nb.Endpoint) {
		if batchinput.IsEndpoint(nb.Endpoint) {
			return 0, api.InvalidValue("endpoint", "Endpoint '%s' is not served by this gateway; batches may use %s.", nb.Endpoint, quoteAll(served))
		}
		return 0, api.InvalidValue("endpoint", "Invalid endpoint '%s'; a batch's endpoint is one of %s.", nb.Endpoint, quoteAll(served))
	}
	if !slices.Contains(s.opts.Windows, nb.CompletionWindow) {
		return 0, api.InvalidValue("completion_window", "Invalid completion_window '%s'; this gateway allows %s.", nb.CompletionWindow, quoteAll(s.opts.Windows))
	}
	window, err := config.ParseBatchWindow(nb.CompletionWindow)
	if err != nil {
		return 0, api.InvalidValue("completion_window", "Invalid completion_window '%s'.", nb.CompletionWindow)
	}
	if err := checkMetadata(nb.Metadata); err != nil {
		return 0, err
	}
	if d := nb.OutputExpiresAfter; d != 0 && (d < files.MinExpiresAfter*time.Second || d > files.MaxExpiresAfter*time.Second) {
		return 0, api.InvalidValue("output_expires_after.seconds", "output_expires_after.seconds must be from %d to %d.", files.MinExpiresAfter, files.MaxExpiresAfter)
	}
	return window, nil
}

// endpoints are the batch endpoints this gateway serves: those of the
// Batch API that have a model operation.
func (s *Service) endpoints() []string {
	var out []string
	for _, e := range batchinput.Endpoints() {
		if s.deps.Operations[e] != nil {
			out = append(out, e)
		}
	}
	return out
}

func checkMetadata(m map[string]string) error {
	if len(m) > maxMetadataPairs {
		return api.InvalidValue("metadata", "metadata may hold at most %d pairs; got %d.", maxMetadataPairs, len(m))
	}
	for k, v := range m {
		if n := utf8.RuneCountInString(k); n > maxMetadataKey {
			return api.InvalidValue("metadata", "metadata keys are at most %d characters; %q has %d.", maxMetadataKey, k, n)
		}
		if n := utf8.RuneCountInString(v); n > maxMetadataValue {
			return api.InvalidValue("metadata", "metadata values are at most %d characters; the value of %q has %d.", maxMetadataValue, k, n)
		}
	}
	return nil
}

func quoteAll(list []string) string {
	q := make([]string, len(list))
	for i, s := range list {
		q[i] = "'" + s + "'"
	}
	return strings.Join(q, ", ")
}

// idempotencyDoc is an idempotency record's body: the batch a key created,
// and a hash of the request that created it.
type idempotencyDoc struct {
	Batch   string `json:"batch"`
	Request string `json:"request"`
}

// idempotencyKey scopes a key to the caller's team (and the admin), and
// stores only its hash.
func idempotencyKey(p auth.Principal, key string) store.Key {
	h := sha256.Sum256([]byte(key))
	return store.Key{PK: idempotencyPrefix + p.TeamID + "#" + hex.EncodeToString(h[:]), SK: batchSK}
}

// requestHash identifies a create request's parameters.
func requestHash(nb NewBatch) string {
	nb.IdempotencyKey = ""
	b, _ := json.Marshal(nb) // strings, a map of strings and a number
	h := sha256.Sum256(b)
	return hex.EncodeToString(h[:])
}

// replay returns the batch nb's idempotency key created, if it did (ok).
// A batch still validating gets its plan queued again: the first request
// may have failed to queue it.
func (s *Service) replay(ctx context.Context, p auth.Principal, nb NewBatch) (Batch, bool, error) {
	rec, err := s.deps.Records.Get(ctx, idempotencyKey(p, nb.IdempotencyKey))
	if errors.Is(err, store.ErrNotFound) {
		return Batch{}, false, nil
	}
	if err != nil {
		return Batch{}, false, fmt.Errorf("batches: idempotency key: %w", err)
	}
	var doc idempotencyDoc
	if err := json.Unmarshal(rec.Body, &doc); err != nil {
		return Batch{}, false, fmt.Errorf("batches: decode idempotency record: %w", err)
	}
	if doc.Request != requestHash(nb) {
		return Batch{}, false, api.Conflict("This Idempotency-Key was used with different parameters (batch %s); use a new key for a new batch.", doc.Batch)
	}
	st, err := s.load(ctx, doc.Batch)
	if err != nil {
		return Batch{}, false, err
	}
	if st.status == StatusValidating {
		if err := s.send(ctx, message{Kind: kindPlan, Batch: st.doc.ID}); err != nil {
			slog.WarnContext(ctx, "batches: plan not queued; the sweep will queue it", "batch", st.doc.ID, "error", err)
		}
	}
	return st.object(), true, nil
}
