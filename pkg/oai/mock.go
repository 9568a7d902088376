package oai

import (
	"encoding/base64"
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"strconv"

	"github.com/sluice-gateway/sluice/pkg/api"
	"github.com/sluice-gateway/sluice/pkg/jsonscan"
)

// MaxMockDimensions bounds a mock embedding's length: a request's own
// mock_response vector, and the dimensions a mock derives vectors of. It is
// above every hosted embedding model's (OpenAI's largest is 3072), and keeps
// one request's mock answer (up to MaxEmbeddingInputs of them) bounded.
const MaxMockDimensions = 4096

// Mock is LiteLLM's mock_response on an embeddings request: a text (the
// vectors are derived from each input) or a vector (every input gets it).
type Mock struct {
	Text string
	// Vector is the embedding vector; nil for a text.
	Vector []float32
}

const mockForms = "'mock_response' must be a string or a non-empty array of numbers (an embedding vector)."

// parseMock reads an embeddings request's mock_response: a string or an
// array of at most MaxMockDimensions numbers that float32 can hold.
func parseMock(v []byte) (*Mock, error) {
	switch v[0] {
	case '"':
		s, err := jsonscan.String(v)
		if err != nil {
			return nil, api.InvalidValue("mock_response", "Invalid string for 'mock_response'.")
		}
		return &Mock{Text: s}, nil
	case '[':
	default:
		return nil, api.InvalidValue("mock_response", mockForms)
	}
	vec := []float32{}
	err := jsonscan.Elements(v, func(el []byte) error {
		if len(vec) == MaxMockDimensions {
			return api.InvalidValue("mock_response", "'mock_response' has more than %d numbers.", MaxMockDimensions)
		}
		f, err := strconv.ParseFloat(string(el), 64)
		if err != nil || math.Abs(f) > math.MaxFloat32 {
			return api.InvalidValue("mock_response", "'mock_response[%d]' is %s, not a number an embedding (float32) can hold.", len(vec), truncate(string(el), 40))
		}
		vec = append(vec, float32(f))
		return nil
	})
	var ae *api.Error
	switch {
	case errors.As(err, &ae):
		return nil, err
	case err != nil:
		// The body was validated as JSON; only a request not parsed by
		// ParseEmbeddingRequest lands here.
		return nil, api.InvalidValue("mock_response", mockForms)
	}
	if len(vec) == 0 {
		return nil, api.InvalidValue("mock_response", mockForms)
	}
	return &Mock{Vector: vec}, nil
}

// AppendEmbedding appends v to out in encoding: a JSON array of numbers
// (EncodingFloat) or the base64 of its little-endian float32s
// (EncodingBase64), as OpenAI answers. NaN and infinities, which JSON cannot
// carry, are an error.
func AppendEmbedding(out []byte, v []float32, encoding string) ([]byte, error) {
	if encoding == EncodingBase64 {
		raw := make([]byte, 4*len(v))
		for i, f := range v {
			binary.LittleEndian.PutUint32(raw[4*i:], math.Float32bits(f))
		}
		out = append(out, '"')
		out = base64.StdEncoding.AppendEncode(out, raw)
		return append(out, '"'), nil
	}
	out = append(out, '[')
	for i, f := range v {
		if math.IsNaN(float64(f)) || math.IsInf(float64(f), 0) {
			return nil, fmt.Errorf("embedding holds %v, which JSON cannot carry", f)
		}
		if i > 0 {
			out = append(out, ',')
		}
		out = strconv.AppendFloat(out, float64(f), 'g', -1, 32)
	}
	return append(out, ']'), nil
}
