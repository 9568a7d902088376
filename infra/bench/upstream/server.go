package main

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"net/http"
	"strconv"
	"sync"
	"sync/atomic"
	"time"
)

// maxRequestBody bounds what the upstream reads from one request.
const maxRequestBody = 64 << 20

// family says which provider's error shape a route answers with.
type family int

const (
	familyNone family = iota // not a model call: no injected latency or errors
	familyOpenAI
	familyAnthropic
	familyGoogle
	familyBedrock
)

// server is the upstream's http.Handler.
type server struct {
	opts   options
	stats  *stats
	served *servedLog // nil unless -record-served
	mux    *http.ServeMux
	text   *corpus
	vecs   *vectorCache
	frames *bedrockFrames
	deltas [][]byte // precomputed Anthropic content_block_delta SSE events
	seq    atomic.Uint64
	bufs   sync.Pool
}

func newServer(opts options) *server {
	s := &server{
		opts:  opts,
		stats: newStats(),
		mux:   http.NewServeMux(),
		text:  newCorpus(opts.streamChunks),
		vecs:  newVectorCache(),
		bufs:  sync.Pool{New: func() any { b := make([]byte, 0, 64<<10); return &b }},
	}
	if opts.recordServed {
		s.served = &servedLog{}
	}
	s.deltas = anthropicDeltas(s.text)
	s.frames = newBedrockFrames(s.text)

	s.route("GET /v1/models", "openai.models", familyOpenAI, s.openAIModels)
	s.route("POST /v1/embeddings", "openai.embeddings", familyOpenAI, s.openAIEmbeddings)
	s.route("POST /v1/moderations", "openai.moderations", familyOpenAI, s.openAIModerations)
	s.route("POST /v1/chat/completions", "openai.chat", familyOpenAI, s.openAIChat)
	s.route("POST /v1/completions", "openai.completions", familyOpenAI, s.openAICompletions)

	s.route("POST /v1/messages", "anthropic.messages", familyAnthropic, s.anthropicMessages)
	s.route("POST /v1/messages/count_tokens", "anthropic.count_tokens", familyAnthropic, s.anthropicCountTokens)

	s.route("POST /v1beta/models/{action}", "gemini", familyGoogle, s.gemini)
	s.route("POST /v1/projects/{project}/locations/{location}/publishers/google/models/{action}", "vertex", familyGoogle, s.vertex)

	s.route("POST /model/{model}/invoke", "bedrock.invoke", familyBedrock, s.bedrockInvoke)
	s.route("POST /model/{model}/invoke-with-response-stream", "bedrock.invoke_stream", familyBedrock, s.bedrockInvokeStream)
	s.route("POST /model/{model}/converse", "bedrock.converse", familyBedrock, s.bedrockConverse)
	s.route("POST /model/{model}/converse-stream", "bedrock.converse_stream", familyBedrock, s.bedrockConverseStream)

	s.route("POST /api/public/ingestion", "logging.langfuse", familyNone, s.langfuseIngestion)
	s.route("POST /runs/batch", "logging.langsmith", familyNone, s.langsmithBatch)
	s.route("POST /upload/storage/v1/b/{bucket}/o", "logging.gcs", familyNone, s.gcsUpload)

	s.mux.HandleFunc("GET /_bench/stats", s.benchStats)
	s.mux.HandleFunc("GET /_bench/served", s.benchServed)
	return s
}

func (s *server) ServeHTTP(w http.ResponseWriter, r *http.Request) { s.mux.ServeHTTP(w, r) }

// route registers h behind the counting, latency and error-injection wrapper.
func (s *server) route(pattern, name string, fam family, h http.HandlerFunc) {
	counter := s.stats.counter(name)
	s.mux.HandleFunc(pattern, func(w http.ResponseWriter, r *http.Request) {
		if s.served != nil {
			received := time.Now()
			defer func() {
				// A complete answer is still in the server's buffer when the
				// handler returns: its last byte is out after this flush.
				_ = http.NewResponseController(w).Flush()
				s.served.add(name, received)
			}()
		}
		s.stats.total.Add(1)
		counter.Add(1)
		if hasCredential(r) {
			s.stats.withCredential.Add(1)
		}
		r.Body = http.MaxBytesReader(w, r.Body, maxRequestBody)
		if fam != familyNone {
			if s.opts.errorRate > 0 && rand.Float64() < s.opts.errorRate {
				s.stats.injectedErrors.Add(1)
				injectError(w, fam)
				return
			}
			if !s.delay(r.Context()) {
				return
			}
		}
		h(w, r)
	})
}

// delay waits latency plus jitter; false if the client went away.
func (s *server) delay(ctx context.Context) bool {
	d := s.opts.latency
	if s.opts.jitter > 0 {
		d += rand.N(s.opts.jitter)
	}
	if d <= 0 {
		return true
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-ctx.Done():
		return false
	}
}

// nextID returns a short unique suffix for response ids.
func (s *server) nextID() string {
	return strconv.FormatUint(s.seq.Add(1)+1<<40, 36)
}

func (s *server) getBuf() *[]byte { return s.bufs.Get().(*[]byte) }

func (s *server) putBuf(b *[]byte) {
	if cap(*b) > 8<<20 {
		return // do not keep rare huge answers alive
	}
	*b = (*b)[:0]
	s.bufs.Put(b)
}

// writeBody writes a complete JSON answer with its length.
func writeBody(w http.ResponseWriter, status int, body []byte) {
	h := w.Header()
	h.Set("Content-Type", "application/json")
	h.Set("Content-Length", strconv.Itoa(len(body)))
	w.WriteHeader(status)
	_, _ = w.Write(body)
}

// decode reads a JSON request body into v, answering 400 in the family's
// shape when it cannot.
func decode(w http.ResponseWriter, r *http.Request, fam family, v any) bool {
	if err := json.NewDecoder(r.Body).Decode(v); err != nil {
		writeError(w, fam, http.StatusBadRequest, fmt.Sprintf("invalid JSON body: %v", err))
		return false
	}
	return true
}

func (s *server) benchStats(w http.ResponseWriter, _ *http.Request) {
	body, err := json.Marshal(s.stats.snapshot())
	if err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	writeBody(w, http.StatusOK, body)
}
