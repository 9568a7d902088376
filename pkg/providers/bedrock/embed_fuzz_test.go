package bedrock

import (
	"encoding/json"
	"testing"

	"github.com/sluice-gateway/sluice/pkg/oai"
	"github.com/sluice-gateway/sluice/pkg/providers/embedbatch"
)

// encodes checks that a parsed vector either encodes or is refused, never
// panics, in both encodings.
func encodes(t *testing.T, vec json.RawMessage) {
	for _, enc := range []string{oai.EncodingFloat, oai.EncodingBase64} {
		out, n, err := embedbatch.AppendVector(nil, vec, enc)
		if err == nil && (n == 0 || !json.Valid(out)) {
			t.Fatalf("%s: %q encoded as %q (%d values)", enc, vec, out, n)
		}
	}
}

// FuzzParseTitan feeds Titan answers (Bedrock's bytes, untrusted) to the
// parser and the encoder behind it.
func FuzzParseTitan(f *testing.F) {
	for _, s := range []string{
		`{"embedding":[0.1,-0.2],"inputTextTokenCount":3,"embeddingsByType":{"float":[0.1,-0.2]}}`,
		`{"embeddingsByType":{"float":[1,2]}}`,
		`{"embedding":null,"inputTextTokenCount":-1}`,
		`{"embedding":"x"}`, `[]`, `{}`, `{"inputTextTokenCount":1e30}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		vec, tokens, known, err := parseTitan(body)
		if err != nil {
			return
		}
		if len(vec) == 0 || (known && tokens < 0) || (!known && tokens != 0) {
			t.Fatalf("%q: vector %q tokens %d known %v", body, vec, tokens, known)
		}
		encodes(t, vec)
	})
}

// FuzzParseCohere feeds Cohere-on-Bedrock answers to the parser.
func FuzzParseCohere(f *testing.F) {
	for _, s := range []string{
		`{"id":"a","embeddings":[[0.1,0.2],[0.3,0.4]],"response_type":"embeddings_floats","texts":["a","b"]}`,
		`{"id":"a","embeddings":{"float":[[1],[2]],"int8":[[1],[2]]},"response_type":"embeddings_by_type"}`,
		`{"embeddings":{}}`, `{"embeddings":7}`, `{"embeddings":[1,2]}`, `null`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		vecs, err := parseCohere(body)
		if err != nil {
			return
		}
		for _, v := range vecs {
			encodes(t, v)
		}
	})
}
