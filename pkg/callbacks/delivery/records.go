package delivery

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/sluice-gateway/sluice/pkg/store"
)

// The delivery worker keeps one kind of record: a message's progress,
//
//	DELIVERY#<message id>  PROGRESS  (1 day)
//
// written only when a message is left for redelivery after some of its
// deliveries succeeded: the next receive skips those.

// progressTTL is how long a progress record is kept.
const progressTTL = 24 * time.Hour

func progressKey(messageID string) store.Key {
	return store.Key{PK: "DELIVERY#" + messageID, SK: "PROGRESS"}
}

// progress is the set of deliveries of a message already done.
type progress struct {
	Done []string `json:"done"`
}

func (d *Deliverer) loadProgress(ctx context.Context, messageID string) (map[string]bool, error) {
	rec, err := d.records.Get(ctx, progressKey(messageID))
	if errors.Is(err, store.ErrNotFound) {
		return map[string]bool{}, nil
	}
	if err != nil {
		return nil, fmt.Errorf("load delivery progress of %s: %w", messageID, err)
	}
	var p progress
	if err := json.Unmarshal(rec.Body, &p); err != nil {
		return nil, fmt.Errorf("decode delivery progress of %s: %w", messageID, err)
	}
	done := make(map[string]bool, len(p.Done))
	for _, k := range p.Done {
		done[k] = true
	}
	return done, nil
}

func (d *Deliverer) saveProgress(ctx context.Context, messageID string, done []string) error {
	body, err := json.Marshal(progress{Done: done})
	if err != nil {
		return err
	}
	return d.records.Put(ctx, store.Record{Key: progressKey(messageID), Body: body, ExpiresAt: d.now().Add(progressTTL)}, store.Cond{})
}
