package files

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/sluice-gateway/sluice/pkg/api"
	"github.com/sluice-gateway/sluice/pkg/auth"
	"github.com/sluice-gateway/sluice/pkg/batchinput"
	"github.com/sluice-gateway/sluice/pkg/ids"
	"github.com/sluice-gateway/sluice/pkg/store"
)

// Parameter names of POST /v1/files, which the service's errors name.
const (
	fieldFile     = "file"
	fieldPurpose  = "purpose"
	fieldAnchor   = "expires_after[anchor]"
	fieldSeconds  = "expires_after[seconds]"
	fieldProvider = "custom_llm_provider"

	defaultProvider = "openai"
	// maxFilenameBytes bounds a file name.
	maxFilenameBytes = 1024
	// maxProviderBytes bounds custom_llm_provider.
	maxProviderBytes = 64
	// readBufferSize is the buffer between a request body and the blob
	// store: large enough to keep system calls few, small enough not to
	// matter to memory.
	readBufferSize = 64 << 10
)

// Content is a file's bytes as they arrive: Body streams them, and is read
// once, to its end or to the first refusal.
type Content struct {
	// Filename names the file; "" makes it "file" (a form field sent
	// without a file name). Parts of an upload have none.
	Filename string
	// ContentType is recorded and served back; "" is
	// application/octet-stream.
	ContentType string
	Body        io.Reader
}

// FileParams are what an upload says besides its bytes (the fields of the
// POST /v1/files form).
type FileParams struct {
	Purpose string
	// ExpiresAfter, when > 0, makes the file expire that long after its
	// creation: MinExpiresAfter to MaxExpiresAfter seconds. 0 means never,
	// except for a batch input file: DefaultBatchExpiry.
	ExpiresAfter time.Duration
	// Provider is the custom_llm_provider the upload named, "" for "openai".
	// It is recorded only: sluice keeps the bytes itself.
	Provider string
}

// check applies the rules of the parameters, naming them as the form does.
func (fp FileParams) check() error {
	if err := checkUploadPurpose(fp.Purpose); err != nil {
		return err
	}
	if fp.ExpiresAfter != 0 {
		if err := checkExpiresAfter(fieldSeconds, fp.ExpiresAfter); err != nil {
			return err
		}
	}
	if len(fp.Provider) > maxProviderBytes {
		return api.InvalidValue(fieldProvider, "custom_llm_provider is longer than %d bytes.", maxProviderBytes)
	}
	return nil
}

// Upload stores a file's bytes and records it as p's team's: the whole of
// POST /v1/files when the parameters are known before the bytes. It is
// Stage then Commit.
func (s *Service) Upload(ctx context.Context, p auth.Principal, params FileParams, c Content) (File, error) {
	if err := params.check(); err != nil {
		return File{}, err
	}
	st, err := s.Stage(ctx, p, params.Purpose, c)
	if err != nil {
		return File{}, err
	}
	return st.Commit(ctx, params)
}

// StagedFile is an upload's bytes in the blob store, not yet a file: Commit
// makes it one, Discard removes it; one of them must follow.
type StagedFile struct {
	s           *Service
	id, team    string
	key         string
	size        int64
	filename    string
	contentType string
	// speculative is the batch validation that ran while the purpose was
	// not yet known; nil if none ran.
	speculative *batchinput.Validator
	// hold is the room taken in the team's storage quota; nil without one.
	hold *hold
}

