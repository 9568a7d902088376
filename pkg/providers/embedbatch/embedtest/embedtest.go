// Package embedtest holds what the embeddings providers' tests share: the
// preamble (a resolver without secrets, opening a deployment, a fake
// upstream's count of calls in flight), deterministic vectors for fake
// upstreams in the providers' float text, and calling an Embedder and
// reading its OpenAI-shaped answer back.
package embedtest

import (
	"context"
	"encoding/base64"
	"encoding/binary"
	"encoding/json"
	"io"
	"math"
	"strconv"
	"sync/atomic"
	"testing"

	"github.com/sluice-gateway/sluice/pkg/config"
	"github.com/sluice-gateway/sluice/pkg/models"
	"github.com/sluice-gateway/sluice/pkg/oai"
)

// NoSecrets is a models.Resolver for configs without secretsmanager/
// references and no environment: every value resolves to itself.
var NoSecrets = models.Resolver{}

// Env is a models.Resolver without secrets over the environment env.
func Env(env map[string]string) models.Resolver {
	return models.Resolver{Getenv: func(k string) string { return env[k] }}
}

// Open opens d on p (values resolving as themselves) and returns its
// Embedder, failing the test if it cannot.
func Open(t testing.TB, p models.Provider, d config.Deployment) models.Embedder {
	t.Helper()
	ep, err := p.Open(context.Background(), d, NoSecrets)
	if err != nil {
		t.Fatal(err)
	}
	e, ok := ep.(models.Embedder)
	if !ok {
		t.Fatalf("%s's endpoint does not serve embeddings", d.ModelName)
	}
	return e
}

// InFlight counts the calls a fake upstream is serving, and the most it
// served at once (to test concurrency bounds).
type InFlight struct{ now, peak atomic.Int32 }

// Enter counts a call in; the returned function counts it out.
func (c *InFlight) Enter() (leave func()) {
	n := c.now.Add(1)
	for p := c.peak.Load(); n > p && !c.peak.CompareAndSwap(p, n); p = c.peak.Load() {
	}
	return func() { c.now.Add(-1) }
}

// Peak is the most calls served at once since the last Reset.
func (c *InFlight) Peak() int { return int(c.peak.Load()) }

// Reset forgets the peak.
func (c *InFlight) Reset() { c.peak.Store(0) }

// AppendFloats appends v as a JSON array of numbers, as providers write
// their vectors.
func AppendFloats(b []byte, v []float32) []byte {
	b = append(b, '[')
	for i, f := range v {
		if i > 0 {
			b = append(b, ',')
		}
		b = strconv.AppendFloat(b, float64(f), 'g', -1, 32)
	}
	return append(b, ']')
}

// Vector is a deterministic vector for text, so a test can tell which input
// an answer's vector came from.
func Vector(text string, dims int) []float32 {
	var seed int
	for _, c := range text {
		seed = seed*31 + int(c)
	}
	v := make([]float32, dims)
	for j := range v {
		v[j] = float32(math.Sin(float64(seed%10007*1000+j))) / 3
	}
	return v
}

// Answer is an OpenAI embeddings answer; Embedding is a float array or a
// base64 string (see Decode).
type Answer struct {
	Object string `json:"object"`
	Data   []struct {
		Object    string          `json:"object"`
		Index     int             `json:"index"`
		Embedding json.RawMessage `json:"embedding"`
	} `json:"data"`
	Model string `json:"model"`
	Usage struct {
		PromptTokens int64 `json:"prompt_tokens"`
		TotalTokens  int64 `json:"total_tokens"`
	} `json:"usage"`
}

// Embed parses body as an OpenAI embeddings request, runs it through e and
// decodes the answer, checking that its ContentLength (when set) is exact.
// A failed call returns its error.
func Embed(t testing.TB, e models.Embedder, body string) (Answer, *models.Answer, error) {
	t.Helper()
	req, err := oai.ParseEmbeddingRequest([]byte(body))
	if err != nil {
		t.Fatal(err)
	}
	ans, err := e.Embed(context.Background(), req)
	if err != nil {
		return Answer{}, nil, err
	}
	b, err := io.ReadAll(ans.Body)
	ans.Body.Close()
	if err != nil {
		t.Fatal(err)
	}
	var a Answer
	if err := json.Unmarshal(b, &a); err != nil {
		t.Fatalf("answer is not JSON: %.200s", b)
	}
	if ans.ContentLength >= 0 && ans.ContentLength != int64(len(b)) {
		t.Errorf("ContentLength %d for %d bytes", ans.ContentLength, len(b))
	}
	return a, ans, nil
}

// Decode reads an answer's embedding: a JSON float array, or OpenAI's base64
// of little-endian float32s.
func Decode(t testing.TB, raw json.RawMessage) []float32 {
	t.Helper()
	if len(raw) > 0 && raw[0] == '"' {
		var s string
		json.Unmarshal(raw, &s)
		b, err := base64.StdEncoding.DecodeString(s)
		if err != nil || len(b)%4 != 0 {
			t.Fatalf("bad base64 embedding %.40s: %v", raw, err)
		}
		v := make([]float32, len(b)/4)
		for i := range v {
			v[i] = math.Float32frombits(binary.LittleEndian.Uint32(b[4*i:]))
		}
		return v
	}
	var v []float32
	if err := json.Unmarshal(raw, &v); err != nil {
		t.Fatalf("embedding is neither a float array nor base64: %.40s", raw)
	}
	return v
}

// Base64 is Decode for an embedding that must be base64 (the client asked
// for encoding_format base64): a float array fails the test.
func Base64(t testing.TB, raw json.RawMessage) []float32 {
	t.Helper()
	if len(raw) == 0 || raw[0] != '"' {
		t.Fatalf("embedding is not base64: %.40s", raw)
	}
	return Decode(t, raw)
}
