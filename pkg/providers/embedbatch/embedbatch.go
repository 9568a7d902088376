// Package embedbatch serves OpenAI embeddings requests on providers whose
// APIs are not OpenAI's (Bedrock, Vertex AI, Gemini, Cohere). It reads the
// request's texts, splits them into the batches a provider accepts (one text
// per call for Titan, 96 for Cohere, …), calls the provider for every batch
// concurrently with a bound, and assembles one OpenAI embeddings answer: in
// input order, in the encoding the client asked for (base64 of
// little-endian float32 is encoded here, from the provider's float text, so
// the embeddings endpoint relays the answer without converting it), with
// usage — the provider's token counts, or an estimate when it reports none.
//
// The answer is assembled once every batch has answered: a failure in any
// batch must reach the router as an error (to retry, fall back, or map to
// the right status) before a byte of the answer leaves. What is held is the
// encoded output of each batch; each provider answer is dropped as soon as
// its vectors are encoded.
package embedbatch

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"strconv"
	"sync"

	"github.com/sluice-gateway/sluice/pkg/api"
	"github.com/sluice-gateway/sluice/pkg/jsonscan"
	"github.com/sluice-gateway/sluice/pkg/models"
	"github.com/sluice-gateway/sluice/pkg/oai"
)

// DefaultConcurrency bounds how many provider calls one request has in
// flight. 16 covers Titan's one-text-per-call fan-out of a typical batch of
// chunks in a single round trip, while one large request (2048 inputs) cannot
// open hundreds of connections at once.
const DefaultConcurrency = 16

// Limits bound one provider call.
type Limits struct {
	// MaxInputs is the most texts one call carries (at least 1).
	MaxInputs int
	// MaxBytes, when > 0, is the most bytes of text one call carries; a
	// single text longer than that still goes, alone.
	MaxBytes int
	// Concurrency bounds the calls in flight; 0 means DefaultConcurrency.
	Concurrency int
}

// Batch is one provider call's share of the inputs.
type Batch struct {
	// Start is the index of Texts[0] among the request's inputs.
	Start int
	Texts []string
}

// Result is a provider call's answer for its batch.
type Result struct {
	// Vectors holds one embedding per text of the batch, in order: each
	// the raw JSON array of numbers the provider sent.
	Vectors []json.RawMessage
	// Tokens is the batch's input token count when TokensKnown; otherwise
	// sluice estimates it (EstimateTokens).
	Tokens      int64
	TokensKnown bool
	// answer is the buffer Vectors point into (Post's), handed back once
	// they are encoded.
	answer answerBuffer
}

// Call embeds one batch. Its errors are a *models.ProviderError for a
// provider answer other than 2xx (or a malformed one), an *api.Error for
// what the gateway itself refuses or lacks, or the transport's error.
type Call func(ctx context.Context, b Batch) (Result, error)

// Output describes the answer to assemble.
type Output struct {
	// Provider names the provider in errors about its answers.
	Provider string
	// Model is the answer's "model": the provider's model name.
	Model string
	// Encoding is oai.EncodingFloat or oai.EncodingBase64.
	Encoding string
	// Dimensions, when > 0, is the length every vector must have (the
	// client asked for it; a provider that ignored it answered wrongly).
	Dimensions int
}

// Run embeds texts in batches within lim, calling call for each batch with
// at most lim.Concurrency calls in flight, and returns the OpenAI answer.
// The first failure cancels the calls still running and is returned.
func Run(ctx context.Context, texts []string, lim Limits, out Output, call Call) (*models.Answer, error) {
	batches := Split(texts, lim)
	type done struct {
		chunk     []byte
		tokens    int64
		estimated bool
	}
	results := make([]done, len(batches))
	one := func(ctx context.Context, i int) error {
		b := batches[i]
		res, err := call(ctx, b)
		if err != nil {
			return err
		}
		if len(res.Vectors) != len(b.Texts) {
			res.answer.release()
			return Malformed(out.Provider, "answered %d embeddings for %d inputs", len(res.Vectors), len(b.Texts))
		}
		chunk, err := appendItems(nil, b.Start, res.Vectors, out)
		res.answer.release() // the vectors are encoded (or refused)
		if err != nil {
			return err
		}
		d := done{chunk: chunk, tokens: res.Tokens}
		if !res.TokensKnown {
			d.tokens, d.estimated = 0, true
			for _, t := range b.Texts {
				d.tokens += EstimateTokens(t)
			}
		}
		results[i] = d
		return nil
	}
	var err error
	if len(batches) == 1 {
		err = one(ctx, 0)
	} else {
		err = fanOut(ctx, len(batches), lim.concurrency(), one)
	}
	if err != nil {
		return nil, err
	}

	var (
		tokens    int64
		estimated bool
	)
	bufs := make(net.Buffers, 0, len(results)+2)
	bufs = append(bufs, []byte(`{"object":"list","data":[`))
	for _, r := range results {
		tokens += r.tokens
		estimated = estimated || r.estimated
		bufs = append(bufs, r.chunk)
	}
	tail := make([]byte, 0, 64+len(out.Model))
	tail = append(tail, `],"model":`...)
	tail = jsonscan.AppendString(tail, out.Model)
	tail = append(tail, `,"usage":{"prompt_tokens":`...)
	tail = strconv.AppendInt(tail, tokens, 10)
	tail = append(tail, `,"total_tokens":`...)
	tail = strconv.AppendInt(tail, tokens, 10)
	tail = append(tail, "}}"...)
	bufs = append(bufs, tail)
	var size int64
	for _, b := range bufs {
		size += int64(len(b))
	}
	return &models.Answer{
		Body:           readCloser{&bufs},
		ContentLength:  size,
		Encoding:       out.Encoding,
		UsageEstimated: estimated,
	}, nil
}

