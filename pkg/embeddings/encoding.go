package embeddings

import (
	"encoding/base64"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"slices"
	"strconv"

	"github.com/sluice-gateway/sluice/pkg/oai"
)

// maxConvertBody bounds an answer that must be decoded to change its
// encoding: 2048 inputs × 3072 dimensions as float text is about 140 MB, so
// this leaves room while keeping a runaway answer from exhausting memory.
const maxConvertBody = 256 << 20

// convert re-encodes an OpenAI embeddings response whose vectors are in one
// encoding into the other (float ↔ base64 of little-endian float32), in
// input order. It is the slow path, used only when a provider cannot answer
// in the encoding the client asked for: the vectors must be decoded.
func convert(src io.Reader, to string) ([]byte, error) {
	var resp struct {
		Data  []datum         `json:"data"`
		Model string          `json:"model"`
		Usage json.RawMessage `json:"usage"`
	}
	dec := json.NewDecoder(io.LimitReader(src, maxConvertBody))
	if err := dec.Decode(&resp); err != nil {
		return nil, fmt.Errorf("decode embeddings answer: %w", err)
	}
	slices.SortStableFunc(resp.Data, func(a, b datum) int { return a.Index - b.Index })
	out := []byte(`{"object":"list","data":[`)
	for i, d := range resp.Data {
		if i > 0 {
			out = append(out, ',')
		}
		vec, err := decodeVector(d.Embedding)
		if err != nil {
			return nil, fmt.Errorf("data[%d]: %w", i, err)
		}
		out = append(out, `{"object":"embedding","index":`...)
		out = strconv.AppendInt(out, int64(d.Index), 10)
		out = append(out, `,"embedding":`...)
		if out, err = oai.AppendEmbedding(out, vec, to); err != nil {
			return nil, fmt.Errorf("data[%d]: %w", i, err)
		}
		out = append(out, '}')
	}
	out = append(out, `],"model":`...)
	model, _ := json.Marshal(resp.Model)
	out = append(out, model...)
	if len(resp.Usage) > 0 {
		out = append(out, `,"usage":`...)
		out = append(out, resp.Usage...)
	}
	return append(out, '}'), nil
}

// datum is one embedding of a response being converted.
type datum struct {
	Index     int             `json:"index"`
	Embedding json.RawMessage `json:"embedding"`
}

// decodeVector reads an embedding given as a float array or a base64 string.
func decodeVector(raw json.RawMessage) ([]float32, error) {
	if len(raw) > 0 && raw[0] == '"' {
		var s string
		if err := json.Unmarshal(raw, &s); err != nil {
			return nil, err
		}
		b, err := base64.StdEncoding.DecodeString(s)
		if err != nil {
			return nil, fmt.Errorf("embedding is not valid base64: %w", err)
		}
		if len(b)%4 != 0 {
			return nil, fmt.Errorf("base64 embedding of %d bytes is not float32s", len(b))
		}
		v := make([]float32, len(b)/4)
		for i := range v {
			v[i] = math.Float32frombits(binary.LittleEndian.Uint32(b[4*i:]))
		}
		return v, nil
	}
	var v []float32
	if err := json.Unmarshal(raw, &v); err != nil {
		return nil, fmt.Errorf("embedding is neither a float array nor base64: %w", err)
	}
	return v, nil
}
