package local

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"github.com/sluice-gateway/sluice/pkg/store"
)

// Blobs is store.Blobs on the file system. An object is written to a temporary
// file, synced, then renamed into place, so a reader sees either the old
// object or the whole new one, never a part; bytes stream through io.Copy and
// are never held in memory.
//
// Layout under the root directory:
//
//	objects/<segment>/…/<segment>/@data   the object with key "<segment>/…/<segment>"
//	tmp/                                  writes in progress
//
// Each "/"-separated key segment is escaped (blobKeyPath), and the object
// itself is the file "@data" inside its key's directory, so keys "a" and
// "a/b" can both exist, as on S3. Escaping leaves only [A-Za-z0-9._-] and
// %XX, so no segment can be "@data", climb out with "..", or hide as a
// dotfile.
type Blobs struct {
	objects string
	tmp     string
}

var _ store.Blobs = (*Blobs)(nil)

const (
	objectFile = "@data"
	// maxKeyLen is S3's key limit.
	maxKeyLen = 1024
)

// NewBlobs returns the blob store rooted at dir, creating it if needed.
func NewBlobs(dir string) (*Blobs, error) {
	b := &Blobs{objects: filepath.Join(dir, "objects"), tmp: filepath.Join(dir, "tmp")}
	for _, d := range []string{b.objects, b.tmp} {
		if err := os.MkdirAll(d, 0o700); err != nil {
			return nil, fmt.Errorf("local blobs: %w", err)
		}
	}
	return b, nil
}

// removeTemps deletes every in-progress write and returns how many there
// were. Only the process that holds the data dir's lock may call it (Open
// does, before serving): then no write is in progress, and each temporary
// file is the partial object of a write a crash interrupted.
func (b *Blobs) removeTemps() (int, error) {
	entries, err := os.ReadDir(b.tmp)
	if err != nil {
		return 0, fmt.Errorf("local blobs: remove partial writes: %w", err)
	}
	n := 0
	for _, e := range entries {
		if err := os.RemoveAll(filepath.Join(b.tmp, e.Name())); err != nil {
			return n, fmt.Errorf("local blobs: remove partial write: %w", err)
		}
		n++
	}
	return n, nil
}

// writeBufferSize is how much Put gathers before writing to the file.
const writeBufferSize = 1 << 20

// Put streams r into the object at key and returns the byte count. If r or
// the write fails, or ctx ends, the previous object (if any) is untouched.
func (b *Blobs) Put(ctx context.Context, key string, r io.Reader) (int64, error) {
	dst, err := b.path(key)
	if err != nil {
		return 0, fmt.Errorf("local blobs: put: %w", err)
	}
	f, err := os.CreateTemp(b.tmp, "put-*")
	if err != nil {
		return 0, fmt.Errorf("local blobs: put %s: %w", key, err)
	}
	renamed := false
	defer func() {
		if !renamed {
			f.Close()
			os.Remove(f.Name())
		}
	}()
	// Readers such as a multipart part hand over a few KB at a time: gather
	// them so the file sees one large write instead of thousands of small
	// ones (the difference is most of an upload's CPU).
	// (The struct hides bufio.Writer's ReadFrom, which would hand the copy
	// straight to the file's and bypass the buffer.)
	w := bufio.NewWriterSize(f, writeBufferSize)
	n, err := io.Copy(struct{ io.Writer }{w}, ctxReader{ctx, r})
	if err == nil {
		err = w.Flush()
	}
	if err != nil {
		return 0, fmt.Errorf("local blobs: put %s: after %d bytes: %w", key, n, err)
	}
	if err := f.Sync(); err != nil {
		return 0, fmt.Errorf("local blobs: put %s: %w", key, err)
	}
	if err := f.Close(); err != nil {
		return 0, fmt.Errorf("local blobs: put %s: %w", key, err)
	}
	// A concurrent Delete may prune the directory between MkdirAll and
	// Rename; try again once if so.
	for attempt := 0; ; attempt++ {
		if err = os.MkdirAll(filepath.Dir(dst), 0o700); err == nil {
			err = os.Rename(f.Name(), dst)
		}
		if err == nil || attempt == 1 || !errors.Is(err, fs.ErrNotExist) {
			break
		}
	}
	if err != nil {
		return 0, fmt.Errorf("local blobs: put %s: %w", key, err)
	}
	renamed = true
	syncDir(filepath.Dir(dst))
	return n, nil
}