// Stage streams an upload's bytes into the blob store; memory does not grow
// with the file. Everything that can be refused before or while the bytes
// stream is refused then: a bad file name, an empty file, a file over the
// size limit (413), over the team's storage quota (413, room for each block
// taken before the block is stored), and — when purpose is "batch" — a bad
// batch input line, which stops the stream at once.
//
// purpose is "" when it is not known yet (a form whose "purpose" follows
// the file, as the Go SDK sends it): then the lines are validated
// speculatively on the same single pass — cheap, because a file that is
// not JSONL fails on its first byte and is then only counted — and Commit
// applies the verdict if the purpose turns out to be "batch". Nothing is
// read twice.
func (s *Service) Stage(ctx context.Context, p auth.Principal, purpose string, c Content) (*StagedFile, error) {
	if purpose != "" {
		if err := checkUploadPurpose(purpose); err != nil {
			return nil, err
		}
	}
	filename, err := checkFilename(c.Filename)
	if err != nil {
		return nil, err
	}
	body := bufio.NewReaderSize(c.Body, readBufferSize)
	if _, err := body.Peek(1); err == io.EOF {
		return nil, api.InvalidValue(fieldFile, "The file is empty.")
	} else if err != nil {
		return nil, err
	}
	id := ids.New(ids.File)
	st := &StagedFile{s: s, id: id, team: p.TeamID, key: "files/" + id, filename: filename, contentType: contentTypeOr(c.ContentType)}
	limit := s.opts.MaxFileSize
	var v *batchinput.Validator
	switch purpose {
	case PurposeBatch:
		limit = min(limit, batchinput.MaxBytes)
		v = batchinput.NewValidator(batchinput.Options{MaxLineBytes: s.opts.MaxLineBytes})
	case "":
		v = batchinput.NewValidator(batchinput.Options{MaxLineBytes: s.opts.MaxLineBytes, KeepGoing: true})
	}
	var src io.Reader = &limitReader{r: body, max: limit}
	if quota := quotaOf(p); quota > 0 {
		st.hold = &hold{s: s, team: p.TeamID, quota: quota, file: id, blob: st.key}
		src = newReservingReader(ctx, src, st.hold, limit)
	}
	if v != nil {
		src = io.TeeReader(src, v)
	}
	n, err := s.blobs.Put(ctx, st.key, src)
	if err != nil {
		// A failed Put stores nothing.
		if st.hold != nil {
			st.hold.release(context.WithoutCancel(ctx))
		}
		return nil, uploadError(err)
	}
	st.size = n
	switch purpose {
	case PurposeBatch:
		if err := batchError(v.Close()); err != nil {
			st.Discard(ctx)
			return nil, err
		}
	case "":
		st.speculative = v
	}
	return st, nil
}

// ID is the id the file will have.
func (st *StagedFile) ID() string { return st.id }

// Commit records a staged upload as a file with params, or, if params or
// the batch verdict refuse it, discards it: either way st is used up.
func (st *StagedFile) Commit(ctx context.Context, params FileParams) (File, error) {
	f, err := st.commit(ctx, params)
	if err != nil {
		st.Discard(ctx)
	}
	return f, err
}

func (st *StagedFile) commit(ctx context.Context, params FileParams) (File, error) {
	if err := params.check(); err != nil {
		return File{}, err
	}
	if params.Purpose == PurposeBatch && st.speculative != nil {
		if err := batchError(st.speculative.Close()); err != nil {
			return File{}, err
		}
	}
	expiresAfter := params.ExpiresAfter
	if expiresAfter == 0 && params.Purpose == PurposeBatch {
		expiresAfter = DefaultBatchExpiry
	}
	provider := params.Provider
	if provider == "" {
		provider = defaultProvider
	}
	f, writes, err := st.s.newFileWrites(NewFile{
		ID: st.id, Team: st.team, Filename: st.filename, Purpose: params.Purpose, ContentType: st.contentType,
		Provider: provider, Parts: []Part{{Key: st.key, Size: st.size}}, ExpiresAfter: expiresAfter,
	}, st.hold != nil)
	if err != nil {
		return File{}, err
	}
	if st.hold != nil {
		writes = append(writes, st.hold.commit())
	}
	if err := st.s.records.Transact(ctx, writes); err != nil {
		if errors.Is(err, store.ErrConditionFailed) && st.hold != nil {
			return File{}, fmt.Errorf("files: record %s: its storage hold is gone (uploads may stream for %v): %w", st.id, holdTTL, err)
		}
		return File{}, fmt.Errorf("files: create %s: %w", st.id, err)
	}
	return f.File, nil
}

