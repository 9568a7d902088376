package embedbatch

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"sync"

	"github.com/sluice-gateway/sluice/pkg/jsonscan"
	"github.com/sluice-gateway/sluice/pkg/models"
	"github.com/sluice-gateway/sluice/pkg/oai"
	"github.com/sluice-gateway/sluice/pkg/providers"
)

// Prepare is the start of every provider's Embed: the request's texts (see
// Texts) and the Output to assemble for the provider's model.
func Prepare(req *oai.EmbeddingRequest, provider, model string) ([]string, Output, error) {
	texts, err := Texts(req, provider)
	if err != nil {
		return nil, Output{}, err
	}
	return texts, Output{Provider: provider, Model: model, Encoding: req.Encoding(), Dimensions: req.Dimensions}, nil
}

// PrepareGoogle is Prepare for Google's embedding APIs (Gemini, Vertex AI),
// with the request's task type (see TaskType; deployment is the
// deployment's default).
func PrepareGoogle(req *oai.EmbeddingRequest, provider, model, deployment string) ([]string, Output, string, error) {
	texts, out, err := Prepare(req, provider, model)
	if err != nil {
		return nil, out, "", err
	}
	task, err := TaskType(req, deployment)
	return texts, out, task, err
}

// Endpoint is where a provider's embed calls go: each batch is one JSON POST
// to URL through Client, with the credential Authorize puts on it (it gets
// the encoded body too, for a signature; the request's context is the
// call's). Answers are read into Buffers' buffers when it is set.
type Endpoint struct {
	Provider  string
	Client    *http.Client
	URL       string
	Authorize func(r *http.Request, body []byte) error
	Buffers   *Buffers
}

// Buffers keeps the buffers provider answers were read into, for the next
// calls: Run hands an answer's buffer back as soon as its vectors are
// encoded, which spares allocating (and collecting) every answer. A
// deployment's endpoint keeps one; the zero value is ready.
type Buffers struct{ pool sync.Pool }

// maxKeptAnswer bounds the buffers Buffers keeps: a Titan answer is about
// 20 KB, a full batch of Cohere vectors about 2 MB; a rare larger answer is
// left to the collector.
const maxKeptAnswer = 4 << 20

// get returns a buffer to read an answer into (an empty one when none is
// kept); nil when bs is nil.
func (bs *Buffers) get() *[]byte {
	if bs == nil {
		return nil
	}
	if b, ok := bs.pool.Get().(*[]byte); ok {
		return b
	}
	return new([]byte)
}

// put keeps the buffer under body, which nothing refers to any more.
func (bs *Buffers) put(b *[]byte, body []byte) {
	if bs == nil || b == nil || cap(body) > maxKeptAnswer {
		return
	}
	*b = body[:0]
	bs.pool.Put(b)
}

// KeyAuth authorizes calls with an API key credential.
func KeyAuth(k models.Key) func(*http.Request, []byte) error {
	return func(r *http.Request, _ []byte) error {
		k.Authorize(r.Header)
		return nil
	}
}

// Post is the Call that sends body(b) for each batch b to ep and reads the
// answer (its body and headers) with parse. An answer other than 2xx is the
// provider's error (see providers.Do); one parse cannot read is Malformed.
// The vectors parse returns may point into the answer's buffer, which Run
// hands back to ep.Buffers once they are encoded.
func Post[B any](ep Endpoint, body func(Batch) B, parse func(body []byte, h http.Header) (Result, error)) Call {
	return func(ctx context.Context, b Batch) (Result, error) {
		buf := ep.Buffers.get()
		var into []byte
		if buf != nil {
			into = *buf
		}
		resp, err := providers.Post(ctx, ep.Client, ep.Provider, ep.URL, body(b), ep.Authorize, into)
		if err != nil {
			ep.Buffers.put(buf, into)
			return Result{}, err
		}
		res, err := parse(resp.Body, resp.Header)
		if err != nil {
			bad := Malformed(ep.Provider, "%v", err) // formatted before the buffer goes back
			ep.Buffers.put(buf, resp.Body)
			return Result{}, bad
		}
		res.answer = answerBuffer{buffers: ep.Buffers, buf: buf, body: resp.Body}
		return res, nil
	}
}

// answerBuffer is the buffer a Result's vectors point into, to hand back.
type answerBuffer struct {
	buffers *Buffers
	buf     *[]byte
	body    []byte
}

func (a answerBuffer) release() { a.buffers.put(a.buf, a.body) }

// The providers' answers are read with jsonscan, not encoding/json: they are
// mostly long arrays of numbers, which encoding/json scans about 25× slower
// (BenchmarkVectorsScan against BenchmarkVectorsEncodingJSON: 100 vectors
// of 768 floats, 0.7 ms against 18 ms a call), and the vectors are kept as
// the raw text the answer assembly reads once more anyway. FuzzVectors
// holds Pick and Vectors to encoding/json.

// Pick returns the values of obj's members names, in that order: nil for a
// member absent or null (every one when obj is nil); the last copy of a
// repeated one. Names match exactly. obj must be a well-formed object.
func Pick(obj []byte, names ...string) ([][]byte, error) {
	out := make([][]byte, len(names))
	if obj == nil {
		return out, nil
	}
	err := jsonscan.Members(obj, func(key, v []byte) error {
		for i, n := range names {
			if string(key) == n {
				out[i] = v
				if jsonscan.Null(v) {
					out[i] = nil
				}
			}
		}
		return nil
	})
	return out, err
}

// Path returns the value at the nested members names of doc: nil when doc
// or one of them is absent or null.
func Path(doc []byte, names ...string) ([]byte, error) {
	for i, n := range names {
		if doc == nil {
			return nil, nil
		}
		v, err := Pick(doc, n)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", pathName(names[:i]), err)
		}
		doc = v[0]
	}
	return doc, nil
}

func pathName(names []string) string {
	if len(names) == 0 {
		return "answer"
	}
	s := names[0]
	for _, n := range names[1:] {
		s += "." + n
	}
	return s
}

// Vectors reads a list of embeddings, one raw vector an element: the
// element itself when path is empty, else the value at path within it
// (what names the elements in errors: "embedding 2 has no values").
func Vectors(list []byte, what string, path ...string) ([]json.RawMessage, error) {
	if list == nil {
		return nil, errors.New("no list of embeddings")
	}
	var vecs []json.RawMessage
	err := jsonscan.Elements(list, func(e []byte) error {
		v := e
		if len(path) > 0 {
			var err error
			if v, err = Path(e, path...); err != nil {
				return fmt.Errorf("%s %d: %w", what, len(vecs), err)
			}
		}
		if jsonscan.Null(v) && len(path) > 0 {
			return fmt.Errorf("%s %d has no %s", what, len(vecs), pathName(path))
		}
		if jsonscan.Null(v) {
			return fmt.Errorf("%s %d is null", what, len(vecs))
		}
		vecs = append(vecs, v)
		return nil
	})
	return vecs, err
}

// Count reads the token count at path within doc (see jsonscan.Count):
// false when it is absent or not a count.
func Count(doc []byte, path ...string) (int64, bool) {
	v, err := Path(doc, path...)
	if err != nil || v == nil {
		return 0, false
	}
	return jsonscan.Count(v)
}

// Sum adds the token counts at path within each element of list: known
// only when every element has one.
func Sum(list []byte, path ...string) (int64, bool) {
	var sum int64
	known := true
	err := jsonscan.Elements(list, func(e []byte) error {
		n, ok := Count(e, path...)
		sum += n
		known = known && ok
		return nil
	})
	if err != nil || !known {
		return 0, false
	}
	return sum, true
}
