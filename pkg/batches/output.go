package batches

import (
	"bufio"
	"bytes"
	"cmp"
	"context"
	"crypto/sha256"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"sync"

	"github.com/sluice-gateway/sluice/pkg/api"
	"github.com/sluice-gateway/sluice/pkg/files"
	"github.com/sluice-gateway/sluice/pkg/ids"
	"github.com/sluice-gateway/sluice/pkg/jsonscan"
	"github.com/sluice-gateway/sluice/pkg/store"
)

// The lines of the output and error files, OpenAI's format:
//
//	{"id":"batch_req_…","custom_id":"…","response":{"status_code":200,"request_id":"req_…","body":{…}},"error":null}
//	{"id":"batch_req_…","custom_id":"…","response":{"status_code":400,"request_id":"req_…","body":{"error":{…}}},"error":null}
//	{"id":"batch_req_…","custom_id":"…","response":null,"error":{"code":"batch_expired","message":"…"}}
//
// The first is a line that answered (output file), the second one that ran
// and failed, with the status and error body its HTTP call would have had,
// the third one that never ran (both error file).

// appendResponseStart appends an answered or failed line up to its
// response body.
func appendResponseStart(b []byte, customID, requestID string, status int) []byte {
	b = append(b, `{"id":"`...)
	b = append(b, ids.New(ids.BatchRequest)...)
	b = append(b, `","custom_id":`...)
	b = jsonscan.AppendString(b, customID)
	b = append(b, `,"response":{"status_code":`...)
	b = strconv.AppendInt(b, int64(status), 10)
	b = append(b, `,"request_id":"`...)
	b = append(b, requestID...)
	return append(b, `","body":`...)
}

// responseEnd ends a line begun by appendResponseStart, after its body.
const responseEnd = "},\"error\":null}\n"

// errorLine renders the line of a request that ran and failed with e.
func errorLine(customID, requestID string, e *api.Error) []byte {
	body, _ := json.Marshal(e.Body()) // strings and pointers to them always encode
	b := appendResponseStart(make([]byte, 0, 160+len(customID)+len(body)), customID, requestID, e.Status)
	b = append(b, body...)
	return append(b, responseEnd...)
}

// Codes of lines that never ran.
const (
	codeBatchExpired   = "batch_expired"
	codeBatchCancelled = "batch_cancelled"
)

// neverRunLine renders the line of a request a cancel or the expiry kept
// from running. Its id is derived from the batch and the line, so that a
// finalize run again writes the same bytes.
func neverRunLine(b []byte, batchID string, line int, customID, code string) []byte {
	msg := "This request could not be executed before the completion window expired."
	if code == codeBatchCancelled {
		msg = "This request was not executed because the batch was cancelled."
	}
	b = append(b, `{"id":"`...)
	b = append(b, derivedID(batchID, line)...)
	b = append(b, `","custom_id":`...)
	b = jsonscan.AppendString(b, customID)
	b = append(b, `,"response":null,"error":{"code":"`...)
	b = append(b, code...)
	b = append(b, `","message":`...)
	b = jsonscan.AppendString(b, msg)
	return append(b, "}}\n"...)
}

// derivedID is a batch_req_ id made from the batch and the line number:
// random-looking, the same every time.
func derivedID(batchID string, line int) string {
	const alphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789"
	out := make([]byte, 0, len(ids.BatchRequest)+ids.Length)
	out = append(out, ids.BatchRequest...)
	seed := make([]byte, len(batchID)+16)
	copy(seed, batchID)
	binary.BigEndian.PutUint64(seed[len(batchID):], uint64(line))
	for round := uint64(0); len(out) < cap(out); round++ {
		binary.BigEndian.PutUint64(seed[len(batchID)+8:], round)
		h := sha256.Sum256(seed)
		for _, c := range h {
			if c < 248 && len(out) < cap(out) { // 248 = 4×62: every character equally likely
				out = append(out, alphabet[c%62])
			}
		}
	}
	return string(out)
}

// stream writes lines into one object of the blob store as they come,
// through a pipe to a Put that starts with the first line: a run that
// writes no line of a kind stores no object for it.
type stream struct {
	blobs store.Blobs
	key   string
	ctx   context.Context

	mu    sync.Mutex
	pw    *io.PipeWriter
	bw    *bufio.Writer
	put   chan putResult
	err   error // the first write error; sticky
	lines int
}

// errPutEnded fails a write to a stream whose Put has returned.
var errPutEnded = errors.New("batches: the object's write has ended")

type putResult struct {
	n   int64
	err error
}

// streamBuffer is what a stream gathers before handing bytes to its Put.
const streamBuffer = 64 << 10

func newStream(ctx context.Context, blobs store.Blobs, key string) *stream {
	return &stream{blobs: blobs, key: key, ctx: ctx}
}

// write writes one whole line.
func (st *stream) write(line []byte) error {
	st.mu.Lock()
	defer st.mu.Unlock()
	st.lines++
	return st.writeLocked(line)
}

// writeLocked writes bytes while the caller holds st.mu (a line written in
// several writes holds it throughout).
func (st *stream) writeLocked(p []byte) error {
	if st.err != nil {
		return st.err
	}
	if st.pw == nil {
		pr, pw := io.Pipe()
		st.pw, st.bw, st.put = pw, bufio.NewWriterSize(pw, streamBuffer), make(chan putResult, 1)
		go func() {
			n, err := st.blobs.Put(st.ctx, st.key, pr)
			// A Put that has returned fails any later write.
			pr.CloseWithError(cmp.Or(err, errPutEnded))
			st.put <- putResult{n, err}
		}()
	}
	if _, err := st.bw.Write(p); err != nil {
		st.err = fmt.Errorf("batches: write %s: %w", st.key, err)
	}
	return st.err
}

