package callbacks

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/sluice-gateway/sluice/pkg/api"
	"github.com/sluice-gateway/sluice/pkg/auth"
	"github.com/sluice-gateway/sluice/pkg/store"
)

// Teams finds a team the principal may see; another team's id, or an
// unknown one, is a 404 (auth.Service implements it).
type Teams interface {
	Team(ctx context.Context, p auth.Principal, id string) (*auth.Team, error)
}

// Deps is what a Service is built on.
type Deps struct {
	Records store.Records
	Sealer  store.Sealer
	Teams   Teams
	// Catalog is the process's cache of team callbacks: the service drops a
	// team's entry on every change.
	Catalog *Catalog
	Guard   *Guard
	// Accounts resolves gcs_path_service_account values.
	Accounts *ServiceAccounts
	Now      func() time.Time
}

// Service manages team callback settings: add, read, delete, disable, and
// the audit trail of every change. Who may act: the admin, or a key of the
// team; any other key gets 404, as for an unknown team.
type Service struct {
	records  store.Records
	sealer   store.Sealer
	teams    Teams
	catalog  *Catalog
	guard    *Guard
	accounts *ServiceAccounts
	now      func() time.Time
}

// NewService builds the service.
func NewService(d Deps) (*Service, error) {
	if d.Records == nil || d.Sealer == nil || d.Teams == nil || d.Catalog == nil || d.Guard == nil || d.Accounts == nil {
		return nil, errors.New("callbacks: records, sealer, teams, catalog, guard and service accounts are required")
	}
	if d.Now == nil {
		d.Now = time.Now
	}
	return &Service{records: d.Records, sealer: d.Sealer, teams: d.Teams, catalog: d.Catalog,
		guard: d.Guard, accounts: d.Accounts, now: d.Now}, nil
}

// Get returns teamID's callbacks, secrets masked.
func (s *Service) Get(ctx context.Context, p auth.Principal, teamID string) (*TeamCallbacks, error) {
	cbs, err := s.current(ctx, p, teamID)
	if err != nil {
		return nil, err
	}
	health, err := ReadHealth(ctx, s.records, teamID)
	if err != nil {
		return nil, err
	}
	t := viewOf(teamID, cbs)
	for i, cb := range cbs {
		h := health[cb.ID()]
		t.Callbacks[i].Delivery = &h
	}
	return t, nil
}

// current checks access and reads the team's callbacks from the table (not
// the cache: a change is decided on what is stored).
func (s *Service) current(ctx context.Context, p auth.Principal, teamID string) ([]Callback, error) {
	if teamID == "" {
		return nil, api.MissingParam("team_id")
	}
	if _, err := s.teams.Team(ctx, p, teamID); err != nil {
		return nil, err
	}
	return s.catalog.read(ctx, teamID)
}

func viewOf(teamID string, cbs []Callback) *TeamCallbacks {
	views := make([]View, len(cbs))
	for i, cb := range cbs {
		views[i] = cb.View()
	}
	return newTeamCallbacks(teamID, views)
}

