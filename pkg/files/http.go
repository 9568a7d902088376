package files

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"mime"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/sluice-gateway/sluice/pkg/api"
	"github.com/sluice-gateway/sluice/pkg/auth"
	"github.com/sluice-gateway/sluice/pkg/ids"
)

// Handlers serves the Files and Uploads APIs over a Service. Each handler
// decodes its request, calls the Service and encodes the answer; the rules
// live in the Service, where the batch engine uses them too. The two
// multipart routes stage the bytes while the form streams and commit them
// once the whole form has been read, so a form that goes bad after its
// file leaves nothing behind.
type Handlers struct {
	Service *Service
	// JSONLimit bounds the JSON bodies of the Uploads API; 0 means
	// api.DefaultJSONLimit.
	JSONLimit int64
}

// HTTP-only names.
const (
	// providerHeader is LiteLLM's header form of custom_llm_provider.
	providerHeader = "Custom-Llm-Provider"
	// formOverhead is what a form may add to its file: value fields, part
	// headers and boundaries, and ignored parts. The whole body is capped at
	// the file limit plus this, so no part of a form is unbounded.
	formOverhead = maxFormParts * (maxFieldBytes + 1<<10)
	// connReadSize is how much an upload reads from the connection at a time.
	connReadSize = 256 << 10
)

var uploadFields = []string{fieldPurpose, fieldAnchor, fieldSeconds, fieldProvider}

// Upload serves POST /v1/files. The file part streams into the blob store as
// it arrives (Service.Stage), with the purpose if the form gave it first;
// the file is recorded once every field is read (StagedFile.Commit).
func (h Handlers) Upload(w http.ResponseWriter, r *http.Request) error {
	ctx := r.Context()
	p := auth.FromContext(ctx)
	r.Body = bufferedBody(http.MaxBytesReader(w, api.WatchBody(r), h.Service.opts.MaxFileSize+formOverhead))
	mr, err := r.MultipartReader()
	if err != nil {
		return api.InvalidValue("", "POST /v1/files takes a multipart/form-data body with the fields 'purpose' and 'file' (%v).", err)
	}
	var st *StagedFile
	fields, sawFile, err := readForm(mr, fieldFile, uploadFields, func(fields map[string]string, ff formFile) error {
		var err error
		st, err = h.Service.Stage(ctx, p, fields[fieldPurpose], Content{Filename: ff.Filename, ContentType: ff.ContentType, Body: ff.Body})
		return err
	})
	var params FileParams
	if err == nil {
		params, err = uploadParams(r, fields, sawFile)
	}
	if err != nil {
		if st != nil {
			st.Discard(ctx)
		}
		return err
	}
	f, err := st.Commit(ctx, params)
	if err != nil {
		return err
	}
	api.WriteJSON(w, http.StatusOK, f)
	return nil
}

// uploadParams reads the upload's parameters from the form's fields (and
// custom_llm_provider from, in LiteLLM's order, the header, the query, then
// the form).
func uploadParams(r *http.Request, fields map[string]string, sawFile bool) (FileParams, error) {
	purpose, ok := fields[fieldPurpose]
	if !ok {
		return FileParams{}, api.MissingParam(fieldPurpose)
	}
	if !sawFile {
		return FileParams{}, api.MissingParam(fieldFile)
	}
	params := FileParams{Purpose: purpose, Provider: r.Header.Get(providerHeader)}
	if params.Provider == "" {
		params.Provider = r.URL.Query().Get(fieldProvider)
	}
	if params.Provider == "" {
		params.Provider = fields[fieldProvider]
	}
	anchor, hasAnchor := fields[fieldAnchor]
	secs, hasSecs := fields[fieldSeconds]
	if hasAnchor || hasSecs {
		var err error
		if params.ExpiresAfter, err = expiresAfter(fieldAnchor, anchor, fieldSeconds, secs, hasSecs); err != nil {
			return FileParams{}, err
		}
	}
	return params, nil
}

