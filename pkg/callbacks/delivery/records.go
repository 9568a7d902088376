package delivery

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/sluice-gateway/sluice/pkg/store"
)

// Records the delivery worker keeps (in the one records table):
//
//	dead letter       DEADLETTER#<team>  <19-digit unix nanos>#<event id>#<callback>   (14 days)
//	dead-letter count DEADLETTER#<team>  COUNT                                          counter "events"
//	progress          DELIVERY#<message id>  PROGRESS                                    (1 day)
//
// A dead letter holds the log event as it travelled (claim-checked bodies
// stay in the blob store under their pointer), the callback and the last
// error, so an operator can see what was not delivered and send it again.
// Progress is written only when a message is left for redelivery after some
// of its deliveries succeeded: the next receive skips those.

// Retention of the records.
const (
	DeadLetterTTL = 14 * 24 * time.Hour
	progressTTL   = 24 * time.Hour
)

// DeadLetterPrefix starts the partition of a team's dead letters.
const DeadLetterPrefix = "DEADLETTER#"

// DeadLetter is one event a callback did not get.
type DeadLetter struct {
	TeamID   string          `json:"team_id"`
	Callback string          `json:"callback"` // "<name>#<type>", "" when the message itself could not be read
	EventID  string          `json:"event_id,omitempty"`
	Event    json.RawMessage `json:"event,omitempty"`
	// Message is the raw body of a message that could not be decoded.
	Message   []byte    `json:"message,omitempty"`
	Error     string    `json:"error"`
	Receives  int       `json:"receives"`
	CreatedAt time.Time `json:"created_at"`
}

// deadLetter stores d and counts it, in one transaction.
func (d *Deliverer) deadLetter(ctx context.Context, dl DeadLetter) error {
	body, err := json.Marshal(dl)
	if err != nil {
		return fmt.Errorf("encode dead letter: %w", err)
	}
	pk := DeadLetterPrefix + dl.TeamID
	sk := fmt.Sprintf("%019d#%s#%s", dl.CreatedAt.UnixNano(), dl.EventID, dl.Callback)
	err = d.records.Transact(ctx, []store.Write{
		{Kind: store.WritePut, Record: store.Record{Key: store.Key{PK: pk, SK: sk}, Body: body, ExpiresAt: dl.CreatedAt.Add(DeadLetterTTL)}},
		{Kind: store.WriteAdd, Record: store.Record{Key: store.Key{PK: pk, SK: "COUNT"}, Counters: map[string]int64{"events": 1}}},
	})
	if err != nil {
		return fmt.Errorf("store dead letter of %s for %s: %w", dl.EventID, dl.Callback, err)
	}
	return nil
}

// DeadLetters lists a team's dead letters, oldest first, and their count.
func DeadLetters(ctx context.Context, records store.Records, teamID string) ([]DeadLetter, int64, error) {
	pk := DeadLetterPrefix + teamID
	var out []DeadLetter
	q := store.Query{PK: pk, Limit: 500}
	for {
		page, err := records.Query(ctx, q)
		if err != nil {
			return nil, 0, fmt.Errorf("list dead letters of %s: %w", teamID, err)
		}
		for _, rec := range page.Records {
			if rec.Key.SK == "COUNT" {
				continue
			}
			var dl DeadLetter
			if err := json.Unmarshal(rec.Body, &dl); err != nil {
				return nil, 0, fmt.Errorf("decode dead letter %s: %w", rec.Key.SK, err)
			}
			out = append(out, dl)
		}
		if !page.More || len(page.Records) == 0 {
			break
		}
		q.After = page.Records[len(page.Records)-1].Key.SK
	}
	rec, err := records.Get(ctx, store.Key{PK: pk, SK: "COUNT"})
	if errors.Is(err, store.ErrNotFound) {
		return out, 0, nil
	}
	if err != nil {
		return nil, 0, fmt.Errorf("count dead letters of %s: %w", teamID, err)
	}
	return out, rec.Counters["events"], nil
}

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
