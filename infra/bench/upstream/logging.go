package main

import (
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"strconv"

	"github.com/sluice-gateway/sluice/pkg/jsonscan"
)

// The logging sinks stand in for the destinations of team callbacks, so a
// benchmark can point a callback at the upstream and count what arrives.

// langfuseIngestion answers POST /api/public/ingestion like Langfuse: 207
// with one success per event. It scans the batch for the envelopes' ids
// instead of decoding it: on the machine a benchmark shares with sluice,
// the sink stands in for a remote service, and its CPU is not sluice's to
// compete with.
func (s *server) langfuseIngestion(w http.ResponseWriter, r *http.Request) {
	body, err := io.ReadAll(r.Body)
	if err != nil {
		writeError(w, familyOpenAI, http.StatusBadRequest, "read body: "+err.Error())
		return
	}
	b := []byte(`{"successes":[`)
	n := 0
	err = jsonscan.Members(body, func(name, value []byte) error {
		if string(name) != "batch" {
			return nil
		}
		return jsonscan.Elements(value, func(env []byte) error {
			id, err := envelopeID(env)
			if err != nil {
				return err
			}
			if n > 0 {
				b = append(b, ',')
			}
			n++
			b = append(append(append(b, `{"id":`...), id...), `,"status":201}`...)
			return nil
		})
	})
	if err != nil {
		writeError(w, familyOpenAI, http.StatusBadRequest, "invalid ingestion batch: "+err.Error())
		return
	}
	s.stats.loggingEvents.Add(int64(n))
	writeBody(w, http.StatusMultiStatus, append(b, `],"errors":[]}`...))
}

// envelopeID is an ingestion envelope's id member, as its JSON string.
func envelopeID(env []byte) ([]byte, error) {
	var id []byte
	err := jsonscan.Members(env, func(name, value []byte) error {
		if string(name) == "id" {
			id = value
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	if len(id) == 0 || id[0] != '"' {
		return nil, errors.New("an envelope without a string id")
	}
	return id, nil
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
