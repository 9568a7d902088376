package auth

import (
	"context"
	"crypto/subtle"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"regexp"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/sluice-gateway/sluice/pkg/api"
	"github.com/sluice-gateway/sluice/pkg/store"
	"github.com/sluice-gateway/sluice/pkg/store/sortkey"
)

// Options tune a Service.
type Options struct {
	CacheTTL         time.Duration // how long a found key is trusted without a lookup
	NegativeCacheTTL time.Duration // how long an unknown key is remembered as unknown
	Now              func() time.Time
	// ResolveMasterKey, when set and no master key is given, supplies it on
	// first use (a secret read only once a request needs it, so functions
	// that never authenticate need no access to it). A failure is retried
	// on the next request.
	ResolveMasterKey func(ctx context.Context) (string, error)
}

// Service authenticates keys and manages teams and keys.
type Service struct {
	records store.Records
	limiter store.Limiter
	cache   *keyCache
	opts    Options

	masterMu   sync.Mutex             // serialises resolving the master key
	masterHash atomic.Pointer[string] // nil until resolved
}

// NewService builds the service. masterKey must be non-empty unless
// opts.ResolveMasterKey supplies it.
func NewService(records store.Records, limiter store.Limiter, masterKey string, opts Options) (*Service, error) {
	if masterKey == "" && opts.ResolveMasterKey == nil {
		return nil, errors.New("auth: a master key is required")
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	s := &Service{records: records, limiter: limiter, cache: newKeyCache(opts.Now, maxCacheEntries), opts: opts}
	if masterKey != "" {
		h := Token(masterKey)
		s.masterHash.Store(&h)
	}
	return s, nil
}

// master returns the master key's hash, resolving the key on first use.
func (s *Service) master(ctx context.Context) (string, error) {
	if h := s.masterHash.Load(); h != nil {
		return *h, nil
	}
	s.masterMu.Lock()
	defer s.masterMu.Unlock()
	if h := s.masterHash.Load(); h != nil {
		return *h, nil
	}
	k, err := s.opts.ResolveMasterKey(ctx)
	if err == nil && k == "" {
		err = errors.New("the master key resolved to an empty value")
	}
	if err != nil {
		e := api.Unavailable("Keys cannot be checked right now: the master key could not be read.")
		e.Err = fmt.Errorf("resolve master key: %w", err)
		return "", e
	}
	h := Token(k)
	s.masterHash.Store(&h)
	return h, nil
}

func keyRecordKey(token string) store.Key { return store.Key{PK: "KEY#" + token, SK: "KEY"} }
func teamRecordKey(id string) store.Key   { return store.Key{PK: "TEAM#" + id, SK: "TEAM"} }

// Authenticate resolves a raw key to its principal. Unknown, expired and
// deleted keys are 401.
func (s *Service) Authenticate(ctx context.Context, key string) (Principal, error) {
	if key == "" {
		return Principal{}, api.Unauthorized("No API key provided. Pass your sluice key as 'Authorization: Bearer <key>'.")
	}
	// A key met before is found without hashing it (see keyCache). The
	// master key is never cached, so it always reaches the check below.
	if e, ok := s.cache.getKey(key); ok {
		return e.principal, e.err
	}
	var t token
	t.of(key)
	masterHash, err := s.master(ctx)
	if err != nil {
		return Principal{}, err
	}
	if subtle.ConstantTimeCompare(t[:], []byte(masterHash)) == 1 {
		return Principal{Admin: true, TeamID: AdminTeam}, nil
	}
	// A cached key needs no string of its token: the cached principal
	// has it.
	if e, ok := s.cache.getBytes(t[:], key); ok {
		return e.principal, e.err
	}
	return s.principalOf(ctx, string(t[:]), key)
}

// PrincipalOf resolves a stored key, named by its token (the hash of the
// key, never the key), to its principal as Authenticate does — through the
// same cache, with the same answers: a key deleted or expired since, or
// whose team is gone, is a 401. The batch engine runs each line as the key
// that created the batch through it.
func (s *Service) PrincipalOf(ctx context.Context, token string) (Principal, error) {
	return s.principalOf(ctx, token, "")
}

// principalOf is PrincipalOf for token, met as key when Authenticate
// resolves a raw key ("" otherwise).
func (s *Service) principalOf(ctx context.Context, token, key string) (Principal, error) {
	if e, ok := s.cache.get(token); ok {
		return e.principal, e.err
	}
	p, err := s.lookup(ctx, token)
	var apiErr *api.Error
	switch {
	case err == nil:
		ttl := s.opts.CacheTTL
		if exp := p.Key.Expires; exp != nil && exp.Sub(s.opts.Now()) < ttl {
			ttl = exp.Sub(s.opts.Now())
		}
		s.cache.put(token, key, cacheEntry{principal: p}, ttl)
	case errors.As(err, &apiErr) && apiErr.Status == 401:
		s.cache.put(token, key, cacheEntry{err: err}, s.opts.NegativeCacheTTL)
	}
	return p, err
}

func (s *Service) lookup(ctx context.Context, token string) (Principal, error) {
	rec, err := s.records.Get(ctx, keyRecordKey(token))
	if errors.Is(err, store.ErrNotFound) {
		return Principal{}, api.Unauthorized("Invalid API key: it is unknown, expired or deleted.")
	}
	if err != nil {
		return Principal{}, fmt.Errorf("look up key: %w", err)
	}
	info, err := decode[KeyInfo](rec.Body)
	if err != nil {
		return Principal{}, fmt.Errorf("decode key record: %w", err)
	}
	if info.Expires != nil && !s.opts.Now().Before(*info.Expires) {
		return Principal{}, api.Unauthorized("Invalid API key: it expired at %s.", info.Expires.Format(time.RFC3339))
	}
	team, err := s.team(ctx, info.TeamID)
	if err != nil {
		if errors.Is(err, store.ErrNotFound) {
			return Principal{}, api.Unauthorized("Invalid API key: its team no longer exists.")
		}
		return Principal{}, err
	}
	return Principal{TeamID: info.TeamID, Key: info, Team: team}, nil
}

func (s *Service) team(ctx context.Context, id string) (*Team, error) {
	rec, err := s.records.Get(ctx, teamRecordKey(id))
	if err != nil {
		return nil, fmt.Errorf("get team %s: %w", id, err)
	}
	t, err := decode[Team](rec.Body)
	if err != nil {
		return nil, fmt.Errorf("decode team %s: %w", id, err)
	}
	return t, nil
}

var teamIDPattern = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9_.\-]{0,63}$`)

// NewTeam is the body of POST /team/new.
type NewTeam struct {
	TeamID    string         `json:"team_id"`
	TeamAlias string         `json:"team_alias"`
	Metadata  map[string]any `json:"metadata"`
	Models    []string       `json:"models"`
	RPMLimit  *int64         `json:"rpm_limit"`
	TPMLimit  *int64         `json:"tpm_limit"`
	// MaxStorageBytes is the team's storage quota (files and uploads);
	// absent, null or 0: none.
	MaxStorageBytes *int64 `json:"max_storage_bytes"`
	Budget
}

// CreateTeam stores a new team. A team_id already taken is a 409.
func (s *Service) CreateTeam(ctx context.Context, in NewTeam, teamID string) (*Team, error) {
	if in.TeamID != "" {
		teamID = in.TeamID
	}
	switch {
	case !teamIDPattern.MatchString(teamID):
		return nil, api.InvalidValue("team_id", "team_id must be 1 to 64 letters, digits, '.', '_' or '-', starting with a letter or digit.")
	case teamID == AdminTeam:
		return nil, api.InvalidValue("team_id", "team_id %q is reserved.", AdminTeam)
	}
	if err := checkLimits(in.RPMLimit, in.TPMLimit); err != nil {
		return nil, err
	}
	if in.MaxStorageBytes != nil && *in.MaxStorageBytes < 0 {
		return nil, api.InvalidValue("max_storage_bytes", "max_storage_bytes must not be negative (0 or null: no quota).")
	}
	if err := checkBudget(in.Budget); err != nil {
		return nil, err
	}
	t := &Team{
		TeamID: teamID, TeamAlias: in.TeamAlias, Metadata: in.Metadata,
		Models: nonNil(in.Models), RPMLimit: in.RPMLimit, TPMLimit: in.TPMLimit,
		MaxStorageBytes: in.MaxStorageBytes, Budget: in.Budget,
		CreatedAt: s.opts.Now().UTC().Truncate(time.Millisecond),
	}
	if t.Metadata == nil {
		t.Metadata = map[string]any{}
	}
	body, err := json.Marshal(t)
	if err != nil {
		return nil, fmt.Errorf("encode team: %w", err)
	}
	rec := store.Record{
		Key:  teamRecordKey(teamID),
		GSI1: store.IndexKey{PK: "TEAMS", SK: sortkey.Time(t.CreatedAt) + "#" + teamID},
		Body: body,
	}
	if err := s.records.Put(ctx, rec, store.Cond{Absent: true}); err != nil {
		if errors.Is(err, store.ErrConditionFailed) {
			return nil, api.Conflict("A team with team_id %q already exists.", teamID)
		}
		return nil, fmt.Errorf("store team %s: %w", teamID, err)
	}
	return t, nil
}

// Team returns a team the principal may see (404 otherwise).
func (s *Service) Team(ctx context.Context, p Principal, id string) (*Team, error) {
	if id == "" {
		return nil, api.MissingParam("team_id")
	}
	if !p.CanAccessTeam(id) {
		return nil, api.NotFound("Team %q not found.", id)
	}
	t, err := s.team(ctx, id)
	if errors.Is(err, store.ErrNotFound) {
		return nil, api.NotFound("Team %q not found.", id)
	}
	return t, err
}

// Teams lists every team, oldest first.
func (s *Service) Teams(ctx context.Context) ([]*Team, error) {
	var teams []*Team
	q := store.Query{Index: store.GSI1, PK: "TEAMS", Limit: 1000}
	err := s.listIndex(ctx, q, "", func() { teams = nil }, func(rec store.Record) error {
		t, err := decode[Team](rec.Body)
		if err != nil {
			return fmt.Errorf("decode team %s: %w", rec.Key.PK, err)
		}
		teams = append(teams, t)
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("list teams: %w", err)
	}
	return teams, nil
}

// NewKeyRequest is the body of POST /key/generate.
type NewKeyRequest struct {
	TeamID   string         `json:"team_id"`
	KeyAlias string         `json:"key_alias"`
	Duration string         `json:"duration"`
	Models   []string       `json:"models"`
	RPMLimit *int64         `json:"rpm_limit"`
	TPMLimit *int64         `json:"tpm_limit"`
	Metadata map[string]any `json:"metadata"`
	Budget
}

// GeneratedKey is the answer to POST /key/generate: the only time the raw
// key is shown.
type GeneratedKey struct {
	Key      string         `json:"key"`
	Token    string         `json:"token"`
	KeyAlias string         `json:"key_alias"`
	TeamID   string         `json:"team_id"`
	Expires  *time.Time     `json:"expires"`
	Models   []string       `json:"models"`
	RPMLimit *int64         `json:"rpm_limit"`
	TPMLimit *int64         `json:"tpm_limit"`
	Metadata map[string]any `json:"metadata"`
	Budget
}

// GenerateKey creates a virtual key for an existing team.
func (s *Service) GenerateKey(ctx context.Context, in NewKeyRequest, createdBy string) (*GeneratedKey, error) {
	if in.TeamID == "" {
		return nil, api.MissingParam("team_id")
	}
	if _, err := s.team(ctx, in.TeamID); err != nil {
		if errors.Is(err, store.ErrNotFound) {
			return nil, api.InvalidValue("team_id", "Team %q does not exist; create it with POST /team/new first.", in.TeamID)
		}
		return nil, err
	}
	if err := checkLimits(in.RPMLimit, in.TPMLimit); err != nil {
		return nil, err
	}
	if err := checkBudget(in.Budget); err != nil {
		return nil, err
	}
	// The list's sort key takes the full clock: keys made within one
	// millisecond still list in the order they were made.
	made := s.opts.Now().UTC()
	now := made.Truncate(time.Millisecond)
	var expires *time.Time
	if in.Duration != "" {
		d, err := ParseDuration(in.Duration)
		if err != nil {
			return nil, api.InvalidValue("duration", "Invalid duration %q: use a positive number followed by s, m, h or d (e.g. 30d).", in.Duration)
		}
		e := now.Add(d)
		expires = &e
	}
	key := NewKey()
	info := &KeyInfo{
		Token: Token(key), KeyAlias: in.KeyAlias, KeyName: KeyPrefix + "..." + key[len(key)-4:],
		TeamID: in.TeamID, Expires: expires, Models: nonNil(in.Models),
		RPMLimit: in.RPMLimit, TPMLimit: in.TPMLimit, Metadata: in.Metadata, Budget: in.Budget,
		CreatedAt: now, CreatedBy: createdBy,
	}
	if info.Metadata == nil {
		info.Metadata = map[string]any{}
	}
	body, err := json.Marshal(info)
	if err != nil {
		return nil, fmt.Errorf("encode key: %w", err)
	}
	rec := store.Record{
		Key:  keyRecordKey(info.Token),
		GSI1: store.IndexKey{PK: "TEAM#" + in.TeamID, SK: "KEY#" + sortkey.Time(made) + "#" + info.Token},
		Body: body,
	}
	if expires != nil {
		rec.ExpiresAt = *expires
	}
	if err := s.records.Put(ctx, rec, store.Cond{Absent: true}); err != nil {
		return nil, fmt.Errorf("store key: %w", err)
	}
	return &GeneratedKey{
		Key: key, Token: info.Token, KeyAlias: info.KeyAlias, TeamID: info.TeamID, Expires: expires,
		Models: info.Models, RPMLimit: info.RPMLimit, TPMLimit: info.TPMLimit, Metadata: info.Metadata,
		Budget: info.Budget,
	}, nil
}

// KeyInfo returns a key's stored info: the admin may read any key, a team
// key only itself.
func (s *Service) KeyInfo(ctx context.Context, p Principal, keyOrToken string) (*KeyInfo, error) {
	if keyOrToken == "" {
		if p.Key == nil {
			return nil, api.MissingParam("key")
		}
		keyOrToken = p.Key.Token
	}
	token := tokenOf(keyOrToken)
	if !p.Admin && p.KeyToken() != token {
		return nil, api.NotFound("Key not found.")
	}
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
	return info, nil
}

// MaxKeyListSize bounds one page of Keys.
const MaxKeyListSize = 1000

// KeyPage is one page of a team's keys, newest last (LiteLLM's /key/list
// with return_full_object: the stored info, never the key itself).
type KeyPage struct {
	Keys        []*KeyInfo `json:"keys"`
	TotalCount  int        `json:"total_count"`
	CurrentPage int        `json:"current_page"`
	TotalPages  int        `json:"total_pages"`
}

// Keys lists team id's keys, page page (from 1) of size: the admin may list
// any team's, a team key only its own team's.
func (s *Service) Keys(ctx context.Context, p Principal, id string, page, size int) (*KeyPage, error) {
	if id == "" {
		return nil, api.MissingParam("team_id")
	}
	if !p.CanAccessTeam(id) {
		return nil, api.NotFound("Team %q not found.", id)
	}
	if _, err := s.team(ctx, id); err != nil {
		if errors.Is(err, store.ErrNotFound) {
			return nil, api.NotFound("Team %q not found.", id)
		}
		return nil, err
	}
	out := &KeyPage{Keys: []*KeyInfo{}, CurrentPage: page}
	first := (page - 1) * size
	q := store.Query{Index: store.GSI1, PK: "TEAM#" + id, SKPrefix: "KEY#", Limit: MaxKeyListSize}
	reset := func() { out.Keys, out.TotalCount = out.Keys[:0], 0 }
	err := s.listIndex(ctx, q, "KEY#", reset, func(rec store.Record) error {
		if out.TotalCount >= first && len(out.Keys) < size {
			k, err := decode[KeyInfo](rec.Body)
			if err != nil {
				return fmt.Errorf("decode key %s: %w", rec.Key.PK, err)
			}
			out.Keys = append(out.Keys, k)
		}
		out.TotalCount++
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("list keys of %s: %w", id, err)
	}
	out.TotalPages = (out.TotalCount + size - 1) / size
	return out, nil
}

// DeleteKeys deletes keys given raw or as tokens and returns what it deleted,
// in the form given. Unknown keys are a 404 naming them; nothing is deleted then.
func (s *Service) DeleteKeys(ctx context.Context, keys []string) ([]string, error) {
	if len(keys) == 0 {
		return nil, api.MissingParam("keys")
	}
	var missing []string
	for _, k := range keys {
		if _, err := s.records.Get(ctx, keyRecordKey(tokenOf(k))); err != nil {
			if !errors.Is(err, store.ErrNotFound) {
				return nil, fmt.Errorf("get key: %w", err)
			}
			missing = append(missing, redact(k))
		}
	}
	if len(missing) > 0 {
		return nil, api.NotFound("Keys not found: %s.", strings.Join(missing, ", "))
	}
	deleted := make([]string, 0, len(keys))
	for _, k := range keys {
		token := tokenOf(k)
		if err := s.records.Delete(ctx, keyRecordKey(token), store.Cond{}); err != nil {
			return deleted, fmt.Errorf("delete key: %w", err)
		}
		s.cache.drop(token)
		deleted = append(deleted, k)
	}
	return deleted, nil
}

// redact shortens a key or token for an error message.
func redact(k string) string {
	if len(k) <= 8 {
		return "****"
	}
	return k[:3] + "..." + k[len(k)-4:]
}

// ParseDuration parses LiteLLM's key durations: a positive integer followed
// by s, m, h or d.
func ParseDuration(s string) (time.Duration, error) {
	if len(s) < 2 {
		return 0, fmt.Errorf("duration %q too short", s)
	}
	var unit time.Duration // a switch, not a map literal: budgets parse it on every call
	switch s[len(s)-1] {
	case 's':
		unit = time.Second
	case 'm':
		unit = time.Minute
	case 'h':
		unit = time.Hour
	case 'd':
		unit = 24 * time.Hour
	}
	if unit == 0 {
		return 0, fmt.Errorf("duration %q: unknown unit", s)
	}
	var n int64
	for _, c := range s[:len(s)-1] {
		if c < '0' || c > '9' {
			return 0, fmt.Errorf("duration %q: not a number", s)
		}
		n = n*10 + int64(c-'0')
		if n > int64(100*365*24*time.Hour/unit) {
			return 0, fmt.Errorf("duration %q: too long", s)
		}
	}
	if n == 0 {
		return 0, fmt.Errorf("duration %q: must be positive", s)
	}
	return time.Duration(n) * unit, nil
}

// checkBudget checks budget fields as /key/generate, /team/new and the
// updates take them.
func checkBudget(b Budget) error {
	for _, f := range []struct {
		name string
		v    *float64
	}{{"max_budget", b.MaxBudget}, {"soft_budget", b.SoftBudget}} {
		if f.v != nil && (*f.v < 0 || math.IsNaN(*f.v) || math.IsInf(*f.v, 0)) {
			return api.InvalidValue(f.name, "%s must be a non-negative number of USD (null: none).", f.name)
		}
	}
	if b.BudgetDuration != "" {
		if _, err := ParseDuration(b.BudgetDuration); err != nil {
			return api.InvalidValue("budget_duration", "Invalid budget_duration %q: use a positive number followed by s, m, h or d (e.g. 30d).", b.BudgetDuration)
		}
	}
	return nil
}

func checkLimits(rpm, tpm *int64) error {
	if rpm != nil && *rpm < 0 {
		return api.InvalidValue("rpm_limit", "rpm_limit must not be negative.")
	}
	if tpm != nil && *tpm < 0 {
		return api.InvalidValue("tpm_limit", "tpm_limit must not be negative.")
	}
	return nil
}

func nonNil(s []string) []string {
	if s == nil {
		return []string{}
	}
	return slices.Clone(s)
}