// expiresAfter reads an expires_after policy: anchor created_at (or
// omitted) and a whole number of seconds, which the service bounds.
func expiresAfter(anchorParam, anchor, secondsParam, seconds string, hasSeconds bool) (time.Duration, error) {
	if anchor != "" && anchor != "created_at" {
		return 0, api.InvalidValue(anchorParam, "Invalid anchor %s; the only supported anchor is 'created_at'.", api.Quote(anchor))
	}
	if !hasSeconds {
		return 0, api.MissingParam(secondsParam)
	}
	n, err := strconv.ParseInt(strings.TrimSpace(seconds), 10, 64)
	if err != nil || n < MinExpiresAfter || n > MaxExpiresAfter {
		return 0, expiresAfterError(secondsParam, seconds)
	}
	return time.Duration(n) * time.Second, nil
}

// List serves GET /v1/files: the caller's team's files (every file for the
// admin), newest first unless order=asc, at most limit of them after the
// file named by after.
func (h Handlers) List(w http.ResponseWriter, r *http.Request) error {
	lp, err := parseListParams(r)
	if err != nil {
		return err
	}
	page, more, err := h.Service.List(r.Context(), auth.FromContext(r.Context()), lp)
	if err != nil {
		return err
	}
	data := make([]File, len(page))
	for i, f := range page {
		data[i] = f.File
	}
	api.WriteJSON(w, http.StatusOK, api.NewList(data, more, func(f File) string { return f.ID }))
	return nil
}

func parseListParams(r *http.Request) (ListParams, error) {
	q := r.URL.Query()
	lp := ListParams{Limit: defaultListLimit, Desc: true, Purpose: q.Get("purpose"), After: q.Get("after")}
	if v := q.Get("limit"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || n > maxListLimit {
			return lp, api.InvalidValue("limit", "Invalid limit %s: expected an integer from 1 to %d.", api.Quote(v), maxListLimit)
		}
		lp.Limit = n
	}
	switch o := q.Get("order"); o {
	case "", "desc":
	case "asc":
		lp.Desc = false
	default:
		return lp, api.InvalidValue("order", "Invalid order %s: expected 'asc' or 'desc'.", api.Quote(o))
	}
	if lp.Purpose != "" && !slices.Contains(objectPurposes, lp.Purpose) {
		return lp, api.InvalidValue("purpose", "Invalid purpose %s; expected one of: %s.", api.Quote(lp.Purpose), strings.Join(objectPurposes, ", "))
	}
	if lp.After != "" && !ids.Valid(ids.File, lp.After) {
		return lp, api.InvalidValue("after", "Invalid after %s: expected a file id (file-…).", api.Quote(lp.After))
	}
	return lp, nil
}

// Get serves GET /v1/files/{file_id}.
func (h Handlers) Get(w http.ResponseWriter, r *http.Request) error {
	f, err := h.Service.Get(r.Context(), auth.FromContext(r.Context()), r.PathValue("file_id"))
	if err != nil {
		return err
	}
	api.WriteJSON(w, http.StatusOK, f.File)
	return nil
}

// Delete serves DELETE /v1/files/{file_id}.
func (h Handlers) Delete(w http.ResponseWriter, r *http.Request) error {
	id := r.PathValue("file_id")
	if err := h.Service.Delete(r.Context(), auth.FromContext(r.Context()), id); err != nil {
		return err
	}
	api.WriteJSON(w, http.StatusOK, Deleted{ID: id, Object: "file", Deleted: true})
	return nil
}

