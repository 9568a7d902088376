package models

import (
	"context"
	"encoding/binary"
	"encoding/json"
	"hash/fnv"
	"io"
	"math"
	"strconv"

	"github.com/sluice-gateway/sluice/pkg/api"
	"github.com/sluice-gateway/sluice/pkg/jsonscan"
	"github.com/sluice-gateway/sluice/pkg/oai"
)

// mockDimensions is the length of a derived mock vector when the request
// names no dimensions: LiteLLM's mock embedding's, and OpenAI's
// text-embedding-3-small's.
const mockDimensions = 1536

// Embed answers an embeddings call with one mock vector per input, in
// input order: the mock's vector for every input (LiteLLM's mock_embedding,
// which answers only one), or, for a text mock, a vector derived from each
// input — the same input always gets the same unit-length vector, different
// inputs different ones, so code that compares embeddings can be tested
// without a provider. dimensions shortens a given vector as OpenAI shortens
// its own (the first ones, scaled back to unit length) and sets a derived
// vector's length. Usage is estimated as the chat mock's is.
func (m mockEndpoint) Embed(_ context.Context, req *oai.EmbeddingRequest) (*Answer, error) {
	var fixed []float32
	switch {
	case req.MockResponse != nil:
		fixed = req.MockResponse.Vector
	case m.mock != nil:
		fixed = m.mock.Vector
	}
	dims := mockDimensions
	switch {
	case fixed != nil && req.Dimensions > len(fixed):
		return nil, api.InvalidValue("dimensions", "Model '%s' answers mock vectors of %d dimensions; 'dimensions' must be at most %d.", req.Model, len(fixed), len(fixed))
	case fixed != nil && req.Dimensions > 0:
		fixed = unit(append([]float32(nil), fixed[:req.Dimensions]...))
	case req.Dimensions > oai.MaxMockDimensions:
		return nil, api.InvalidValue("dimensions", "'dimensions' must be at most %d for a mock model, not %d.", oai.MaxMockDimensions, req.Dimensions)
	case req.Dimensions > 0:
		dims = req.Dimensions
	}
	seeds, tokens, err := mockInputs(req)
	if err != nil {
		return nil, err
	}
	encoding := req.Encoding()
	vec := fixed
	if vec == nil {
		vec = make([]float32, dims)
	}
	i := -1 // the inputs, then the end
	body := oai.NewChunkStream(func(dst []byte) ([]byte, error) {
		i++
		if i == len(seeds) {
			dst = append(dst, `],"model":`...)
			model, _ := json.Marshal(m.model) // a string always encodes
			dst = append(dst, model...)
			dst = append(dst, `,"usage":{"prompt_tokens":`...)
			dst = strconv.AppendInt(dst, tokens, 10)
			dst = append(dst, `,"total_tokens":`...)
			dst = strconv.AppendInt(dst, tokens, 10)
			return append(dst, "}}"...), io.EOF
		}
		if i == 0 {
			dst = append(dst, `{"object":"list","data":[`...)
		} else {
			dst = append(dst, ',')
		}
		if fixed == nil {
			derive(vec, seeds[i])
		}
		dst = append(dst, `{"object":"embedding","index":`...)
		dst = strconv.AppendInt(dst, int64(i), 10)
		dst = append(dst, `,"embedding":`...)
		dst, err := oai.AppendEmbedding(dst, vec, encoding)
		if err != nil {
			return nil, err
		}
		return append(dst, '}'), nil
	}, nil)
	return &Answer{Body: body, ContentLength: -1, Encoding: encoding, UsageEstimated: true}, nil
}

// mockInputs reads the request's inputs: a seed for each (the FNV-1a hash
// of its text, or of its token ids) and their estimated tokens (a text's as
// oai.EstimateTokens; token ids count themselves).
func mockInputs(req *oai.EmbeddingRequest) (seeds []uint64, tokens int64, err error) {
	seeds = make([]uint64, 0, req.InputCount)
	text := func(v []byte) error {
		s, err := jsonscan.String(v)
		if err != nil {
			return api.InvalidValue("input", "'input[%d]' is not a valid string.", len(seeds))
		}
		h := fnv.New64a()
		h.Write([]byte(s))
		seeds = append(seeds, h.Sum64())
		tokens += oai.EstimateTokens(s)
		return nil
	}
	ids := func(v []byte) error {
		h := fnv.New64a()
		var b [8]byte
		err := jsonscan.Elements(v, func(el []byte) error {
			id, err := strconv.ParseUint(string(el), 10, 64)
			if err != nil {
				return api.InvalidValue("input", "'input' holds %s, which is not a token id.", el)
			}
			binary.LittleEndian.PutUint64(b[:], id)
			h.Write(b[:])
			tokens++
			return nil
		})
		seeds = append(seeds, h.Sum64())
		return err
	}
	switch req.InputKind {
	case oai.InputString:
		err = text(req.Input)
	case oai.InputStrings:
		err = jsonscan.Elements(req.Input, text)
	case oai.InputTokens:
		err = ids(req.Input)
	case oai.InputTokenArrays:
		err = jsonscan.Elements(req.Input, ids)
	}
	return seeds, tokens, err
}

// derive fills v with the unit-length vector of seed: splitmix64's
// sequence from seed, each number mapped to [-1, 1). It is defined here,
// not by a library generator, so the same input gets the same vector in
// every version of Go.
func derive(v []float32, seed uint64) {
	var sum float64
	for i := range v {
		seed += 0x9e3779b97f4a7c15
		z := seed
		z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9
		z = (z ^ (z >> 27)) * 0x94d049bb133111eb
		z ^= z >> 31
		f := float64(z>>11)*0x1p-52 - 1
		v[i] = float32(f)
		sum += f * f
	}
	scale(v, sum)
}

// unit scales v to unit length (a zero vector stays zero) and returns it.
func unit(v []float32) []float32 {
	var sum float64
	for _, f := range v {
		sum += float64(f) * float64(f)
	}
	scale(v, sum)
	return v
}

func scale(v []float32, sumSquares float64) {
	if sumSquares == 0 {
		return
	}
	k := 1 / math.Sqrt(sumSquares)
	for i, f := range v {
		v[i] = float32(float64(f) * k)
	}
}
