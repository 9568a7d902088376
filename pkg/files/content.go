package files

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"

	"github.com/sluice-gateway/sluice/pkg/store"
)

// copyBufferSize is the buffer a download streams through.
const copyBufferSize = 64 << 10

// Open reads length bytes of f from offset (length < 0: to the end),
// streaming across its parts in order, opening each object only when the
// read reaches it. The first object is opened before Open returns. A part
// that yields fewer bytes than the manifest records is an error, never a
// silently short read.
func (s *Service) Open(ctx context.Context, f Stored, offset, length int64) (io.ReadCloser, error) {
	if offset < 0 || offset > f.Bytes {
		return nil, fmt.Errorf("files: open %s: offset %d outside 0..%d", f.ID, offset, f.Bytes)
	}
	if length < 0 || offset+length > f.Bytes {
		length = f.Bytes - offset
	}
	var segs []segment
	pos := int64(0)
	for _, p := range f.Parts {
		lo, hi := max(offset, pos), min(offset+length, pos+p.Size)
		if lo < hi {
			segs = append(segs, segment{key: p.Key, off: lo - pos, n: hi - lo})
		}
		pos += p.Size
	}
	if len(segs) == 0 {
		return io.NopCloser(strings.NewReader("")), nil
	}
	m := &manifestReader{ctx: ctx, blobs: s.blobs, file: f.ID, segs: segs}
	if err := m.next(); err != nil {
		return nil, err
	}
	return m, nil
}

// segment is the byte range of one object that a read covers.
type segment struct {
	key    string
	off, n int64
}

type manifestReader struct {
	ctx   context.Context
	blobs store.Blobs
	file  string
	segs  []segment
	cur   io.ReadCloser
	left  int64 // bytes the current segment still owes
}

// next closes the current object and opens the next segment's.
func (m *manifestReader) next() error {
	if m.cur != nil {
		m.cur.Close()
		m.cur = nil
	}
	if len(m.segs) == 0 {
		return io.EOF
	}
	sg := m.segs[0]
	m.segs = m.segs[1:]
	rc, err := m.blobs.Get(m.ctx, sg.key, sg.off, sg.n)
	if err != nil {
		if errors.Is(err, store.ErrNotFound) {
			return fmt.Errorf("files: %s: part %s is missing from the blob store: %w", m.file, sg.key, err)
		}
		return fmt.Errorf("files: %s: open part %s: %w", m.file, sg.key, err)
	}
	m.cur, m.left = rc, sg.n
	return nil
}

func (m *manifestReader) Read(p []byte) (int, error) {
	for {
		if m.cur == nil {
			return 0, io.EOF
		}
		if m.left > 0 {
			n, err := m.cur.Read(p[:min(int64(len(p)), m.left)])
			m.left -= int64(n)
			if err == io.EOF && m.left > 0 {
				return n, fmt.Errorf("files: %s: a part ended %d bytes early: %w", m.file, m.left, io.ErrUnexpectedEOF)
			}
			if err != nil && err != io.EOF {
				return n, fmt.Errorf("files: %s: read part: %w", m.file, err)
			}
			if n > 0 || len(p) == 0 {
				return n, nil
			}
			continue
		}
		if err := m.next(); err != nil {
			if err == io.EOF {
				m.cur = nil
			}
			return 0, err
		}
	}
}

func (m *manifestReader) Close() error {
	if m.cur != nil {
		err := m.cur.Close()
		m.cur = nil
		return err
	}
	return nil
}
