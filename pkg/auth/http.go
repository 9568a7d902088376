package auth

import (
	"context"
	"net/http"
	"strconv"
	"time"

	"github.com/sluice-gateway/sluice/pkg/api"
)

// Handlers serves the admin endpoints (LiteLLM-compatible shapes).
type Handlers struct {
	Service   *Service
	JSONLimit int64
	// Spend tells the info routes what a key or team has spent (pkg/spend);
	// nil: they show no spend.
	Spend SpendReader
}

// SpendReader tells what a key (scope "key:<token>") or a team
// ("team:<id>") created at created has spent in its current budget period.
type SpendReader interface {
	Spent(ctx context.Context, scope string, created time.Time, b Budget) (BudgetState, error)
}

// BudgetState is a key's or team's spend in its current budget period, as
// the info routes show it.
type BudgetState struct {
	Spend         float64    `json:"spend"`
	BudgetResetAt *time.Time `json:"budget_reset_at"`
}

func (h Handlers) spent(ctx context.Context, scope string, created time.Time, b Budget) (BudgetState, error) {
	if h.Spend == nil {
		return BudgetState{}, nil
	}
	return h.Spend.Spent(ctx, scope, created, b)
}

// TeamNew serves POST /team/new.
func (h Handlers) TeamNew(w http.ResponseWriter, r *http.Request) error {
	var in NewTeam
	if err := api.DecodeJSON(w, r, h.JSONLimit, &in); err != nil {
		return err
	}
	t, err := h.Service.CreateTeam(r.Context(), in, newTeamID())
	if err != nil {
		return err
	}
	api.WriteJSON(w, http.StatusOK, t)
	return nil
}

// TeamInfo serves GET /team/info?team_id=.
func (h Handlers) TeamInfo(w http.ResponseWriter, r *http.Request) error {
	p := FromContext(r.Context())
	id := r.URL.Query().Get("team_id")
	if id == "" && !p.Admin {
		id = p.TeamID
	}
	t, err := h.Service.Team(r.Context(), p, id)
	if err != nil {
		return err
	}
	st, err := h.spent(r.Context(), "team:"+t.TeamID, t.CreatedAt, t.Budget)
	if err != nil {
		return err
	}
	api.WriteJSON(w, http.StatusOK, map[string]any{"team_id": t.TeamID, "team_info": struct {
		*Team
		BudgetState
	}{t, st}})
	return nil
}

// TeamUpdate serves POST /team/update.
func (h Handlers) TeamUpdate(w http.ResponseWriter, r *http.Request) error {
	var in TeamUpdate
	if err := api.DecodeJSON(w, r, h.JSONLimit, &in); err != nil {
		return err
	}
	t, err := h.Service.UpdateTeam(r.Context(), in)
	if err != nil {
		return err
	}
	api.WriteJSON(w, http.StatusOK, map[string]any{"team_id": t.TeamID, "data": t})
	return nil
}

// KeyUpdate serves POST /key/update.
func (h Handlers) KeyUpdate(w http.ResponseWriter, r *http.Request) error {
	var in KeyUpdate
	if err := api.DecodeJSON(w, r, h.JSONLimit, &in); err != nil {
		return err
	}
	info, err := h.Service.UpdateKey(r.Context(), in)
	if err != nil {
		return err
	}
	api.WriteJSON(w, http.StatusOK, info)
	return nil
}

// listed is what a list route shows of a key or team's spend: nil (the
// fields left out) when no SpendReader is wired, so a client never reads
// a spend of 0 that was not measured.
func (h Handlers) listed(ctx context.Context, scope string, created time.Time, b Budget) (*BudgetState, error) {
	if h.Spend == nil {
		return nil, nil
	}
	st, err := h.Spend.Spent(ctx, scope, created, b)
	if err != nil {
		return nil, err
	}
	return &st, nil
}

// ListedTeam is a team as GET /team/list shows it: with its spend in the
// current budget period, as /team/info shows it.
type ListedTeam struct {
	*Team
	*BudgetState
}

