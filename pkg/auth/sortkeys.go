package auth

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/sluice-gateway/sluice/pkg/store"
	"github.com/sluice-gateway/sluice/pkg/store/sortkey"
)

// The teams list (gsi1 TEAMS / <created>#<team>) and each team's keys
// (gsi1 TEAM#<team> / KEY#<created>#<token>) order by a time in the sort
// key. Before sortkey.Time was the one form, auth wrote it as fixed-width
// RFC 3339 (legacyTimeLayout), which sorts after every sortkey.Time of our
// era: records written before the change would list after those written
// since. Each listing reads its whole partition anyway, so it is where the
// migration happens: a record still in the legacy form is rewritten in
// the current one and the listing starts over. Nothing is done, and
// nothing costs more, once no such record is left.

// legacyTimeLayout is the form auth wrote times in sort keys before.
const legacyTimeLayout = "2006-01-02T15:04:05.000000000Z"

// currentSortKey returns sk with a legacy time after prefix rewritten as
// sortkey.Time; ok is false when sk holds none.
func currentSortKey(sk, prefix string) (string, bool) {
	rest, ok := strings.CutPrefix(sk, prefix)
	if !ok || len(rest) < len(legacyTimeLayout) || rest[4] != '-' {
		return "", false
	}
	t, err := time.Parse(legacyTimeLayout, rest[:len(legacyTimeLayout)])
	if err != nil {
		return "", false
	}
	return prefix + sortkey.Time(t) + rest[len(legacyTimeLayout):], true
}

// listIndex calls each with every record of q's partition in sort-key
// order, time prefix after prefix. When a record still holds a legacy
// time, the records are migrated first, reset is called, and the listing
// starts over, so a listing never mixes the two orders. (A record an
// older process writes meanwhile is migrated by the next listing.)
func (s *Service) listIndex(ctx context.Context, q store.Query, prefix string, reset func(), each func(store.Record) error) error {
	for pass := 0; ; pass++ {
		var legacy []store.Key
		err := s.queryAll(ctx, q, func(rec store.Record) error {
			if pass == 0 {
				if _, ok := currentSortKey(rec.GSI1.SK, prefix); ok {
					legacy = append(legacy, rec.Key)
				}
			}
			if len(legacy) > 0 {
				return nil // listed again once migrated
			}
			return each(rec)
		})
		if err != nil || len(legacy) == 0 {
			return err
		}
		for _, k := range legacy {
			if err := s.migrateSortKey(ctx, k, prefix); err != nil {
				return err
			}
		}
		reset()
	}
}

func (s *Service) queryAll(ctx context.Context, q store.Query, each func(store.Record) error) error {
	for {
		page, err := s.records.Query(ctx, q)
		if err != nil {
			return err
		}
		for _, rec := range page.Records {
			if err := each(rec); err != nil {
				return err
			}
		}
		if !page.More || len(page.Records) == 0 {
			return nil
		}
		q.After = page.Records[len(page.Records)-1].GSI1.SK
	}
}

// migrateSortKey rewrites the record's gsi1 sort key in the current form,
// unless a concurrent write got there first (then it reads it again).
func (s *Service) migrateSortKey(ctx context.Context, key store.Key, prefix string) error {
	for {
		rec, err := s.records.Get(ctx, key)
		if errors.Is(err, store.ErrNotFound) {
			return nil // deleted or expired meanwhile
		}
		if err != nil {
			return fmt.Errorf("migrate the sort key of %s: %w", key.PK, err)
		}
		sk, ok := currentSortKey(rec.GSI1.SK, prefix)
		if !ok {
			return nil
		}
		rec.GSI1.SK = sk
		err = s.records.Update(ctx, rec, store.Cond{Version: rec.Version})
		if errors.Is(err, store.ErrConditionFailed) {
			continue // written meanwhile: migrate what is there now
		}
		if err != nil {
			return fmt.Errorf("migrate the sort key of %s: %w", key.PK, err)
		}
		return nil
	}
}
