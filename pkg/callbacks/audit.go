package callbacks

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"regexp"
	"strings"
	"time"

	"github.com/sluice-gateway/sluice/pkg/api"
	"github.com/sluice-gateway/sluice/pkg/auth"
	"github.com/sluice-gateway/sluice/pkg/ids"
	"github.com/sluice-gateway/sluice/pkg/store"
)

// Audit actions.
const (
	ActionCallbackAdded   = "callback_added"
	ActionCallbackDeleted = "callback_deleted"
	ActionLoggingDisabled = "logging_disabled"
)

// auditIDPrefix starts every audit entry id.
const auditIDPrefix = "audit_"

// MasterKeyActor is the acting key of a change made with the master key
// (which has no stored token).
const MasterKeyActor = "master_key"

// AuditEntry is one change of a team's callbacks: who made it (the acting
// key and the changed-by header, sluice-changed-by or LiteLLM's
// litellm-changed-by), when, and the team's callbacks before and after,
// secrets masked.
type AuditEntry struct {
	ID        string    `json:"id"`
	TeamID    string    `json:"team_id"`
	Action    string    `json:"action"`
	CreatedAt time.Time `json:"created_at"`
	// ChangedBy is the changed-by header ("" when absent): on whose behalf
	// the acting key made the change.
	ChangedBy string `json:"changed_by"`
	// ActingKey is the token (SHA-256) of the key used, or MasterKeyActor.
	ActingKey      string         `json:"acting_key"`
	ActingKeyAlias string         `json:"acting_key_alias,omitempty"`
	Before         *TeamCallbacks `json:"before"`
	After          *TeamCallbacks `json:"after"`
}

// auditRecord builds the record of an entry: in the team's partition, sorted
// by time (19-digit Unix nanoseconds, so byte order is time order), then id.
func auditRecord(e *AuditEntry) (store.Record, error) {
	body, err := json.Marshal(e)
	if err != nil {
		return store.Record{}, fmt.Errorf("encode audit entry: %w", err)
	}
	return store.Record{Key: store.Key{PK: teamPK(e.TeamID), SK: auditPrefix + auditSortKey(e)}, Body: body}, nil
}

func auditSortKey(e *AuditEntry) string {
	return fmt.Sprintf("%019d#%s", e.CreatedAt.UnixNano(), e.ID)
}

// newAuditEntry starts the entry of a change p makes to teamID's callbacks.
func newAuditEntry(p auth.Principal, teamID, action, changedBy string, now time.Time) *AuditEntry {
	e := &AuditEntry{ID: ids.New(auditIDPrefix), TeamID: teamID, Action: action, CreatedAt: now.UTC(),
		ChangedBy: changedBy, ActingKey: p.KeyToken(), ActingKeyAlias: p.KeyAlias()}
	if p.Admin {
		e.ActingKey = MasterKeyActor
	}
	return e
}

// AuditPage is one page of a team's audit trail, newest first. NextCursor,
// when set, is the cursor of the next page.
type AuditPage struct {
	Object     string        `json:"object"`
	Data       []*AuditEntry `json:"data"`
	HasMore    bool          `json:"has_more"`
	NextCursor *string       `json:"next_cursor"`
}

// Audit page sizes.
const (
	DefaultAuditLimit = 20
	MaxAuditLimit     = 100
)

var auditCursorPattern = regexp.MustCompile(`^[0-9]{19}#` + auditIDPrefix + `[A-Za-z0-9]{24}$`)

// encodeCursor and decodeCursor keep the cursor opaque: it is the sort key
// of the last entry shown, base64url-encoded.
func encodeCursor(sk string) string {
	return base64.RawURLEncoding.EncodeToString([]byte(strings.TrimPrefix(sk, auditPrefix)))
}

func decodeCursor(c string) (string, error) {
	b, err := base64.RawURLEncoding.DecodeString(c)
	if err != nil || !auditCursorPattern.Match(b) {
		return "", api.InvalidValue("cursor", "cursor is not one this API returned (use next_cursor of the previous page).")
	}
	return auditPrefix + string(b), nil
}

// Audit lists teamID's audit trail, newest first, limit entries from cursor
// ("" for the first page). The admin and the team's own keys may read it.
func (s *Service) Audit(ctx context.Context, p auth.Principal, teamID string, limit int, cursor string) (*AuditPage, error) {
	if _, err := s.teams.Team(ctx, p, teamID); err != nil {
		return nil, err
	}
	switch {
	case limit == 0:
		limit = DefaultAuditLimit
	case limit < 1 || limit > MaxAuditLimit:
		return nil, api.InvalidValue("limit", "limit must be between 1 and %d.", MaxAuditLimit)
	}
	q := store.Query{PK: teamPK(teamID), SKPrefix: auditPrefix, Desc: true, Limit: limit}
	if cursor != "" {
		after, err := decodeCursor(cursor)
		if err != nil {
			return nil, err
		}
		q.After = after
	}
	page, err := s.records.Query(ctx, q)
	if err != nil {
		return nil, fmt.Errorf("list audit entries of team %s: %w", teamID, err)
	}
	out := &AuditPage{Object: "list", Data: make([]*AuditEntry, 0, len(page.Records)), HasMore: page.More}
	for _, rec := range page.Records {
		e := new(AuditEntry)
		if err := json.Unmarshal(rec.Body, e); err != nil {
			return nil, fmt.Errorf("decode audit entry %s of team %s: %w", rec.Key.SK, teamID, err)
		}
		out.Data = append(out.Data, e)
	}
	if page.More && len(page.Records) > 0 {
		c := encodeCursor(page.Records[len(page.Records)-1].Key.SK)
		out.NextCursor = &c
	}
	return out, nil
}