// Content serves GET /v1/files/{file_id}/content: the bytes, streamed
// across the file's parts, with Content-Length, Content-Disposition and
// single-range Range requests (206, or 416 for a range past the end).
func (h Handlers) Content(w http.ResponseWriter, r *http.Request) error {
	ctx := r.Context()
	f, err := h.Service.Get(ctx, auth.FromContext(ctx), r.PathValue("file_id"))
	if err != nil {
		return err
	}
	etag := `"` + f.ID + `"` // content never changes, so the id is a strong validator
	lastModified := f.Created.UTC().Format(http.TimeFormat)
	start, length, partial := int64(0), f.Bytes, false
	if rh := r.Header.Get("Range"); rh != "" && ifRangeHolds(r.Header.Get("If-Range"), etag, lastModified) {
		var satisfiable bool
		start, length, partial, satisfiable = parseRange(rh, f.Bytes)
		if !satisfiable {
			w.Header().Set("Content-Range", fmt.Sprintf("bytes */%d", f.Bytes))
			return &api.Error{
				Status: http.StatusRequestedRangeNotSatisfiable, Type: api.TypeInvalidRequest, Code: "range_not_satisfiable",
				Message: fmt.Sprintf("The range %s is not satisfiable: the file is %d bytes.", api.Quote(rh), f.Bytes),
			}
		}
		if !partial {
			start, length = 0, f.Bytes
		}
	}
	var body io.ReadCloser
	if r.Method != http.MethodHead {
		// Open before answering, so a missing object is a clean error.
		if body, err = h.Service.Open(ctx, f, start, length); err != nil {
			return err
		}
		defer body.Close()
	}
	hd := w.Header()
	hd.Set("Content-Type", contentTypeOr(f.ContentType))
	hd.Set("Content-Length", strconv.FormatInt(length, 10))
	hd.Set("Content-Disposition", disposition(f.Filename))
	hd.Set("Accept-Ranges", "bytes")
	hd.Set("ETag", etag)
	hd.Set("Last-Modified", lastModified)
	hd.Set("X-Content-Type-Options", "nosniff")
	status := http.StatusOK
	if partial {
		hd.Set("Content-Range", fmt.Sprintf("bytes %d-%d/%d", start, start+length-1, f.Bytes))
		status = http.StatusPartialContent
	}
	w.WriteHeader(status)
	if body == nil {
		return nil
	}
	// Hide any ReaderFrom/WriterTo so the copy goes through one fixed buffer.
	if _, err := io.CopyBuffer(struct{ io.Writer }{w}, struct{ io.Reader }{body}, make([]byte, copyBufferSize)); err != nil {
		return fmt.Errorf("files: stream %s: %w", f.ID, err)
	}
	return nil
}

// CreateUpload serves POST /v1/uploads.
func (h Handlers) CreateUpload(w http.ResponseWriter, r *http.Request) error {
	var in struct {
		Filename     *string `json:"filename"`
		Purpose      *string `json:"purpose"`
		Bytes        *int64  `json:"bytes"`
		MimeType     *string `json:"mime_type"`
		ExpiresAfter *struct {
			Anchor  string       `json:"anchor"`
			Seconds *json.Number `json:"seconds"`
		} `json:"expires_after"`
	}
	if err := api.DecodeJSON(w, r, h.JSONLimit, &in); err != nil {
		return err
	}
	switch {
	case in.Filename == nil:
		return api.MissingParam("filename")
	case in.Purpose == nil:
		return api.MissingParam("purpose")
	case in.Bytes == nil:
		return api.MissingParam("bytes")
	case in.MimeType == nil:
		return api.MissingParam("mime_type")
	}
	nu := NewUpload{Filename: *in.Filename, Purpose: *in.Purpose, Bytes: *in.Bytes, MimeType: *in.MimeType}
	if ea := in.ExpiresAfter; ea != nil {
		secs := ""
		if ea.Seconds != nil {
			secs = ea.Seconds.String()
		}
		var err error
		if nu.ExpiresAfter, err = expiresAfter("expires_after.anchor", ea.Anchor, "expires_after.seconds", secs, ea.Seconds != nil); err != nil {
			return err
		}
	}
	u, err := h.Service.CreateUpload(r.Context(), auth.FromContext(r.Context()), nu)
	if err != nil {
		return err
	}
	api.WriteJSON(w, http.StatusOK, u)
	return nil
}

// AddPart serves POST /v1/uploads/{upload_id}/parts: the multipart field
// "data" streams into its own blob object.
func (h Handlers) AddPart(w http.ResponseWriter, r *http.Request) error {
	ctx := r.Context()
	r.Body = bufferedBody(http.MaxBytesReader(w, api.WatchBody(r), MaxPartBytes+formOverhead))
	mr, err := r.MultipartReader()
	if err != nil {
		return api.InvalidValue(fieldData, "POST /v1/uploads/{upload_id}/parts takes a multipart/form-data body with the field 'data' (%v).", err)
	}
	var sp *StagedPart
	_, sawData, err := readForm(mr, fieldData, nil, func(_ map[string]string, ff formFile) error {
		var err error
		sp, err = h.Service.StagePart(ctx, auth.FromContext(ctx), r.PathValue("upload_id"), Content{Body: ff.Body})
		return err
	})
	if err == nil && !sawData {
		err = api.MissingParam(fieldData)
	}
	if err != nil {
		if sp != nil {
			sp.Discard(ctx)
		}
		return err
	}
	part, err := sp.Commit(ctx)
	if err != nil {
		return err
	}
	api.WriteJSON(w, http.StatusOK, part)
	return nil
}

