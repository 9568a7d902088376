package batches

import "math/bits"

// bitmap marks lines of a chunk by their index in it (0-based). It travels
// in chunk records as base64 (encoding/json's form of []byte): 125 bytes
// for a chunk of 1,000 lines.
type bitmap []byte

func newBitmap(n int) bitmap { return make(bitmap, (n+7)/8) }

func (b bitmap) set(i int) { b[i/8] |= 1 << (i % 8) }

func (b bitmap) has(i int) bool { return i/8 < len(b) && b[i/8]&(1<<(i%8)) != 0 }

// or adds o's marks to b.
func (b bitmap) or(o bitmap) {
	for i := range min(len(b), len(o)) {
		b[i] |= o[i]
	}
}

func (b bitmap) count() int {
	n := 0
	for _, x := range b {
		n += bits.OnesCount8(x)
	}
	return n
}
