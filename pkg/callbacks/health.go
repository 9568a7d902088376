package callbacks

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/sluice-gateway/sluice/pkg/store"
)

// Delivery health: what the delivery worker (pkg/callbacks/delivery) did
// for each team callback, kept in three records of the team's health
// partition,
//
//	CBHEALTH#<team>  <name>#<type>            counters delivered, retrying, dead_lettered (atomic adds)
//	CBHEALTH#<team>  <name>#<type>#error      body: the last error; counter at: its time, epoch ms
//	CBHEALTH#<team>  <name>#<type>#delivered  counter at: the last delivery's time, epoch ms
//
// so one query reads a team's health, and a flush is one transaction: an
// add plus a put per "last" it moves, per callback. The puts are conditional on the stored time being older
// (Cond.AtMost), so two writers (Lambda containers) never move a "last"
// back in time. The counts outlive the callback: deleting and adding again
// the same name and type continues them.

// Delivery is a callback's delivery health, as GET /team/{team_id}/callback
// answers it.
type Delivery struct {
	// Delivered counts log events the destination accepted.
	Delivered int64 `json:"delivered"`
	// Retrying counts events whose delivery failed and is left for
	// redelivery now.
	Retrying int64 `json:"retrying"`
	// DeadLettered counts events given up on and not delivered since: a
	// re-driven dead letter that is delivered leaves this count.
	DeadLettered    int64      `json:"dead_lettered"`
	LastError       string     `json:"last_error"`
	LastErrorAt     *time.Time `json:"last_error_at"`
	LastDeliveredAt *time.Time `json:"last_delivered_at"`
}

// HealthDelta is what one flush adds to a callback's health.
type HealthDelta struct {
	Delivered, Retrying, DeadLettered int64
	LastError                         string // "" when no error is new
	LastErrorAt, LastDeliveredAt      time.Time
}

// Counter names of the health records.
const (
	healthDelivered = "delivered"
	healthRetrying  = "retrying"
	healthDead      = "dead_lettered"
	healthAt        = "at"
)

func healthPK(teamID string) string { return "CBHEALTH#" + teamID }

// healthError is the body of the last-error record.
type healthError struct {
	Message string `json:"message"`
}

// HealthUpdate is a delta to one callback's health.
type HealthUpdate struct {
	TeamID, CallbackID string // CallbackID: Callback.ID
	Delta              HealthDelta
}

// WriteHealth adds the updates to the callbacks' health: in one
// transaction (a few, past store.MaxTransactWrites) when no stored "last"
// is newer than the update's, else each write on its own, a "last" that
// is older than the stored one left out.
func WriteHealth(ctx context.Context, records store.Records, updates ...HealthUpdate) error {
	var writes []store.Write
	for _, u := range updates {
		ws, err := healthWrites(u)
		if err != nil {
			return err
		}
		writes = append(writes, ws...)
	}
	for len(writes) > 0 {
		n := min(len(writes), store.MaxTransactWrites)
		err := records.Transact(ctx, writes[:n])
		if errors.Is(err, store.ErrConditionFailed) {
			err = writeEach(ctx, records, writes[:n])
		}
		if err != nil {
			return fmt.Errorf("callbacks: record delivery health: %w", err)
		}
		writes = writes[n:]
	}
	return nil
}

// writeEach applies writes one by one; a conditional put whose condition
// fails (a newer "last" is stored) is skipped.
func writeEach(ctx context.Context, records store.Records, writes []store.Write) error {
	for _, w := range writes {
		var err error
		switch w.Kind {
		case store.WriteAdd:
			_, err = records.Add(ctx, w.Record.Key, w.Record.Counters, w.Cond)
		default:
			err = records.Put(ctx, w.Record, w.Cond)
			if errors.Is(err, store.ErrConditionFailed) {
				err = nil
			}
		}
		if err != nil {
			return err
		}
	}
	return nil
}

// healthWrites are the writes of one update: an add of its counts, and a
// put of each "last" it moves, only over an older one.
func healthWrites(u HealthUpdate) ([]store.Write, error) {
	pk, d := healthPK(u.TeamID), u.Delta
	var writes []store.Write
	if deltas := nonZero(map[string]int64{healthDelivered: d.Delivered, healthRetrying: d.Retrying, healthDead: d.DeadLettered}); len(deltas) > 0 {
		writes = append(writes, store.Write{Kind: store.WriteAdd, Record: store.Record{Key: store.Key{PK: pk, SK: u.CallbackID}, Counters: deltas}})
	}
	if !d.LastErrorAt.IsZero() && d.LastError != "" {
		body, err := json.Marshal(healthError{Message: d.LastError})
		if err != nil {
			return nil, err
		}
		writes = append(writes, latest(store.Key{PK: pk, SK: u.CallbackID + "#error"}, body, d.LastErrorAt))
	}
	if !d.LastDeliveredAt.IsZero() {
		writes = append(writes, latest(store.Key{PK: pk, SK: u.CallbackID + "#delivered"}, nil, d.LastDeliveredAt))
	}
	return writes, nil
}

// latest puts the record at key unless it holds a later time.
func latest(key store.Key, body []byte, at time.Time) store.Write {
	ms := at.UnixMilli()
	return store.Write{Kind: store.WritePut, Record: store.Record{Key: key, Body: body, Counters: map[string]int64{healthAt: ms}},
		Cond: store.Cond{AtMost: map[string]int64{healthAt: ms - 1}}}
}

func nonZero(m map[string]int64) map[string]int64 {
	for k, v := range m {
		if v == 0 {
			delete(m, k)
		}
	}
	return m
}

// ReadHealth returns the delivery health of teamID's callbacks, by
// Callback.ID; a callback that never had a delivery is absent.
func ReadHealth(ctx context.Context, records store.Records, teamID string) (map[string]Delivery, error) {
	out := map[string]Delivery{}
	q := store.Query{PK: healthPK(teamID), Limit: 100}
	for {
		page, err := records.Query(ctx, q)
		if err != nil {
			return nil, fmt.Errorf("callbacks: read delivery health of team %s: %w", teamID, err)
		}
		for _, r := range page.Records {
			id, what := r.Key.SK, ""
			if base, ok := strings.CutSuffix(id, "#error"); ok {
				id, what = base, "error"
			} else if base, ok := strings.CutSuffix(id, "#delivered"); ok {
				id, what = base, "delivered"
			}
			h := out[id]
			switch what {
			case "error":
				var e healthError
				if err := json.Unmarshal(r.Body, &e); err != nil {
					return nil, fmt.Errorf("callbacks: decode the last delivery error of %s of team %s: %w", id, teamID, err)
				}
				h.LastError, h.LastErrorAt = e.Message, msTime(r.Counters[healthAt])
			case "delivered":
				h.LastDeliveredAt = msTime(r.Counters[healthAt])
			default:
				h.Delivered = r.Counters[healthDelivered]
				// Retrying is a gauge kept by adds and subtractions: a
				// handler that crashed between them can leave it off by a
				// few, never below zero on display.
				h.Retrying = max(0, r.Counters[healthRetrying])
				h.DeadLettered = max(0, r.Counters[healthDead])
			}
			out[id] = h
		}
		if !page.More || len(page.Records) == 0 {
			return out, nil
		}
		q.After = page.Records[len(page.Records)-1].Key.SK
	}
}

func msTime(ms int64) *time.Time {
	if ms <= 0 {
		return nil
	}
	t := time.UnixMilli(ms).UTC()
	return &t
}
