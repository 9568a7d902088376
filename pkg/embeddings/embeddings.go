// Package embeddings is the POST /v1/embeddings operation: it validates the
// request, routes it through pkg/models, and hands the provider's answer to
// pkg/modelcall to relay. When the provider answers in the encoding the
// client asked for (always, for OpenAI and Azure) the answer streams through
// untouched — the vectors are never decoded — while a Scanner reads its usage
// on the way; otherwise the vectors are converted (float ↔ base64 of
// little-endian float32).
package embeddings

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"strconv"
	"sync"

	"github.com/sluice-gateway/sluice/pkg/api"
	"github.com/sluice-gateway/sluice/pkg/auth"
	"github.com/sluice-gateway/sluice/pkg/jsonscan"
	"github.com/sluice-gateway/sluice/pkg/logevent"
	"github.com/sluice-gateway/sluice/pkg/modelcall"
	"github.com/sluice-gateway/sluice/pkg/models"
	"github.com/sluice-gateway/sluice/pkg/oai"
)

// Router is what the service needs of pkg/models.
type Router interface {
	Embed(ctx context.Context, p auth.Principal, req *oai.EmbeddingRequest) (*models.Reply, error)
}

// Service is the embeddings endpoint's operation, transport-free.
type Service struct {
	// steps start every call: built once, as a method value bound per
	// call would be an allocation per call.
	steps modelcall.Steps[*oai.EmbeddingRequest]
	calls *modelcall.Calls
	// scans holds the meters' state (*scanning) between calls.
	scans sync.Pool
}

// New builds the service over router, its calls ending through calls.
func New(router Router, calls *modelcall.Calls) *Service {
	s := &Service{calls: calls}
	s.steps = modelcall.Steps[*oai.EmbeddingRequest]{
		CallType: logevent.CallEmbedding, Parse: oai.ParseEmbeddingRequest, Route: router.Embed, Describe: describe,
	}
	s.scans.New = func() any { return &scanning{pool: &s.scans} }
	return s
}

// Create is the embeddings Operation (POST /v1/embeddings).
func (s *Service) Create(ctx context.Context, p auth.Principal, body []byte) (*modelcall.Result, error) {
	c, req, rep, err := s.steps.Start(ctx, s.calls, p, body)
	if err != nil {
		return nil, err
	}
	ans := rep.Answer
	c.Event.UsageEstimated = ans.UsageEstimated
	if ans.Encoding == req.Encoding() {
		return c.Answer(ans.Body, ans.ContentLength, s.meter(req.Encoding())), nil
	}
	out, err := convert(ans.Body, req.Encoding())
	ans.Body.Close()
	if err != nil {
		return nil, c.Fail(api.Upstream(err, "The provider's answer for model '%s' could not be read.", req.Model))
	}
	return c.Answer(io.NopCloser(bytes.NewReader(out)), int64(len(out)), s.meter(req.Encoding())), nil
}

// describe records the request in the call's log event.
func describe(req *oai.EmbeddingRequest, ev *logevent.Event) error {
	ev.Model, ev.ModelGroup, ev.EndUser = req.Model, req.Model, req.User
	ev.Messages = req.Input
	ev.ModelParameters = parameters(req)
	return nil
}

// meter reads an embeddings answer as it goes out (Scanner) and logs its
// summary. Its state, some 600 bytes, comes from the service's pool and
// goes back once End has read it: a call's meter lives as long as its log
// event, which is delivered well after the answer, and what it keeps the
// collector scans. After End the meter is spent (a Write would panic,
// never touch another call's state).
type meter struct {
	*scanning
}

// scanning is a meter's state.
type scanning struct {
	Scanner
	encoding string
	pool     *sync.Pool
}

// meter returns a meter of an answer in encoding, from the pool.
func (s *Service) meter(encoding string) *meter {
	st := s.scans.Get().(*scanning)
	st.Scanner = Scanner{}
	st.encoding = encoding
	return &meter{st}
}

func (m *meter) End(ev *logevent.Event) (oai.Usage, error) {
	st := m.scanning
	m.scanning = nil
	defer st.pool.Put(st)
	usage, _ := st.Usage()
	ev.Response = summarize(&st.Scanner, st.encoding, usage)
	if !st.Complete() {
		return usage, api.Upstream(nil, "The provider's answer was not a complete JSON object.")
	}
	return usage, nil
}

func parameters(req *oai.EmbeddingRequest) json.RawMessage {
	var m logevent.Params // in key order, as encoding/json writes a map
	if req.Dimensions > 0 {
		m.Int("dimensions", int64(req.Dimensions))
	}
	if req.EncodingFormat != "" {
		m.String("encoding_format", req.EncodingFormat)
	}
	if req.User != "" {
		m.String("user", req.User)
	}
	return m.End()
}

// summarize is what a log event keeps of an embeddings answer: its shape
// and usage, not the vectors (large, and of no use to a log):
// {"object":"list","model","data_count","dimensions","encoding_format","usage"}
// (model and dimensions left out when unknown), written without
// reflection. It is written on the stack (plain appends: a
// jsonscan.Object's methods would move the buffer to the heap) and copied
// to a slice of its own length, which the event keeps until delivered.
func summarize(scan *Scanner, encoding string, usage oai.Usage) json.RawMessage {
	var buf [256]byte
	b := append(buf[:0], `{"object":"list"`...)
	if lit, ok := scan.modelLiteral(); ok {
		if len(lit) > len(`""`) {
			b = append(append(b, `,"model":`...), lit...)
		}
	} else if m := scan.Model(); m != "" {
		b = jsonscan.AppendString(append(b, `,"model":`...), m)
	}
	b = strconv.AppendInt(append(b, `,"data_count":`...), int64(scan.Count()), 10)
	if d := scan.Dimensions(); d != 0 {
		b = strconv.AppendInt(append(b, `,"dimensions":`...), int64(d), 10)
	}
	switch encoding { // the usual two, written without a look at each byte
	case oai.EncodingFloat:
		b = append(b, `,"encoding_format":"float"`...)
	case oai.EncodingBase64:
		b = append(b, `,"encoding_format":"base64"`...)
	default:
		b = jsonscan.AppendString(append(b, `,"encoding_format":`...), encoding)
	}
	b = usage.AppendJSON(append(b, `,"usage":`...))
	return bytes.Clone(append(b, '}'))
}