// TeamList serves GET /team/list. Each team's spend costs one read (its
// current period's counter), so the answer costs one read per team.
func (h Handlers) TeamList(w http.ResponseWriter, r *http.Request) error {
	teams, err := h.Service.Teams(r.Context())
	if err != nil {
		return err
	}
	out := make([]ListedTeam, 0, len(teams))
	for _, t := range teams {
		st, err := h.listed(r.Context(), "team:"+t.TeamID, t.CreatedAt, t.Budget)
		if err != nil {
			return err
		}
		out = append(out, ListedTeam{t, st})
	}
	api.WriteJSON(w, http.StatusOK, out)
	return nil
}

// KeyGenerate serves POST /key/generate.
func (h Handlers) KeyGenerate(w http.ResponseWriter, r *http.Request) error {
	var in NewKeyRequest
	if err := api.DecodeJSON(w, r, h.JSONLimit, &in); err != nil {
		return err
	}
	createdBy := r.Header.Get("Sluice-Changed-By")
	if createdBy == "" {
		createdBy = AdminTeam
	}
	k, err := h.Service.GenerateKey(r.Context(), in, createdBy)
	if err != nil {
		return err
	}
	api.WriteJSON(w, http.StatusOK, k)
	return nil
}

// KeyInfo serves GET /key/info?key=.
func (h Handlers) KeyInfo(w http.ResponseWriter, r *http.Request) error {
	info, err := h.Service.KeyInfo(r.Context(), FromContext(r.Context()), r.URL.Query().Get("key"))
	if err != nil {
		return err
	}
	st, err := h.spent(r.Context(), "key:"+info.Token, info.CreatedAt, info.Budget)
	if err != nil {
		return err
	}
	api.WriteJSON(w, http.StatusOK, map[string]any{"key": info.Token, "info": struct {
		*KeyInfo
		BudgetState
	}{info, st}})
	return nil
}

// KeyList serves GET /key/list?team_id=&page=&size=: a team key lists its
// own team's keys (team_id may be left out), the master key any team's.
func (h Handlers) KeyList(w http.ResponseWriter, r *http.Request) error {
	p := FromContext(r.Context())
	q := r.URL.Query()
	id := q.Get("team_id")
	if id == "" && !p.Admin {
		id = p.TeamID
	}
	page, err := intParam(q.Get("page"), "page", 1, 1, 1<<20)
	if err != nil {
		return err
	}
	size, err := intParam(q.Get("size"), "size", 100, 1, MaxKeyListSize)
	if err != nil {
		return err
	}
	keys, err := h.Service.Keys(r.Context(), p, id, page, size)
	if err != nil {
		return err
	}
	// One read per key on the page (at most size) for its spend.
	out := ListedKeyPage{Keys: make([]ListedKey, 0, len(keys.Keys)), TotalCount: keys.TotalCount,
		CurrentPage: keys.CurrentPage, TotalPages: keys.TotalPages}
	for _, k := range keys.Keys {
		st, err := h.listed(r.Context(), "key:"+k.Token, k.CreatedAt, k.Budget)
		if err != nil {
			return err
		}
		out.Keys = append(out.Keys, ListedKey{k, st})
	}
	api.WriteJSON(w, http.StatusOK, out)
	return nil
}

// ListedKey is a key as GET /key/list shows it: with its spend in the
// current budget period, as /key/info shows it.
type ListedKey struct {
	*KeyInfo
	*BudgetState
}

// ListedKeyPage is KeyPage with each key's spend.
type ListedKeyPage struct {
	Keys        []ListedKey `json:"keys"`
	TotalCount  int         `json:"total_count"`
	CurrentPage int         `json:"current_page"`
	TotalPages  int         `json:"total_pages"`
}

// intParam parses query parameter name: def when absent, an error unless
// an integer in [lo, hi].
func intParam(v, name string, def, lo, hi int) (int, error) {
	if v == "" {
		return def, nil
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < lo || n > hi {
		return 0, api.InvalidValue(name, "%s must be an integer from %d to %d.", name, lo, hi)
	}
	return n, nil
}

// KeyDelete serves POST /key/delete.
func (h Handlers) KeyDelete(w http.ResponseWriter, r *http.Request) error {
	var in struct {
		Keys []string `json:"keys"`
	}
	if err := api.DecodeJSON(w, r, h.JSONLimit, &in); err != nil {
		return err
	}
	deleted, err := h.Service.DeleteKeys(r.Context(), in.Keys)
	if err != nil {
		return err
	}
	api.WriteJSON(w, http.StatusOK, map[string]any{"deleted_keys": deleted})
	return nil
}
