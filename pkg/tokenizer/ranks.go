package tokenizer

import (
	"bytes"
	"compress/gzip"
	_ "embed"
	"encoding/binary"
	"fmt"
	"hash/maphash"
	"io"
	"strings"
)

// o200kRanks is o200k_base's ranks in the compact form internal/gen
// writes. A string: read-only data, whose pages a process that never
// counts never touches.
//
//go:embed o200k_base.ranks.gz
var o200kRanks string

// o200kTokens is how many mergeable tokens o200k_base has.
const o200kTokens = 199998

// ranks maps tokens to ranks and back in about 4.5 MB: the tokens' bytes
// in rank order, their offsets, and an open-addressing table of ranks
// keyed by the tokens' hashes.
type ranks struct {
	data  []byte   // the tokens, in rank order
	off   []uint32 // token r is data[off[r]:off[r+1]]
	slots []uint32 // rank+1 at a token's hash (linear probing), 0 empty
	mask  uint64
	seed  maphash.Seed
	bytes [256]uint32 // the rank of each byte alone: every byte is a token
}

// loadRanks reads the compact form of an encoding of n tokens.
func loadRanks(compressed string, n int) (*ranks, error) {
	zr, err := gzip.NewReader(strings.NewReader(compressed))
	if err != nil {
		return nil, fmt.Errorf("tokenizer: open the ranks: %w", err)
	}
	// Read in three steps so that each buffer is allocated once, at its
	// size: the count, the lengths, the tokens.
	head := make([]byte, 4+n)
	if _, err := io.ReadFull(zr, head); err != nil {
		return nil, fmt.Errorf("tokenizer: read the ranks' lengths: %w", err)
	}
	if got := binary.BigEndian.Uint32(head); got != uint32(n) {
		return nil, fmt.Errorf("tokenizer: the ranks are %d tokens, want %d", got, n)
	}
	r := &ranks{off: make([]uint32, n+1), seed: maphash.MakeSeed()}
	for i, l := range head[4:] {
		r.off[i+1] = r.off[i] + uint32(l)
	}
	r.data = make([]byte, r.off[n])
	if _, err := io.ReadFull(zr, r.data); err != nil {
		return nil, fmt.Errorf("tokenizer: read the ranks' tokens: %w", err)
	}
	// Past the tokens, the stream must end (and its checksum match).
	if m, err := io.Copy(io.Discard, io.LimitReader(zr, 1)); m != 0 || err != nil {
		return nil, fmt.Errorf("tokenizer: the ranks do not end after their tokens (%v)", err)
	}
	size := 1
	for size < 2*n { // at most half full: short probes
		size <<= 1
	}
	r.slots, r.mask = make([]uint32, size), uint64(size-1)
	for rank := range n {
		tok := r.token(rank)
		i := maphash.Bytes(r.seed, tok) & r.mask
		for ; r.slots[i] != 0; i = (i + 1) & r.mask {
			if bytes.Equal(r.token(int(r.slots[i]-1)), tok) {
				return nil, fmt.Errorf("tokenizer: token %q has two ranks", tok)
			}
		}
		r.slots[i] = uint32(rank + 1)
	}
	for b := range 256 {
		rk, ok := r.rank(string([]byte{byte(b)}))
		if !ok {
			return nil, fmt.Errorf("tokenizer: byte %#x is not a token", b)
		}
		r.bytes[b] = rk
	}
	return r, nil
}

func (r *ranks) len() int { return len(r.off) - 1 }

// token is the bytes of rank.
func (r *ranks) token(rank int) []byte { return r.data[r.off[rank]:r.off[rank+1]] }

// rank returns tok's rank; ok is false when tok is not a token.
func (r *ranks) rank(tok string) (rank uint32, ok bool) {
	for i := maphash.String(r.seed, tok) & r.mask; r.slots[i] != 0; i = (i + 1) & r.mask {
		if rk := r.slots[i] - 1; string(r.token(int(rk))) == tok {
			return rk, true
		}
	}
	return 0, false
}