// CompleteUpload serves POST /v1/uploads/{upload_id}/complete.
func (h Handlers) CompleteUpload(w http.ResponseWriter, r *http.Request) error {
	var in struct {
		PartIDs *[]string `json:"part_ids"`
		MD5     *string   `json:"md5"`
	}
	if err := api.DecodeJSON(w, r, h.JSONLimit, &in); err != nil {
		return err
	}
	if in.PartIDs == nil {
		return api.MissingParam("part_ids")
	}
	md5sum := ""
	if in.MD5 != nil {
		md5sum = *in.MD5
	}
	u, err := h.Service.CompleteUpload(r.Context(), auth.FromContext(r.Context()), r.PathValue("upload_id"), *in.PartIDs, md5sum)
	if err != nil {
		return err
	}
	api.WriteJSON(w, http.StatusOK, u)
	return nil
}

// CancelUpload serves POST /v1/uploads/{upload_id}/cancel.
func (h Handlers) CancelUpload(w http.ResponseWriter, r *http.Request) error {
	u, err := h.Service.CancelUpload(r.Context(), auth.FromContext(r.Context()), r.PathValue("upload_id"))
	if err != nil {
		return err
	}
	api.WriteJSON(w, http.StatusOK, u)
	return nil
}

// disposition is an attachment Content-Disposition naming the file; names
// outside ASCII are encoded as RFC 2231 says.
func disposition(name string) string {
	if d := mime.FormatMediaType("attachment", map[string]string{"filename": name}); d != "" {
		return d
	}
	return "attachment"
}

// ifRangeHolds reports whether a Range request may be honoured given its
// If-Range (RFC 9110 §13.1.5): absent, or naming the current validator.
func ifRangeHolds(ifRange, etag, lastModified string) bool {
	return ifRange == "" || ifRange == etag || ifRange == lastModified
}

// parseRange reads a Range header for a resource of size bytes (size > 0).
// partial is false when the header is to be ignored (another unit, several
// ranges, bad syntax: RFC 9110 lets a server answer those with the whole
// content); satisfiable is false when the one range lies past the end.
func parseRange(h string, size int64) (start, length int64, partial, satisfiable bool) {
	unit, spec, ok := strings.Cut(strings.TrimSpace(h), "=")
	if !ok || !strings.EqualFold(strings.TrimSpace(unit), "bytes") || strings.Contains(spec, ",") {
		return 0, size, false, true
	}
	first, last, ok := strings.Cut(strings.TrimSpace(spec), "-")
	if !ok {
		return 0, size, false, true
	}
	first, last = strings.TrimSpace(first), strings.TrimSpace(last)
	if first == "" {
		n, ok := digits(last)
		switch {
		case !ok:
			return 0, size, false, true
		case n == 0:
			return 0, 0, true, false
		}
		n = min(n, size)
		return size - n, n, true, true
	}
	a, ok := digits(first)
	if !ok {
		return 0, size, false, true
	}
	b := size - 1
	if last != "" {
		if b, ok = digits(last); !ok || b < a {
			return 0, size, false, true
		}
		b = min(b, size-1)
	}
	if a >= size {
		return 0, 0, true, false
	}
	return a, b - a + 1, true, true
}

// digits parses a non-negative decimal made only of digits; values past
// int64 saturate, which every comparison with a size handles.
func digits(s string) (int64, bool) {
	if s == "" {
		return 0, false
	}
	var n int64
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c < '0' || c > '9' {
			return 0, false
		}
		if n > (1<<63-1-9)/10 {
			n = 1<<63 - 1
			continue
		}
		n = n*10 + int64(c-'0')
	}
	return n, true
}

// bufferedBody reads body in large chunks. The multipart reader asks for a
// few KB at a time; without this each of those is a read from the socket,
// and those system calls are most of an upload's CPU. The body it is given
// is api.WatchBody's, so that a client that hangs up mid-form is a 499, not
// a form that "ends early".
func bufferedBody(body io.ReadCloser) io.ReadCloser {
	return struct {
		io.Reader
		io.Closer
	}{bufio.NewReaderSize(body, connReadSize), body}
}
