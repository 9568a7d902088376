package files

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/sluice-gateway/sluice/pkg/api"
	"github.com/sluice-gateway/sluice/pkg/auth"
	"github.com/sluice-gateway/sluice/pkg/batchinput"
	"github.com/sluice-gateway/sluice/pkg/ids"
)

// Form fields of POST /v1/files.
const (
	fieldFile     = "file"
	fieldPurpose  = "purpose"
	fieldAnchor   = "expires_after[anchor]"
	fieldSeconds  = "expires_after[seconds]"
	fieldProvider = "custom_llm_provider"
	// providerHeader is LiteLLM's header form of custom_llm_provider.
	providerHeader  = "Custom-Llm-Provider"
	defaultProvider = "openai"
	// maxFilenameBytes bounds a file name.
	maxFilenameBytes = 1024
	// maxProviderBytes bounds custom_llm_provider.
	maxProviderBytes = 64
	// formOverhead is what a form may add to its file: value fields, part
	// headers and boundaries, and ignored parts. The whole body is capped at
	// the file limit plus this, so no part of a form is unbounded.
	formOverhead = maxFormParts * (maxFieldBytes + 1<<10)
	// readBufferSize is the buffer between the request body and the blob
	// store: large enough to keep system calls few, small enough not to
	// matter to memory.
	readBufferSize = 64 << 10
)

var uploadFields = []string{fieldPurpose, fieldAnchor, fieldSeconds, fieldProvider}

// stream is a file part that has been written to the blob store.
type stream struct {
	key         string
	size        int64
	filename    string
	contentType string
	// speculative is the batch validation that ran while the purpose was
	// not yet known (the file part came first); nil if none ran.
	speculative *batchinput.Validator
}

// HandleUpload serves POST /v1/files. The file part streams into the blob
// store as it arrives; memory does not grow with the file.
//
// Batch input lines are validated while they stream. When "purpose" comes
// before the file (curl, the Python SDK), a bad batch line stops the upload
// at once. When it comes after (the Go SDK sorts fields, so "file" precedes
// "purpose"), the lines are validated speculatively on the same single pass
// — cheap, because a file that is not JSONL fails on its first byte and is
// then only counted — and the verdict is applied once the purpose is known:
// nothing is read twice, and a bad batch file is deleted before the answer.
func (s *Service) HandleUpload(w http.ResponseWriter, r *http.Request) error {
	ctx := r.Context()
	p := auth.FromContext(ctx)
	r.Body = bufferedBody(http.MaxBytesReader(w, r.Body, s.opts.MaxFileSize+formOverhead))
	mr, err := r.MultipartReader()
	if err != nil {
		return api.InvalidValue("", "POST /v1/files takes a multipart/form-data body with the fields 'purpose' and 'file' (%v).", err)
	}
	id := ids.New(ids.File)
	var st *stream
	fields, sawFile, err := readForm(mr, fieldFile, uploadFields, func(fields map[string]string, ff formFile) error {
		var err error
		st, err = s.streamFile(ctx, "files/"+id, fields[fieldPurpose], ff)
		return err
	})
	if err == nil {
		err = s.finishUpload(w, r, p, id, fields, sawFile, st)
	}
	if err != nil && st != nil {
		s.deleteBlobs(context.WithoutCancel(ctx), []Part{{Key: st.key}})
	}
	return err
}

// finishUpload checks the fields, applies a speculative batch verdict and
// records the file.
func (s *Service) finishUpload(w http.ResponseWriter, r *http.Request, p auth.Principal, id string, fields map[string]string, sawFile bool, st *stream) error {
	purpose, ok := fields[fieldPurpose]
	if !ok {
		return api.MissingParam(fieldPurpose)
	}
	if err := checkUploadPurpose(purpose); err != nil {
		return err
	}
	if !sawFile {
		return api.MissingParam(fieldFile)
	}
	expiresAfter, err := formExpiry(fields)
	if err != nil {
		return err
	}
	if expiresAfter == 0 && purpose == PurposeBatch {
		expiresAfter = DefaultBatchExpiry
	}
	provider, err := requestProvider(r, fields)
	if err != nil {
		return err
	}
	if purpose == PurposeBatch && st.speculative != nil {
		if err := batchError(st.speculative.Close()); err != nil {
			return err
		}
	}
	f, err := s.Create(r.Context(), NewFile{
		ID: id, Team: p.TeamID, Filename: st.filename, Purpose: purpose, ContentType: st.contentType,
		Provider: provider, Parts: []Part{{Key: st.key, Size: st.size}}, ExpiresAfter: expiresAfter,
	})
	if err != nil {
		return err
	}
	api.WriteJSON(w, http.StatusOK, f)
	return nil
}

