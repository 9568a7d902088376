package main

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"strconv"
)

// The logging sinks stand in for the destinations of team callbacks, so a
// benchmark can point a callback at the upstream and count what arrives.

// langfuseIngestion answers POST /api/public/ingestion like Langfuse: 207
// with one success per envelope. On the machine a benchmark shares with
// sluice it stands in for a remote service, whose CPU is not sluice's to
// compete with, so it does as little as it can: it reads the batch into a
// pooled buffer, checks its frame, and takes the number of envelopes from
// the batch's metadata.batch_size (which the Langfuse SDKs send, and
// sluice's tests hold to the batch) instead of parsing the envelopes.
// sluice reads only the errors of the answer, so the successes carry the
// envelopes' positions, not their ids.
func (s *server) langfuseIngestion(w http.ResponseWriter, r *http.Request) {
	buf := s.getBuf()
	defer s.putBuf(buf)
	read := bytes.NewBuffer((*buf)[:0])
	_, err := read.ReadFrom(r.Body)
	body := read.Bytes()
	*buf = body
	if err != nil {
		writeError(w, familyOpenAI, http.StatusBadRequest, "read body: "+err.Error())
		return
	}
	body = bytes.TrimSpace(body)
	if !bytes.HasPrefix(body, []byte(`{"batch":[`)) || !bytes.HasSuffix(body, []byte("}")) {
		writeError(w, familyOpenAI, http.StatusBadRequest, `invalid ingestion batch: want {"batch":[...],...}`)
		return
	}
	n, ok := batchSize(body)
	if !ok {
		writeError(w, familyOpenAI, http.StatusBadRequest, `invalid ingestion batch: no "metadata":{"batch_size":N} after the batch`)
		return
	}
	s.stats.loggingEvents.Add(int64(n))
	answer := s.getBuf()
	defer s.putBuf(answer)
	b := append((*answer)[:0], `{"successes":[`...)
	for i := range n {
		if i > 0 {
			b = append(b, ',')
		}
		b = strconv.AppendInt(append(b, `{"id":"`...), int64(i), 10)
		b = append(b, `","status":201}`...)
	}
	*answer = append(b, `],"errors":[]}`...)
	writeBody(w, http.StatusMultiStatus, *answer)
}

// batchSize reads metadata.batch_size from the tail of an ingestion batch,
// where the envelopes end: `],"metadata":{"batch_size":N`.
func batchSize(body []byte) (int, bool) {
	const key = `],"metadata":{"batch_size":`
	i := bytes.LastIndex(body, []byte(key))
	if i < 0 {
		return 0, false
	}
	digits := body[i+len(key):]
	end := bytes.IndexAny(digits, ",}")
	if end < 0 {
		return 0, false
	}
	n, err := strconv.Atoi(string(digits[:end]))
	return n, err == nil && n >= 0
}

// langsmithBatch answers POST /runs/batch like LangSmith.
func (s *server) langsmithBatch(w http.ResponseWriter, r *http.Request) {
	var req struct {
		Post  []json.RawMessage `json:"post"`
		Patch []json.RawMessage `json:"patch"`
	}
	if !decode(w, r, familyOpenAI, &req) {
		return
	}
	s.stats.loggingEvents.Add(int64(len(req.Post) + len(req.Patch)))
	writeBody(w, http.StatusAccepted, []byte(`{}`))
}

// gcsUpload answers a GCS media upload with the object's metadata.
func (s *server) gcsUpload(w http.ResponseWriter, r *http.Request) {
	n, err := discard(r)
	if err != nil {
		writeError(w, familyGoogle, http.StatusBadRequest, "read body: "+err.Error())
		return
	}
	s.stats.loggingEvents.Add(1)
	b := []byte(`{"kind":"storage#object","bucket":`)
	b = strconv.AppendQuote(b, r.PathValue("bucket"))
	b = append(b, `,"name":`...)
	b = strconv.AppendQuote(b, r.URL.Query().Get("name"))
	b = append(b, `,"size":"`...)
	b = strconv.AppendInt(b, n, 10)
	writeBody(w, http.StatusOK, append(b, `","contentType":"application/json"}`...))
}

func discard(r *http.Request) (int64, error) {
	return io.Copy(io.Discard, r.Body)
}