// readCloser serves the assembled answer; it holds nothing to release.
type readCloser struct{ *net.Buffers }

func (readCloser) Close() error { return nil }

// Split cuts texts into batches within lim, in order.
func Split(texts []string, lim Limits) []Batch {
	maxInputs := max(lim.MaxInputs, 1)
	var (
		out   []Batch
		start int
		bytes int
	)
	for i, t := range texts {
		n := i - start
		if n > 0 && (n >= maxInputs || lim.MaxBytes > 0 && bytes+len(t) > lim.MaxBytes) {
			out = append(out, Batch{Start: start, Texts: texts[start:i]})
			start, bytes = i, 0
		}
		bytes += len(t)
	}
	if start < len(texts) {
		out = append(out, Batch{Start: start, Texts: texts[start:]})
	}
	return out
}

func (l Limits) concurrency() int {
	if l.Concurrency > 0 {
		return l.Concurrency
	}
	return DefaultConcurrency
}

// fanOut runs f(ctx, i) for i in [0, n) with at most limit running at once.
// The first error cancels the others' context and is returned; later errors
// (mostly that cancellation) are dropped.
func fanOut(parent context.Context, n, limit int, f func(ctx context.Context, i int) error) error {
	ctx, cancel := context.WithCancel(parent)
	defer cancel()
	var (
		wg    sync.WaitGroup
		once  sync.Once
		first error
		sem   = make(chan struct{}, limit)
	)
	fail := func(err error) {
		once.Do(func() {
			first = err
			cancel()
		})
	}
launch:
	for i := range n {
		select {
		case sem <- struct{}{}:
		case <-ctx.Done():
			break launch
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			if err := f(ctx, i); err != nil {
				fail(err)
			}
		}()
	}
	wg.Wait()
	if first == nil && parent.Err() != nil {
		// Cancelled before some batches started, and none of the started
		// ones failed (yet): the request itself is over.
		return context.Cause(parent)
	}
	return first
}

// EstimateTokens is sluice's token estimate for a text whose provider
// reports no usage (Gemini, and Bedrock when its token header is missing):
// one token per 4 bytes of UTF-8, rounded up — OpenAI's rule of thumb for
// English (about 4 characters per token). It overcounts ASCII-heavy code
// slightly and undercounts CJK text; the log event says usage_estimated.
func EstimateTokens(text string) int64 {
	return int64((len(text) + 3) / 4)
}

// Texts returns the request's inputs as strings, in order. The providers of
// this package embed text only: token-id inputs are a 400 naming input.
func Texts(req *oai.EmbeddingRequest, provider string) ([]string, error) {
	switch req.InputKind {
	case oai.InputString:
		// jsonscan.String decodes as encoding/json does (its own fast
		// path for a string without escapes, encoding/json otherwise).
		s, err := jsonscan.String(req.Input)
		if err != nil && json.Unmarshal(req.Input, &s) != nil {
			return nil, api.InvalidValue("input", "'input' is not a valid string.")
		}
		return []string{s}, nil
	case oai.InputStrings:
		out := make([]string, 0, req.InputCount)
		if err := json.Unmarshal(req.Input, &out); err != nil {
			return nil, api.InvalidValue("input", "'input' is not a valid array of strings.")
		}
		return out, nil
	}
	return nil, api.InvalidValue("input", "Model '%s' (provider %s) embeds text only: send 'input' as a string or an array of strings, not token ids.", req.Model, provider)
}

// Unsupported is the 400 for a parameter the deployment's model cannot
// honour. The router returns it as is: no retry, no cooldown.
func Unsupported(param, format string, args ...any) *api.Error {
	return api.InvalidValue(param, format, args...)
}

// Malformed is the error for a provider answer sluice cannot read: the
// router reports it as the provider's unexpected answer (502).
func Malformed(provider, format string, args ...any) *models.ProviderError {
	return &models.ProviderError{Provider: provider, Status: 200, Message: "unreadable answer: " + fmt.Sprintf(format, args...)}
}
