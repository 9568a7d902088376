package main

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/sluice-gateway/sluice/pkg/files"
	"github.com/sluice-gateway/sluice/pkg/store"
	"github.com/sluice-gateway/sluice/pkg/store/local"
)

// failingQueries makes every query fail, as a store that is down.
type failingQueries struct{ store.Records }

func (failingQueries) Query(context.Context, store.Query) (store.Page, error) {
	return store.Page{}, errors.New("table unavailable")
}

func TestSweep(t *testing.T) {
	b, err := local.Open(t.TempDir(), local.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	ctx := context.Background()
	later := time.Now().Add(48 * time.Hour)

	// A file that expires after an hour, swept a day later: its bytes and
	// records go.
	s := files.NewService(b.Records, b.Blobs, files.Options{})
	if _, err := b.Blobs.Put(ctx, "files/file-sweepme", strings.NewReader("{}\n")); err != nil {
		t.Fatal(err)
	}
	f, err := s.Create(ctx, files.NewFile{Team: "team-a", Filename: "out.jsonl", Purpose: files.PurposeBatchOutput,
		Parts: []files.Part{{Key: "files/file-sweepme", Size: 3}}, ExpiresAfter: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	swept := files.NewService(b.Records, b.Blobs, files.Options{Now: func() time.Time { return later }})
	if err := sweep(ctx, swept); err != nil {
		t.Fatalf("sweep: %v", err)
	}
	if _, err := b.Blobs.Size(ctx, "files/file-sweepme"); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("file %s: its bytes survived the sweep (%v)", f.ID, err)
	}

	// Out of time: the sweep stops stopBefore the deadline and that is no
	// failure (the next run goes on).
	short, cancel := context.WithTimeout(ctx, stopBefore/2)
	defer cancel()
	if err := sweep(short, swept); err != nil {
		t.Errorf("a sweep out of time failed the invocation: %v", err)
	}

	// A store that fails: the invocation fails, so the error alarm sees it.
	down := files.NewService(failingQueries{b.Records}, b.Blobs, files.Options{Now: func() time.Time { return later }})
	if err := sweep(ctx, down); err == nil || !strings.Contains(err.Error(), "table unavailable") {
		t.Errorf("sweep over a failing store: %v", err)
	}
}