// streamFile writes the file part to the blob store at key. purpose is the
// purpose if it came before the file, else "".
func (s *Service) streamFile(ctx context.Context, key, purpose string, ff formFile) (*stream, error) {
	if purpose != "" {
		if err := checkUploadPurpose(purpose); err != nil {
			return nil, err
		}
	}
	filename, err := checkFilename(ff.Filename)
	if err != nil {
		return nil, err
	}
	body := bufio.NewReaderSize(ff.Body, readBufferSize)
	if _, err := body.Peek(1); err == io.EOF {
		return nil, api.InvalidValue(fieldFile, "The file is empty.")
	} else if err != nil {
		return nil, err
	}
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
	if v != nil {
		src = io.TeeReader(src, v)
	}
	n, err := s.blobs.Put(ctx, key, src)
	if err != nil {
		// A failed Put stores nothing.
		return nil, uploadError(err)
	}
	st := &stream{key: key, size: n, filename: filename, contentType: contentTypeOr(ff.ContentType)}
	if purpose == PurposeBatch {
		if err := batchError(v.Close()); err != nil {
			return st, err
		}
	} else if purpose == "" {
		st.speculative = v
	}
	return st, nil
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
// limit, a malformed body) pass through whatever wrapped them.
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
		return api.InvalidValue(fieldPurpose, "Invalid purpose %s; expected one of: %s.", quote(purpose), strings.Join(uploadPurposes, ", "))
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

// formExpiry reads expires_after[anchor] and expires_after[seconds]; 0 means
// none was given.
func formExpiry(fields map[string]string) (time.Duration, error) {
	anchor, hasAnchor := fields[fieldAnchor]
	secs, hasSecs := fields[fieldSeconds]
	if !hasAnchor && !hasSecs {
		return 0, nil
	}
	return expiry(fieldAnchor, anchor, fieldSeconds, secs, hasSecs)
}

// expiry checks an expires_after policy: anchor created_at (or omitted) and
// seconds within OpenAI's bounds.
func expiry(anchorParam, anchor, secondsParam, seconds string, hasSeconds bool) (time.Duration, error) {
	if anchor != "" && anchor != "created_at" {
		return 0, api.InvalidValue(anchorParam, "Invalid anchor %s; the only supported anchor is 'created_at'.", quote(anchor))
	}
	if !hasSeconds {
		return 0, api.MissingParam(secondsParam)
	}
	n, err := strconv.ParseInt(strings.TrimSpace(seconds), 10, 64)
	if err != nil || n < MinExpiresAfter || n > MaxExpiresAfter {
		return 0, api.InvalidValue(secondsParam, "Invalid %s %s: expected an integer from %d (1 hour) to %d (30 days).",
			secondsParam, quote(seconds), MinExpiresAfter, MaxExpiresAfter)
	}
	return time.Duration(n) * time.Second, nil
}

// requestProvider reads custom_llm_provider from, in LiteLLM's order, the
// header, the query, then the form; default "openai". Sluice records it and
// keeps the bytes itself whatever it says.
func requestProvider(r *http.Request, fields map[string]string) (string, error) {
	v := r.Header.Get(providerHeader)
	if v == "" {
		v = r.URL.Query().Get(fieldProvider)
	}
	if v == "" {
		v = fields[fieldProvider]
	}
	if v == "" {
		return defaultProvider, nil
	}
	if len(v) > maxProviderBytes {
		return "", api.InvalidValue(fieldProvider, "custom_llm_provider is longer than %d bytes.", maxProviderBytes)
	}
	return v, nil
}

// quote quotes a client's value for an error message, cut short if long.
func quote(s string) string {
	const max = 64
	if len(s) > max {
		return strconv.Quote(s[:max]) + "…"
	}
	return strconv.Quote(s)
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

// connReadSize is how much an upload reads from the connection at a time.
const connReadSize = 256 << 10

// bufferedBody reads body in large chunks. The multipart reader asks for a
// few KB at a time; without this each of those is a read from the socket,
// and those system calls are most of an upload's CPU.
func bufferedBody(body io.ReadCloser) io.ReadCloser {
	return struct {
		io.Reader
		io.Closer
	}{bufio.NewReaderSize(body, connReadSize), body}
}