// Discard removes a staged upload's bytes and gives back the room they
// took. It cleans up after a refusal, so it logs rather than returns its
// own failures, and carries on if ctx has ended.
func (st *StagedFile) Discard(ctx context.Context) {
	ctx = context.WithoutCancel(ctx)
	st.s.deleteBlobs(ctx, []Part{{Key: st.key}})
	if st.hold != nil {
		st.hold.release(ctx)
	}
}

// limitReader fails once more than max bytes have passed: with tooBig's
// error, or a 413.
type limitReader struct {
	r      io.Reader
	n, max int64
	tooBig func() error
}

func (l *limitReader) Read(p []byte) (int, error) {
	n, err := l.r.Read(p)
	if l.n += int64(n); l.n > l.max {
		if l.tooBig != nil {
			return 0, l.tooBig()
		}
		return 0, api.TooLarge("The file is larger than the limit of %d bytes.", l.max)
	}
	return n, err
}

// uploadError turns the error of a streaming Put into what the client
// should see: the client's own mistakes (a bad batch line, a file over the
// limit or the quota, a malformed body) pass through whatever wrapped them.
func uploadError(err error) error {
	if be := batchError(err); be != err {
		return be
	}
	var ae *api.Error
	if errors.As(err, &ae) {
		return ae
	}
	return fmt.Errorf("files: store upload: %w", err)
}

// batchError maps a batch validation failure to its client error; other
// errors (and nil) pass through unchanged.
func batchError(err error) error {
	var le *batchinput.LineError
	var lim *batchinput.LimitError
	switch {
	case errors.As(err, &le):
		return api.InvalidValue(fieldFile, "Invalid batch input file: line %d: %s.", le.Line, le.Reason)
	case errors.As(err, &lim) && lim.Limit == batchinput.LimitBytes:
		return api.TooLarge("A batch input file may be at most %d bytes; this one is larger.", lim.Max)
	case errors.As(err, &lim):
		return api.InvalidValue(fieldFile, "Invalid batch input file: it holds more than %d requests.", lim.Max)
	case errors.Is(err, batchinput.ErrNoRequests):
		return api.InvalidValue(fieldFile, "Invalid batch input file: it holds no request lines.")
	}
	return err
}

func checkUploadPurpose(purpose string) error {
	if purpose == "" {
		return api.MissingParam(fieldPurpose)
	}
	if !slices.Contains(uploadPurposes, purpose) {
		return api.InvalidValue(fieldPurpose, "Invalid purpose %s; expected one of: %s.", api.Quote(purpose), strings.Join(uploadPurposes, ", "))
	}
	return nil
}

func checkFilename(name string) (string, error) {
	if name == "" {
		// A file sent as a plain field has no name; OpenAI's object needs one.
		return "file", nil
	}
	if len(name) > maxFilenameBytes {
		return "", api.InvalidValue(fieldFile, "The file name is longer than %d bytes.", maxFilenameBytes)
	}
	return name, nil
}

func contentTypeOr(ct string) string {
	if ct == "" {
		return "application/octet-stream"
	}
	return ct
}

// checkExpiresAfter holds an expiry to OpenAI's bounds, naming param.
func checkExpiresAfter(param string, d time.Duration) error {
	if d%time.Second != 0 || d < MinExpiresAfter*time.Second || d > MaxExpiresAfter*time.Second {
		return expiresAfterError(param, strconv.FormatFloat(d.Seconds(), 'f', -1, 64))
	}
	return nil
}

// expiresAfterError refuses an expires_after seconds value given as shown.
func expiresAfterError(param, shown string) error {
	return api.InvalidValue(param, "Invalid %s %s: expected an integer from %d (1 hour) to %d (30 days).",
		param, api.Quote(shown), MinExpiresAfter, MaxExpiresAfter)
}

// deleteBlobs removes parts' objects, logging (not returning) failures: it
// cleans up after a failed request, whose own error is what matters.
func (s *Service) deleteBlobs(ctx context.Context, parts []Part) {
	for _, p := range parts {
		if err := s.blobs.Delete(ctx, p.Key); err != nil {
			slog.WarnContext(ctx, "files: could not delete a blob object; it is orphaned", "key", p.Key, "error", err)
		}
	}
}
