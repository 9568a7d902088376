package files

import (
	"context"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"strconv"
	"strings"

	"github.com/sluice-gateway/sluice/pkg/api"
	"github.com/sluice-gateway/sluice/pkg/auth"
	"github.com/sluice-gateway/sluice/pkg/store"
)

// copyBufferSize is the buffer a download streams through.
const copyBufferSize = 64 << 10

// HandleGet serves GET /v1/files/{file_id}.
func (s *Service) HandleGet(w http.ResponseWriter, r *http.Request) error {
	f, err := s.Get(r.Context(), auth.FromContext(r.Context()), r.PathValue("file_id"))
	if err != nil {
		return err
	}
	api.WriteJSON(w, http.StatusOK, f.File)
	return nil
}

// HandleContent serves GET /v1/files/{file_id}/content: the bytes, streamed
// across the file's parts, with Content-Length, Content-Disposition and
// single-range Range requests (206, or 416 for a range past the end).
func (s *Service) HandleContent(w http.ResponseWriter, r *http.Request) error {
	ctx := r.Context()
	f, err := s.Get(ctx, auth.FromContext(ctx), r.PathValue("file_id"))
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
				Message: fmt.Sprintf("The range %s is not satisfiable: the file is %d bytes.", quote(rh), f.Bytes),
			}
		}
		if !partial {
			start, length = 0, f.Bytes
		}
	}
	var body io.ReadCloser
	if r.Method != http.MethodHead {
		// Open before answering, so a missing object is a clean error.
		if body, err = s.Open(ctx, f, start, length); err != nil {
			return err
		}
		defer body.Close()
	}
	h := w.Header()
	h.Set("Content-Type", contentTypeOr(f.ContentType))
	h.Set("Content-Length", strconv.FormatInt(length, 10))
	h.Set("Content-Disposition", disposition(f.Filename))
	h.Set("Accept-Ranges", "bytes")
	h.Set("ETag", etag)
	h.Set("Last-Modified", lastModified)
	h.Set("X-Content-Type-Options", "nosniff")
	status := http.StatusOK
	if partial {
		h.Set("Content-Range", fmt.Sprintf("bytes %d-%d/%d", start, start+length-1, f.Bytes))
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

// Open reads length bytes of f from offset (length < 0: to the end),
// streaming across its parts in order, opening each object only when the
// read reaches it. The first object is opened before Open returns. A part
// that yields fewer bytes than the manifest records is an error, never a
// silently short read.
func (s *Service) Open(ctx context.Context, f Stored, offset, length int64) (io.ReadCloser, error) {
	if offset < 0 || offset > f.Bytes {
		return nil, fmt.Errorf("files: open %s: offset %d outside 0..%d", f.ID, offset, f.Bytes)
	}
	if length < 0 || offset+length > f.Bytes {
		length = f.Bytes - offset
	}
	var segs []segment
	pos := int64(0)
	for _, p := range f.Parts {
		lo, hi := max(offset, pos), min(offset+length, pos+p.Size)
		if lo < hi {
			segs = append(segs, segment{key: p.Key, off: lo - pos, n: hi - lo})
		}
		pos += p.Size
	}
	if len(segs) == 0 {
		return io.NopCloser(strings.NewReader("")), nil
	}
	m := &manifestReader{ctx: ctx, blobs: s.blobs, file: f.ID, segs: segs}
	if err := m.next(); err != nil {
		return nil, err
	}
	return m, nil
}

// segment is the byte range of one object that a read covers.
type segment struct {
	key    string
	off, n int64
}

type manifestReader struct {
	ctx   context.Context
	blobs store.Blobs
	file  string
	segs  []segment
	cur   io.ReadCloser
	left  int64 // bytes the current segment still owes
}

// next closes the current object and opens the next segment's.
func (m *manifestReader) next() error {
	if m.cur != nil {
		m.cur.Close()
		m.cur = nil
	}
	if len(m.segs) == 0 {
		return io.EOF
	}
	sg := m.segs[0]
	m.segs = m.segs[1:]
	rc, err := m.blobs.Get(m.ctx, sg.key, sg.off, sg.n)
	if err != nil {
		if errors.Is(err, store.ErrNotFound) {
			return fmt.Errorf("files: %s: part %s is missing from the blob store: %w", m.file, sg.key, err)
		}
		return fmt.Errorf("files: %s: open part %s: %w", m.file, sg.key, err)
	}
	m.cur, m.left = rc, sg.n
	return nil
}

func (m *manifestReader) Read(p []byte) (int, error) {
	for {
		if m.cur == nil {
			return 0, io.EOF
		}
		if m.left > 0 {
			n, err := m.cur.Read(p[:min(int64(len(p)), m.left)])
			m.left -= int64(n)
			if err == io.EOF && m.left > 0 {
				return n, fmt.Errorf("files: %s: a part ended %d bytes early: %w", m.file, m.left, io.ErrUnexpectedEOF)
			}
			if err != nil && err != io.EOF {
				return n, fmt.Errorf("files: %s: read part: %w", m.file, err)
			}
			if n > 0 || len(p) == 0 {
				return n, nil
			}
			continue
		}
		if err := m.next(); err != nil {
			if err == io.EOF {
				m.cur = nil
			}
			return 0, err
		}
	}
}

func (m *manifestReader) Close() error {
	if m.cur != nil {
		err := m.cur.Close()
		m.cur = nil
		return err
	}
	return nil
}
