package files

import (
	"context"
	"errors"
	"fmt"

	"github.com/sluice-gateway/sluice/pkg/api"
	"github.com/sluice-gateway/sluice/pkg/auth"
	"github.com/sluice-gateway/sluice/pkg/store"
)

// queryPage is how many records one store query asks for at most.
const queryPage = 1000

// ListParams are the query parameters of GET /v1/files.
type ListParams struct {
	Purpose string // "" for all
	Limit   int
	Desc    bool
	After   string // a file id, exclusive
}

// List returns one page of the files p may see, and whether more follow.
// Expired files and files being deleted are skipped.
func (s *Service) List(ctx context.Context, p auth.Principal, lp ListParams) ([]Stored, bool, error) {
	q := store.Query{Index: store.GSI1, PK: ownerPK(p.TeamID), Desc: lp.Desc}
	if p.Admin {
		q.PK = allFilesPK
	}
	if lp.After != "" {
		sk, err := s.cursor(ctx, p, lp.After)
		if err != nil {
			return nil, false, err
		}
		q.After = sk
	}
	now := s.now()
	var out []Stored
	for len(out) <= lp.Limit {
		q.Limit = min(lp.Limit+1-len(out), queryPage)
		page, err := s.records.Query(ctx, q)
		if err != nil {
			return nil, false, fmt.Errorf("files: list %s: %w", q.PK, err)
		}
		for _, rec := range page.Records {
			f, err := decodeFile(rec)
			if err != nil {
				return nil, false, err
			}
			if rec.Status != statusLive || f.expired(now) || (lp.Purpose != "" && f.Purpose != lp.Purpose) {
				continue
			}
			out = append(out, f)
		}
		if !page.More || len(page.Records) == 0 {
			break
		}
		q.After = page.Records[len(page.Records)-1].GSI1.SK
	}
	more := len(out) > lp.Limit
	return out[:min(len(out), lp.Limit)], more, nil
}

// cursor turns the id of the file to page after into its listing sort key.
// The record is read even if the file has since expired (its record lingers),
// so paging through a listing survives a file expiring mid-way; a file
// deleted since, or one p may not see, is a 400 naming the parameter.
func (s *Service) cursor(ctx context.Context, p auth.Principal, after string) (string, error) {
	rec, err := s.records.Get(ctx, fileKey(after))
	if err == nil {
		var f Stored
		if f, err = decodeFile(rec); err == nil && p.CanAccessTeam(f.Team) {
			return listSK(f), nil
		}
	}
	if err != nil && !errors.Is(err, store.ErrNotFound) {
		return "", fmt.Errorf("files: list after %s: %w", after, err)
	}
	return "", api.InvalidValue("after", "Invalid after: there is no file %s to page after.", after)
}
