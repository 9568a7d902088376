package main

import (
	"encoding/json"
	"io"
	"net/http"
	"strconv"
)

// The logging sinks stand in for the destinations of team callbacks, so a
// benchmark can point a callback at the upstream and count what arrives.

// langfuseIngestion answers POST /api/public/ingestion like Langfuse: 207
// with one success per event.
func (s *server) langfuseIngestion(w http.ResponseWriter, r *http.Request) {
	var req struct {
		Batch []struct {
			ID string `json:"id"`
		} `json:"batch"`
	}
	if !decode(w, r, familyOpenAI, &req) {
		return
	}
	s.stats.loggingEvents.Add(int64(len(req.Batch)))
	b := []byte(`{"successes":[`)
	for i, ev := range req.Batch {
		if i > 0 {
			b = append(b, ',')
		}
		b = append(b, `{"id":`...)
		b = strconv.AppendQuote(b, ev.ID)
		b = append(b, `,"status":201}`...)
	}
	writeBody(w, http.StatusMultiStatus, append(b, `],"errors":[]}`...))
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
