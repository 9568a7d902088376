package batches

import (
	"context"
	"strings"
	"time"

	"github.com/sluice-gateway/sluice/pkg/store"
)

// LeaseAsDeadRun makes chunk n of batch id look as a run that died left it:
// leased by another process until until, with an object of its epoch
// stored. It returns that object's key.
func (s *Service) LeaseAsDeadRun(ctx context.Context, id string, n int, until time.Time) (string, error) {
	c, err := s.loadChunk(ctx, id, n)
	if err != nil {
		return "", err
	}
	c.doc.Epoch++
	c.doc.Lease = &lease{Epoch: c.doc.Epoch, Instance: "a-process-that-died", Until: until.UnixMilli()}
	rec, err := c.record(id)
	if err != nil {
		return "", err
	}
	if err := s.deps.Records.Update(ctx, rec, store.Cond{Version: c.version}); err != nil {
		return "", err
	}
	key := resultKey(id, n, c.doc.Epoch, kindOut)
	_, err = s.deps.Blobs.Put(ctx, key, strings.NewReader(`{"half":"a line"`))
	return key, err
}

// ChunkKey is the record key of chunk n of batch id.
func ChunkKey(id string, n int) store.Key { return chunkKey(id, n) }