// close ends the object and returns it as a manifest part, nil when no
// line was written.
func (st *stream) close() (*files.Part, error) {
	st.mu.Lock()
	defer st.mu.Unlock()
	if st.pw == nil {
		return nil, st.err
	}
	if st.err == nil {
		if err := st.bw.Flush(); err != nil {
			st.err = fmt.Errorf("batches: write %s: %w", st.key, err)
		}
	}
	if st.err != nil {
		st.pw.CloseWithError(st.err)
		<-st.put
		st.pw = nil
		return nil, st.err
	}
	st.pw.Close()
	res := <-st.put
	st.pw = nil
	if res.err != nil {
		st.err = fmt.Errorf("batches: store %s: %w", st.key, res.err)
		return nil, st.err
	}
	return &files.Part{Key: st.key, Size: res.n}, nil
}

// abort stops the object's Put, and removes the object if it was stored.
func (st *stream) abort(cause error) {
	st.mu.Lock()
	started := st.put != nil
	if st.pw != nil {
		st.pw.CloseWithError(cause)
		<-st.put
		st.pw = nil
	}
	if st.err == nil {
		st.err = cause
	}
	st.mu.Unlock()
	if started {
		_ = st.blobs.Delete(context.WithoutCancel(st.ctx), st.key) // a leftover is only bytes nobody lists
	}
}

// inlineLimit is how much of an answer a line holds in memory before it
// writes it to its object as it comes, holding the object for itself: a
// run's memory is bounded by Options.Concurrency × inlineLimit, whatever
// the answers' sizes.
const inlineLimit = 1 << 20

// lineWriter is what an answer is written to (Result.WriteTo): it builds
// the answer's output line. Line breaks in the body — white space between
// JSON tokens, never inside a string, where JSON escapes them — become
// spaces, so a pretty-printed answer stays one line.
type lineWriter struct {
	st        *stream
	pool      *sync.Pool
	bp        *[]byte
	buf       []byte
	limit     int
	streaming bool // st.mu is held and the line is being written to st
	// spilled says part of the line went to st: should the line then fail,
	// the object is lost (the run must not commit it).
	spilled bool
	first   byte // the body's first and last bytes that are not white space
	last    byte
	written int64
}

func (s *Service) newLineWriter(st *stream, customID, reqID string) *lineWriter {
	bp := s.lineBuffers.Get().(*[]byte)
	buf := appendResponseStart((*bp)[:0], customID, reqID, http.StatusOK)
	return &lineWriter{st: st, pool: &s.lineBuffers, bp: bp, buf: buf, limit: len(buf) + inlineLimit}
}

func (w *lineWriter) Write(p []byte) (int, error) {
	w.note(p)
	if !w.streaming {
		if len(w.buf)+len(p) <= w.limit {
			w.buf = appendFlat(w.buf, p)
			return len(p), nil
		}
		w.st.mu.Lock()
		w.streaming, w.spilled = true, true
		w.st.lines++
		if err := w.st.writeLocked(w.buf); err != nil {
			return 0, err
		}
	}
	w.buf = appendFlat(w.buf[:0], p)
	if err := w.st.writeLocked(w.buf); err != nil {
		return 0, err
	}
	return len(p), nil
}

// note records where the body's JSON begins and ends.
func (w *lineWriter) note(p []byte) {
	w.written += int64(len(p))
	for i := 0; w.first == 0 && i < len(p); i++ {
		if !space(p[i]) {
			w.first = p[i]
		}
	}
	for i := len(p) - 1; i >= 0; i-- {
		if !space(p[i]) {
			w.last = p[i]
			break
		}
	}
}

func space(c byte) bool { return c == ' ' || c == '\t' || c == '\n' || c == '\r' }

// appendFlat appends p to b with CR and LF turned into spaces.
func appendFlat(b, p []byte) []byte {
	start := len(b)
	b = append(b, p...)
	for _, c := range []byte{'\n', '\r'} {
		for i := start; ; {
			j := bytes.IndexByte(b[i:], c)
			if j < 0 {
				break
			}
			b[i+j] = ' '
			i += j + 1
		}
	}
	return b
}

// finish ends the line and writes it. A body that is not a JSON object is
// an error (and, if part of it is written already — spilled — the object
// is lost).
func (w *lineWriter) finish() error {
	defer w.free()
	var err error
	if w.first != '{' || w.last != '}' {
		err = fmt.Errorf("batches: an answer of %d bytes that is not a JSON object", w.written)
	}
	if w.streaming {
		if err == nil {
			err = w.st.writeLocked([]byte(responseEnd))
		}
		w.streaming = false
		w.st.mu.Unlock()
		return err
	}
	if err != nil {
		return err
	}
	w.buf = append(w.buf, responseEnd...)
	return w.st.write(w.buf)
}

// end lets go of the object after a failed write (the caller fails the run).
func (w *lineWriter) end() {
	if w.streaming {
		w.streaming = false
		w.st.mu.Unlock()
	}
	w.free()
}

// discard drops a line that will not be written.
func (w *lineWriter) discard() { w.end() }

func (w *lineWriter) free() {
	if w.bp == nil {
		return
	}
	if cap(w.buf) <= 2*inlineLimit {
		*w.bp = w.buf[:0]
		w.pool.Put(w.bp)
	}
	w.bp, w.buf = nil, nil
}
