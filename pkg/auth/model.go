package auth

import (
	"encoding/json"
	"slices"
	"time"
)

// Team is a team as stored and returned (LiteLLM's shape).
type Team struct {
	TeamID    string         `json:"team_id"`
	TeamAlias string         `json:"team_alias"`
	Metadata  map[string]any `json:"metadata"`
	Models    []string       `json:"models"`
	RPMLimit  *int64         `json:"rpm_limit"`
	TPMLimit  *int64         `json:"tpm_limit"`
	// MaxStorageBytes bounds the bytes of files and uploads the team may
	// hold (pkg/files counts them); nil or 0 means no bound.
	MaxStorageBytes *int64 `json:"max_storage_bytes"`
	Budget
	CreatedAt time.Time `json:"created_at"`
}

// Budget is what a key or a team may spend (pkg/spend enforces it):
// MaxBudget USD per BudgetDuration period (a LiteLLM duration: 30s, 1h,
// 1d, 30d; "" is one period that never resets), periods counted from the
// key's or team's creation; SoftBudget is the spend past which a warning
// is logged. nil: none.
type Budget struct {
	MaxBudget      *float64 `json:"max_budget"`
	BudgetDuration string   `json:"budget_duration"`
	SoftBudget     *float64 `json:"soft_budget"`
}

// Budgeted reports whether b caps or watches spend.
func (b Budget) Budgeted() bool { return b.MaxBudget != nil || b.SoftBudget != nil }

// KeyInfo is a virtual key as stored: everything but the key itself.
type KeyInfo struct {
	Token    string         `json:"token"`
	KeyAlias string         `json:"key_alias"`
	KeyName  string         `json:"key_name"` // a redacted hint: "sk-...abcd"
	TeamID   string         `json:"team_id"`
	Expires  *time.Time     `json:"expires"`
	Models   []string       `json:"models"`
	RPMLimit *int64         `json:"rpm_limit"`
	TPMLimit *int64         `json:"tpm_limit"`
	Metadata map[string]any `json:"metadata"`
	Budget
	CreatedAt time.Time `json:"created_at"`
	CreatedBy string    `json:"created_by"`
}

// Principal is who a request acts as: the admin (master key) or a team key.
type Principal struct {
	Admin  bool
	TeamID string // AdminTeam for the master key
	Key    *KeyInfo
	Team   *Team // nil for the admin
}

// KeyToken is the hash of the key the principal used ("" for the master key,
// which is never stored).
func (p Principal) KeyToken() string {
	if p.Key == nil {
		return ""
	}
	return p.Key.Token
}

// KeyAlias is the alias of the key used, if any.
func (p Principal) KeyAlias() string {
	if p.Key == nil {
		return ""
	}
	return p.Key.KeyAlias
}

// TeamAlias is the alias of the principal's team, if any.
func (p Principal) TeamAlias() string {
	if p.Team == nil {
		return ""
	}
	return p.Team.TeamAlias
}

// CanAccessTeam reports whether the principal may read and change teamID's resources.
func (p Principal) CanAccessTeam(teamID string) bool {
	return p.Admin || p.TeamID == teamID
}

// AllowsModel reports whether both the key and its team may use model.
// An empty list allows every model.
func (p Principal) AllowsModel(model string) bool {
	if p.Admin {
		return true
	}
	if p.Key != nil && !allows(p.Key.Models, model) {
		return false
	}
	return p.Team == nil || allows(p.Team.Models, model)
}

// RestrictsModels reports whether the key or its team is limited to some
// models (an empty list or "*" allows every model).
func (p Principal) RestrictsModels() bool {
	if p.Admin {
		return false
	}
	return p.Key != nil && restricts(p.Key.Models) || p.Team != nil && restricts(p.Team.Models)
}

func restricts(list []string) bool { return len(list) > 0 && !slices.Contains(list, "*") }

func allows(list []string, model string) bool {
	return len(list) == 0 || slices.Contains(list, model) || slices.Contains(list, "*")
}

func decode[T any](body []byte) (*T, error) {
	v := new(T)
	if err := json.Unmarshal(body, v); err != nil {
		return nil, err
	}
	return v, nil
}
