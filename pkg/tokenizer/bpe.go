package tokenizer

// merger runs byte-pair merges over one piece at a time, reusing its
// buffers. It merges as tiktoken does — the adjacent pair of lowest rank,
// the leftmost of equals, until no pair is a token — with a heap, so a long
// piece (a run of punctuation or spaces) costs n log n, not n².
type merger struct {
	next []int32  // the part starting at byte i ends at next[i]; -1: i starts no part
	prev []int32  // the part before the one starting at i
	tok  []uint32 // the rank of the part starting at i
	heap []pair
}

// pair is two adjacent parts, left starting at byte left, right at byte
// right and ending at end, whose concatenation is the token rank. It is
// stale once either part has changed.
type pair struct {
	rank             uint32
	left, right, end int32
}

func (p pair) less(q pair) bool { return p.rank < q.rank || p.rank == q.rank && p.left < q.left }

// maxPiece bounds the bytes merged at once: a longer piece (a run of one
// kind of character that long: punctuation, spaces, letters without a
// break) is merged maxPiece bytes at a time, so its buffers (12 bytes a
// byte, 16 a candidate pair) stay within a few MB whatever the text. Its count may then differ from
// tiktoken's by about a token a chunk; no prose or code has such pieces.
const maxPiece = 64 << 10

// count returns the number of tokens piece encodes to.
func (m *merger) count(r *ranks, piece string) int {
	n := 0
	for len(piece) > maxPiece {
		n += m.countChunk(r, piece[:maxPiece])
		piece = piece[maxPiece:]
	}
	return n + m.countChunk(r, piece)
}

func (m *merger) countChunk(r *ranks, piece string) int {
	if len(piece) <= 1 {
		return len(piece)
	}
	if _, ok := r.rank(piece); ok {
		return 1
	}
	return m.merge(r, piece)
}

// encode appends piece's tokens to out.
func (m *merger) encode(r *ranks, piece string, out []int) []int {
	for len(piece) > maxPiece {
		out = m.encodeChunk(r, piece[:maxPiece], out)
		piece = piece[maxPiece:]
	}
	return m.encodeChunk(r, piece, out)
}

func (m *merger) encodeChunk(r *ranks, piece string, out []int) []int {
	if rk, ok := r.rank(piece); ok {
		return append(out, int(rk))
	}
	m.merge(r, piece)
	for i := int32(0); int(i) < len(piece); i = m.next[i] {
		out = append(out, int(m.tok[i]))
	}
	return out
}

// merge merges piece's bytes into tokens and returns how many there are;
// m.next links the parts from byte 0, m.tok holds their ranks.
func (m *merger) merge(r *ranks, piece string) int {
	n := int32(len(piece))
	m.next, m.prev, m.tok, m.heap = m.next[:0], m.prev[:0], m.tok[:0], m.heap[:0]
	for i := range n {
		m.next = append(m.next, i+1)
		m.prev = append(m.prev, i-1)
		m.tok = append(m.tok, r.bytes[piece[i]])
	}
	for i := int32(0); i+1 < n; i++ {
		if rk, ok := r.rank(piece[i : i+2]); ok {
			m.heap = append(m.heap, pair{rk, i, i + 1, i + 2})
		}
	}
	for i := len(m.heap)/2 - 1; i >= 0; i-- {
		m.down(i)
	}
	parts := int(n)
	for len(m.heap) > 0 {
		p := m.pop()
		if m.next[p.left] != p.right || m.next[p.right] != p.end {
			continue // stale
		}
		m.next[p.left], m.next[p.right] = p.end, -1
		parts--
		m.tok[p.left] = p.rank
		if p.end < n {
			m.prev[p.end] = p.left
			e := m.next[p.end]
			if rk, ok := r.rank(piece[p.left:e]); ok {
				m.push(pair{rk, p.left, p.end, e})
			}
		}
		if pv := m.prev[p.left]; pv >= 0 {
			if rk, ok := r.rank(piece[pv:p.end]); ok {
				m.push(pair{rk, pv, p.left, p.end})
			}
		}
	}
	return parts
}

func (m *merger) push(p pair) {
	m.heap = append(m.heap, p)
	for i := len(m.heap) - 1; i > 0; {
		up := (i - 1) / 2
		if !m.heap[i].less(m.heap[up]) {
			break
		}
		m.heap[i], m.heap[up] = m.heap[up], m.heap[i]
		i = up
	}
}

func (m *merger) pop() pair {
	top := m.heap[0]
	last := len(m.heap) - 1
	m.heap[0] = m.heap[last]
	m.heap = m.heap[:last]
	m.down(0)
	return top
}

func (m *merger) down(i int) {
	for {
		c := 2*i + 1
		if c >= len(m.heap) {
			return
		}
		if c+1 < len(m.heap) && m.heap[c+1].less(m.heap[c]) {
			c++
		}
		if !m.heap[c].less(m.heap[i]) {
			return
		}
		m.heap[i], m.heap[c] = m.heap[c], m.heap[i]
		i = c
	}
}
