// Package embeddings serves POST /v1/embeddings: it validates the request,
// routes it through pkg/models, and relays the provider's answer. When the
// provider answers in the encoding the client asked for (always, for OpenAI
// and Azure) the answer streams through untouched — the vectors are never
// decoded — while a Scanner reads its usage on the way; otherwise the
// vectors are converted (float ↔ base64 of little-endian float32).
package embeddings

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"strconv"
	"sync"
	"time"

	"github.com/sluice-gateway/sluice/pkg/api"
	"github.com/sluice-gateway/sluice/pkg/auth"
	"github.com/sluice-gateway/sluice/pkg/logevent"
	"github.com/sluice-gateway/sluice/pkg/models"
	"github.com/sluice-gateway/sluice/pkg/oai"
)

// Router is what the service needs of pkg/models.
type Router interface {
	Embed(ctx context.Context, p auth.Principal, req *oai.EmbeddingRequest) (*models.Reply, error)
	Finish(ctx context.Context, p auth.Principal, rep *models.Reply, tokens int64)
}

// Service serves the embeddings endpoint.
type Service struct {
	router    Router
	events    *logevent.Emitter
	jsonLimit int64
	// buffers are relay's copy buffers, shared so that the hot path does
	// not allocate 32 KB per call.
	buffers sync.Pool
}

// New builds the service. jsonLimit caps request bodies (0: api.DefaultJSONLimit).
func New(router Router, events *logevent.Emitter, jsonLimit int64) *Service {
	s := &Service{router: router, events: events, jsonLimit: jsonLimit}
	s.buffers.New = func() any { b := make([]byte, 32<<10); return &b }
	return s
}

// Create serves POST /v1/embeddings.
func (s *Service) Create(w http.ResponseWriter, r *http.Request) error {
	start := api.RequestStart(r.Context())
	ctx := r.Context()
	p := auth.FromContext(ctx)
	ev := logevent.New(ctx, p, logevent.CallEmbedding)

	body, err := api.ReadBody(w, r, s.jsonLimit)
	if err != nil {
		return models.Failed(ctx, w.Header(), s.events, start, nil, ev, err)
	}
	req, err := oai.ParseEmbeddingRequest(body)
	if err != nil {
		return models.Failed(ctx, w.Header(), s.events, start, nil, ev, err)
	}
	ev.Model, ev.ModelGroup, ev.EndUser = req.Model, req.Model, req.User
	ev.Messages = req.Input
	ev.ModelParameters = parameters(req)

	rep, err := s.router.Embed(ctx, p, req)
	rep.Describe(ev)
	if err != nil {
		return models.Failed(ctx, w.Header(), s.events, start, rep, ev, err)
	}
	ans := rep.Answer
	defer ans.Body.Close()

	h := w.Header()
	h.Set("Content-Type", "application/json")
	var (
		scan    *Scanner
		first   time.Time
		sendErr error
	)
	if ans.Encoding == req.Encoding() {
		if ans.ContentLength >= 0 {
			h.Set("Content-Length", strconv.FormatInt(ans.ContentLength, 10))
		}
		api.SetOverhead(h, ctx)
		first = time.Now()
		w.WriteHeader(http.StatusOK)
		scan, sendErr = s.relay(w, ans.Body)
	} else {
		var out []byte
		out, scan, err = convert(ans.Body, req.Encoding())
		if err != nil {
			return models.Failed(ctx, w.Header(), s.events, start, rep, ev, api.Upstream(err, "The provider's answer for model '%s' could not be read.", req.Model))
		}
		h.Set("Content-Length", strconv.Itoa(len(out)))
		api.SetOverhead(h, ctx)
		first = time.Now()
		w.WriteHeader(http.StatusOK)
		_, sendErr = w.Write(out)
	}

	usage, _ := scan.Usage()
	ev.PromptTokens, ev.TotalTokens = usage.PromptTokens, usage.TotalTokens
	ev.UsageEstimated = ans.UsageEstimated
	ev.Response = summarize(scan, req.Encoding(), usage)
	if sendErr != nil {
		ev.Fail(api.Upstream(sendErr, "The answer was cut off before it ended."))
	} else if !scan.Complete() {
		ev.Fail(api.Upstream(nil, "The provider's answer was not a complete JSON object."))
	}
	ev.SetTimes(start, first, time.Now())
	s.router.Finish(ctx, p, rep, usage.TotalTokens)
	s.events.Start(ctx, ev)()
	return sendErr
}

func parameters(req *oai.EmbeddingRequest) map[string]any {
	if req.EncodingFormat == "" && req.Dimensions == 0 && req.User == "" {
		return nil
	}
	m := map[string]any{}
	if req.EncodingFormat != "" {
		m["encoding_format"] = req.EncodingFormat
	}
	if req.Dimensions > 0 {
		m["dimensions"] = req.Dimensions
	}
	if req.User != "" {
		m["user"] = req.User
	}
	return m
}

// summary is what a log event keeps of an embeddings answer: its shape and
// usage, not the vectors (large, and of no use to a log).
type summary struct {
	Object         string    `json:"object"`
	Model          string    `json:"model,omitempty"`
	DataCount      int       `json:"data_count"`
	Dimensions     int       `json:"dimensions,omitempty"`
	EncodingFormat string    `json:"encoding_format"`
	Usage          oai.Usage `json:"usage"`
}

func summarize(scan *Scanner, encoding string, usage oai.Usage) json.RawMessage {
	b, err := json.Marshal(summary{
		Object: "list", Model: scan.Model(), DataCount: scan.Count(), Dimensions: scan.Dimensions(),
		EncodingFormat: encoding, Usage: usage,
	})
	if err != nil {
		return nil
	}
	return b
}

// relay copies the answer to the client, scanning it on the way.
func (s *Service) relay(w io.Writer, body io.Reader) (*Scanner, error) {
	scan := new(Scanner)
	bp := s.buffers.Get().(*[]byte)
	defer s.buffers.Put(bp)
	buf := *bp
	for {
		n, err := body.Read(buf)
		if n > 0 {
			scan.Write(buf[:n])
			if _, werr := w.Write(buf[:n]); werr != nil {
				return scan, werr
			}
		}
		if err == io.EOF {
			return scan, nil
		}
		if err != nil {
			return scan, err
		}
	}
}