// Add stores a new callback for teamID. A callback with the same name and
// type is a 400 (there is no update: delete it, then add it again).
// changedBy is the changed-by header, recorded in the audit trail.
func (s *Service) Add(ctx context.Context, p auth.Principal, teamID string, in AddCallback, changedBy string) (*TeamCallbacks, error) {
	before, err := s.current(ctx, p, teamID)
	if err != nil {
		return nil, err
	}
	set, err := s.validate(ctx, in)
	if err != nil {
		return nil, err
	}
	now := s.now().UTC().Truncate(time.Millisecond)
	stored := storedCallback{Name: set.name, Type: set.typ, Vars: set.vars, SecretNames: set.secretNames(),
		CreatedAt: now, CreatedBy: actingKey(p)}
	if len(set.secrets) > 0 {
		plain, err := json.Marshal(set.secrets)
		if err != nil {
			return nil, fmt.Errorf("encode secrets: %w", err)
		}
		if stored.Sealed, err = s.sealer.Seal(ctx, plain, SealContext(teamID, set.name, set.typ)); err != nil {
			return nil, fmt.Errorf("seal secrets of callback %s#%s of team %s: %w", set.name, set.typ, teamID, err)
		}
	}
	body, err := json.Marshal(stored)
	if err != nil {
		return nil, fmt.Errorf("encode callback: %w", err)
	}
	added := Callback{TeamID: teamID, Name: set.name, Type: set.typ, Vars: set.vars, SecretNames: stored.SecretNames}
	after := append(slices.Clone(before), added)
	slices.SortFunc(after, func(a, b Callback) int { return strings.Compare(a.ID(), b.ID()) })
	audit := newAuditEntry(p, teamID, ActionCallbackAdded, changedBy, s.now())
	audit.Before, audit.After = viewOf(teamID, before), viewOf(teamID, after)
	auditRec, err := auditRecord(audit)
	if err != nil {
		return nil, err
	}
	err = s.records.Transact(ctx, []store.Write{
		{Kind: store.WritePut, Record: store.Record{Key: store.Key{PK: teamPK(teamID), SK: callbackSK(set.name, set.typ)}, Body: body}, Cond: store.Cond{Absent: true}},
		{Kind: store.WritePut, Record: auditRec, Cond: store.Cond{Absent: true}},
	})
	if errors.Is(err, store.ErrConditionFailed) {
		return nil, api.InvalidValue("callback_name", "callback_name = %s already exists for team_id = %s with callback_type = %s; delete it first to change it.", set.name, teamID, set.typ)
	}
	if err != nil {
		return nil, fmt.Errorf("store callback %s#%s of team %s: %w", set.name, set.typ, teamID, err)
	}
	s.catalog.Drop(teamID)
	return audit.After, nil
}

// Delete removes every callback named name (all its types) from teamID.
func (s *Service) Delete(ctx context.Context, p auth.Principal, teamID, name, changedBy string) (*TeamCallbacks, error) {
	if _, ok := families[name]; !ok {
		return nil, api.InvalidValue("callback_name", "Unknown callback_name %q: use one of %s.", name, strings.Join(Names(), ", "))
	}
	before, err := s.current(ctx, p, teamID)
	if err != nil {
		return nil, err
	}
	var gone, kept []Callback
	for _, cb := range before {
		if cb.Name == name {
			gone = append(gone, cb)
		} else {
			kept = append(kept, cb)
		}
	}
	if len(gone) == 0 {
		return nil, api.NotFound("Team %q has no %s callback.", teamID, name)
	}
	after, err := s.remove(ctx, p, teamID, ActionCallbackDeleted, changedBy, before, gone, kept)
	if err != nil {
		return nil, err
	}
	return after, nil
}

// DisableLogging removes every callback of teamID.
func (s *Service) DisableLogging(ctx context.Context, p auth.Principal, teamID, changedBy string) (*TeamCallbacks, error) {
	before, err := s.current(ctx, p, teamID)
	if err != nil {
		return nil, err
	}
	return s.remove(ctx, p, teamID, ActionLoggingDisabled, changedBy, before, before, nil)
}

// remove deletes gone (each only if unchanged since it was read) and
// records the change, in one transaction.
func (s *Service) remove(ctx context.Context, p auth.Principal, teamID, action, changedBy string, before, gone, kept []Callback) (*TeamCallbacks, error) {
	audit := newAuditEntry(p, teamID, action, changedBy, s.now())
	audit.Before, audit.After = viewOf(teamID, before), viewOf(teamID, kept)
	auditRec, err := auditRecord(audit)
	if err != nil {
		return nil, err
	}
	writes := make([]store.Write, 0, len(gone)+1)
	for _, cb := range gone {
		writes = append(writes, store.Write{Kind: store.WriteDelete,
			Record: store.Record{Key: store.Key{PK: teamPK(teamID), SK: callbackSK(cb.Name, cb.Type)}},
			Cond:   store.Cond{Version: cb.Version}})
	}
	writes = append(writes, store.Write{Kind: store.WritePut, Record: auditRec, Cond: store.Cond{Absent: true}})
	err = s.records.Transact(ctx, writes)
	if errors.Is(err, store.ErrConditionFailed) {
		return nil, api.Conflict("Team %q's callbacks changed while this request ran; read them again and retry.", teamID)
	}
	if err != nil {
		return nil, fmt.Errorf("delete callbacks of team %s: %w", teamID, err)
	}
	s.catalog.Drop(teamID)
	return audit.After, nil
}

func actingKey(p auth.Principal) string {
	if p.Admin {
		return MasterKeyActor
	}
	return p.KeyToken()
}
