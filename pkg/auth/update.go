package auth

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/sluice-gateway/sluice/pkg/api"
	"github.com/sluice-gateway/sluice/pkg/store"
)

// Optional is a field of an update: absent leaves the value as it is,
// null clears it, a value sets it.
type Optional[T any] struct {
	Set   bool // the field was in the body
	Value *T   // nil: null
}

// UnmarshalJSON records that the field was given.
func (o *Optional[T]) UnmarshalJSON(b []byte) error {
	o.Set = true
	if string(b) == "null" {
		o.Value = nil
		return nil
	}
	o.Value = new(T)
	return json.Unmarshal(b, o.Value)
}

// BudgetUpdate is the budget part of /key/update and /team/update.
type BudgetUpdate struct {
	MaxBudget      Optional[float64] `json:"max_budget"`
	BudgetDuration Optional[string]  `json:"budget_duration"`
	SoftBudget     Optional[float64] `json:"soft_budget"`
}

func (u BudgetUpdate) apply(b Budget) (Budget, error) {
	if u.MaxBudget.Set {
		b.MaxBudget = u.MaxBudget.Value
	}
	if u.SoftBudget.Set {
		b.SoftBudget = u.SoftBudget.Value
	}
	if u.BudgetDuration.Set {
		b.BudgetDuration = ""
		if u.BudgetDuration.Value != nil {
			b.BudgetDuration = *u.BudgetDuration.Value
		}
	}
	return b, checkBudget(b)
}

// KeyUpdate is the body of POST /key/update (LiteLLM's, the fields sluice
// keeps): the key, raw or as its token, and what changes.
type KeyUpdate struct {
	Key      string             `json:"key"`
	KeyAlias Optional[string]   `json:"key_alias"`
	Models   Optional[[]string] `json:"models"`
	RPMLimit Optional[int64]    `json:"rpm_limit"`
	TPMLimit Optional[int64]    `json:"tpm_limit"`
	BudgetUpdate
}

// UpdateKey changes a key's alias, models, limits or budget and returns it.
func (s *Service) UpdateKey(ctx context.Context, in KeyUpdate) (*KeyInfo, error) {
	if in.Key == "" {
		return nil, api.MissingParam("key")
	}
	token := tokenOf(in.Key)
	rec, err := s.records.Get(ctx, keyRecordKey(token))
	if errors.Is(err, store.ErrNotFound) {
		return nil, api.NotFound("Key not found.")
	}
	if err != nil {
		return nil, fmt.Errorf("get key: %w", err)
	}
	info, err := decode[KeyInfo](rec.Body)
	if err != nil {
		return nil, fmt.Errorf("decode key: %w", err)
	}
	if in.KeyAlias.Set {
		info.KeyAlias = ""
		if in.KeyAlias.Value != nil {
			info.KeyAlias = *in.KeyAlias.Value
		}
	}
	if in.Models.Set {
		info.Models = []string{}
		if in.Models.Value != nil {
			info.Models = nonNil(*in.Models.Value)
		}
	}
	if in.RPMLimit.Set {
		info.RPMLimit = in.RPMLimit.Value
	}
	if in.TPMLimit.Set {
		info.TPMLimit = in.TPMLimit.Value
	}
	if err := checkLimits(info.RPMLimit, info.TPMLimit); err != nil {
		return nil, err
	}
	if info.Budget, err = in.apply(info.Budget); err != nil {
		return nil, err
	}
	if rec.Body, err = json.Marshal(info); err != nil {
		return nil, fmt.Errorf("encode key: %w", err)
	}
	if err := s.records.Update(ctx, rec, store.Cond{Version: rec.Version}); err != nil {
		if errors.Is(err, store.ErrConditionFailed) {
			return nil, api.Conflict("The key changed while it was being updated; try again.")
		}
		return nil, fmt.Errorf("update key: %w", err)
	}
	s.cache.drop(token)
	return info, nil
}

// TeamUpdate is the body of POST /team/update.
type TeamUpdate struct {
	TeamID    string             `json:"team_id"`
	TeamAlias Optional[string]   `json:"team_alias"`
	Models    Optional[[]string] `json:"models"`
	RPMLimit  Optional[int64]    `json:"rpm_limit"`
	TPMLimit  Optional[int64]    `json:"tpm_limit"`
	BudgetUpdate
}

// UpdateTeam changes a team's alias, models, limits or budget and returns it.
func (s *Service) UpdateTeam(ctx context.Context, in TeamUpdate) (*Team, error) {
	if in.TeamID == "" {
		return nil, api.MissingParam("team_id")
	}
	rec, err := s.records.Get(ctx, teamRecordKey(in.TeamID))
	if errors.Is(err, store.ErrNotFound) {
		return nil, api.NotFound("Team %q not found.", in.TeamID)
	}
	if err != nil {
		return nil, fmt.Errorf("get team: %w", err)
	}
	t, err := decode[Team](rec.Body)
	if err != nil {
		return nil, fmt.Errorf("decode team: %w", err)
	}
	if in.TeamAlias.Set {
		t.TeamAlias = ""
		if in.TeamAlias.Value != nil {
			t.TeamAlias = *in.TeamAlias.Value
		}
	}
	if in.Models.Set {
		t.Models = []string{}
		if in.Models.Value != nil {
			t.Models = nonNil(*in.Models.Value)
		}
	}
	if in.RPMLimit.Set {
		t.RPMLimit = in.RPMLimit.Value
	}
	if in.TPMLimit.Set {
		t.TPMLimit = in.TPMLimit.Value
	}
	if err := checkLimits(t.RPMLimit, t.TPMLimit); err != nil {
		return nil, err
	}
	if t.Budget, err = in.apply(t.Budget); err != nil {
		return nil, err
	}
	if rec.Body, err = json.Marshal(t); err != nil {
		return nil, fmt.Errorf("encode team: %w", err)
	}
	if err := s.records.Update(ctx, rec, store.Cond{Version: rec.Version}); err != nil {
		if errors.Is(err, store.ErrConditionFailed) {
			return nil, api.Conflict("The team changed while it was being updated; try again.")
		}
		return nil, fmt.Errorf("update team: %w", err)
	}
	s.cache.dropTeam(in.TeamID)
	return t, nil
}
