package main

import (
	"encoding/base64"
	"encoding/binary"
	"math"
	"math/rand/v2"
	"strconv"
	"sync"
)

// maxCachedDims bounds how many distinct embedding sizes are kept.
const maxCachedDims = 16

// vector is one precomputed unit-length embedding in its wire forms.
type vector struct {
	floatJSON  []byte // [0.0123,-0.0456,...]
	base64JSON []byte // "base64 of little-endian float32"
}

// vectorCache holds one vector per dimension count.
type vectorCache struct {
	mu   sync.Mutex
	byN  map[int]*vector
	seed uint64
}

func newVectorCache() *vectorCache { return &vectorCache{byN: map[int]*vector{}, seed: 42} }

// get returns the vector of n dimensions, computing it on first use.
func (c *vectorCache) get(n int) *vector {
	c.mu.Lock()
	defer c.mu.Unlock()
	if v, ok := c.byN[n]; ok {
		return v
	}
	v := makeVector(n, c.seed)
	if len(c.byN) < maxCachedDims {
		c.byN[n] = v
	}
	return v
}

// makeVector builds a deterministic pseudo-random unit vector.
func makeVector(n int, seed uint64) *vector {
	rng := rand.New(rand.NewPCG(seed, uint64(n)))
	vals := make([]float32, n)
	var norm float64
	for i := range vals {
		x := rng.NormFloat64()
		vals[i] = float32(x)
		norm += x * x
	}
	norm = math.Sqrt(norm)
	raw := make([]byte, 4*n)
	js := make([]byte, 0, 12*n)
	js = append(js, '[')
	for i := range vals {
		vals[i] = float32(float64(vals[i]) / norm)
		binary.LittleEndian.PutUint32(raw[4*i:], math.Float32bits(vals[i]))
		if i > 0 {
			js = append(js, ',')
		}
		js = strconv.AppendFloat(js, float64(vals[i]), 'g', -1, 32)
	}
	js = append(js, ']')
	b64 := make([]byte, 0, base64.StdEncoding.EncodedLen(len(raw))+2)
	b64 = append(b64, '"')
	b64 = base64.StdEncoding.AppendEncode(b64, raw)
	b64 = append(b64, '"')
	return &vector{floatJSON: js, base64JSON: b64}
}