// Get opens the object at key for reading length bytes from offset (length
// < 0: to the end). A range past the end is cut short, as HTTP ranges are.
func (b *Blobs) Get(ctx context.Context, key string, offset, length int64) (io.ReadCloser, error) {
	p, err := b.path(key)
	if err != nil {
		return nil, fmt.Errorf("local blobs: get: %w", err)
	}
	if offset < 0 {
		return nil, fmt.Errorf("local blobs: get %s: negative offset %d", key, offset)
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	f, err := os.Open(p)
	if err != nil {
		return nil, fmt.Errorf("local blobs: get %s: %w", key, notFound(err))
	}
	if _, err := f.Seek(offset, io.SeekStart); err != nil {
		f.Close()
		return nil, fmt.Errorf("local blobs: get %s: %w", key, err)
	}
	if length < 0 {
		return f, nil
	}
	return struct {
		io.Reader
		io.Closer
	}{io.LimitReader(f, length), f}, nil
}

// Size reports the object's length.
func (b *Blobs) Size(ctx context.Context, key string) (int64, error) {
	p, err := b.path(key)
	if err != nil {
		return 0, fmt.Errorf("local blobs: size: %w", err)
	}
	if err := ctx.Err(); err != nil {
		return 0, err
	}
	fi, err := os.Stat(p)
	if err != nil {
		return 0, fmt.Errorf("local blobs: size %s: %w", key, notFound(err))
	}
	return fi.Size(), nil
}

// Delete removes the object and prunes the directories it leaves empty.
// Deleting a missing object is not an error.
func (b *Blobs) Delete(ctx context.Context, key string) error {
	p, err := b.path(key)
	if err != nil {
		return fmt.Errorf("local blobs: delete: %w", err)
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	if err := os.Remove(p); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("local blobs: delete %s: %w", key, err)
	}
	// Remove fails on a directory that is not empty, which ends the walk.
	for d := filepath.Dir(p); d != b.objects && os.Remove(d) == nil; d = filepath.Dir(d) {
	}
	return nil
}

// path maps a key to its object file inside the objects directory.
func (b *Blobs) path(key string) (string, error) {
	rel, err := blobKeyPath(key)
	if err != nil {
		return "", err
	}
	return filepath.Join(b.objects, rel, objectFile), nil
}

// blobKeyPath turns a key into a relative directory path: each "/"-separated
// segment escaped so that it is one safe file name. Keys must be non-empty,
// at most maxKeyLen bytes, without empty segments.
func blobKeyPath(key string) (string, error) {
	if key == "" || len(key) > maxKeyLen {
		return "", fmt.Errorf("invalid blob key %q: want 1 to %d bytes", key, maxKeyLen)
	}
	segs := strings.Split(key, "/")
	for i, s := range segs {
		if s == "" {
			return "", fmt.Errorf("invalid blob key %q: empty segment", key)
		}
		segs[i] = escapeSegment(s)
		if len(segs[i]) > 255 {
			return "", fmt.Errorf("invalid blob key %q: segment too long once escaped", key)
		}
	}
	return filepath.Join(segs...), nil
}

// escapeSegment percent-escapes every byte outside [A-Za-z0-9._-], and a
// leading dot, so the result is a plain, visible file name on any system.
func escapeSegment(s string) string {
	const hex = "0123456789ABCDEF"
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		c := s[i]
		if 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '-' || c == '_' || (c == '.' && i > 0) {
			b.WriteByte(c)
			continue
		}
		b.WriteByte('%')
		b.WriteByte(hex[c>>4])
		b.WriteByte(hex[c&15])
	}
	return b.String()
}

func notFound(err error) error {
	if errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("%w (%v)", store.ErrNotFound, err)
	}
	return err
}

// ctxReader stops a copy once ctx is done.
type ctxReader struct {
	ctx context.Context
	r   io.Reader
}

func (c ctxReader) Read(p []byte) (int, error) {
	if err := c.ctx.Err(); err != nil {
		return 0, err
	}
	return c.r.Read(p)
}
