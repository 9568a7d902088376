// Package callbacks holds the team logging callbacks of ARCHITECTURE §7:
// where a team's callbacks are stored, and which teams listen for which
// outcomes — what the log-event emitter asks before it publishes an event.
// The settings API and the delivery to each destination build on it.
package callbacks

import (
	"context"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"time"

	"github.com/sluice-gateway/sluice/pkg/config"
	"github.com/sluice-gateway/sluice/pkg/logevent"
	"github.com/sluice-gateway/sluice/pkg/store"
)

// The destinations sluice delivers to, by LiteLLM's callback names.
const (
	Langfuse  = "langfuse"
	LangSmith = "langsmith"
	GCSBucket = "gcs_bucket"
)

// Names lists the callback names sluice delivers to.
func Names() []string { return []string{Langfuse, LangSmith, GCSBucket} }

// Callback types: the outcomes a callback receives.
const (
	TypeSuccess           = "success"
	TypeFailure           = "failure"
	TypeSuccessAndFailure = "success_and_failure"
)

// skPrefix starts the sort key of every callback record of a team.
const skPrefix = "CALLBACK#"

// RecordKey is where a team's callback of a name and type is stored: pk
// TEAM#<team>, sk CALLBACK#<name>#<type>, beside the team's own record.
func RecordKey(teamID, name, typ string) store.Key {
	return store.Key{PK: "TEAM#" + teamID, SK: skPrefix + name + "#" + typ}
}

// TeamQuery lists a team's callback records (Query it page by page).
func TeamQuery(teamID string) store.Query {
	return store.Query{PK: "TEAM#" + teamID, SKPrefix: skPrefix, Limit: 100}
}

// ParseKey reads a callback record's sort key back into its name and type.
func ParseKey(sk string) (name, typ string, ok bool) {
	rest, ok := strings.CutPrefix(sk, skPrefix)
	if !ok {
		return "", "", false
	}
	i := strings.LastIndexByte(rest, '#')
	if i <= 0 || i == len(rest)-1 {
		return "", "", false
	}
	return rest[:i], rest[i+1:], true
}

// outcomes says which statuses someone listens for.
type outcomes struct{ success, failure bool }

func (o *outcomes) add(typ string) {
	switch typ {
	case TypeSuccess:
		o.success = true
	case TypeFailure:
		o.failure = true
	case TypeSuccessAndFailure:
		o.success, o.failure = true, true
	}
}

func (o outcomes) wants(status string) bool {
	if status == logevent.StatusFailure {
		return o.failure
	}
	return o.success
}

// Defaults of Options.
const (
	DefaultTTL        = 30 * time.Second
	DefaultMaxEntries = 10000
)

// Options tune Listeners.
type Options struct {
	// TTL is how long a team's answer is kept (the delay before a settings
	// change made in another container is seen); 0 is DefaultTTL.
	TTL time.Duration
	// MaxEntries bounds the cache; 0 is DefaultMaxEntries.
	MaxEntries int
	// Now is the clock; nil is time.Now.
	Now func() time.Time
}

// Listeners answers the emitter's question — does anyone want this event? —
// from the gateway-wide callbacks of the config and each team's callback
// records, which it caches for a short time per team (both answers, yes and
// no: most teams have none). It implements logevent.Listeners.
type Listeners struct {
	records store.Records
	global  outcomes
	opts    Options

	mu    sync.Mutex
	cache map[string]entry
}

type entry struct {
	outcomes
	expires time.Time
}

// NewListeners builds the listeners over the team records in records and
// the gateway-wide callbacks of cfg.
func NewListeners(records store.Records, cfg *config.Config, opts Options) *Listeners {
	if opts.TTL <= 0 {
		opts.TTL = DefaultTTL
	}
	if opts.MaxEntries <= 0 {
		opts.MaxEntries = DefaultMaxEntries
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	l := &Listeners{records: records, opts: opts, cache: map[string]entry{}}
	for _, c := range GatewayCallbacks(cfg) {
		l.global.add(c.Type)
	}
	return l
}

// Listening reports whether a gateway-wide callback, or one of teamID's,
// wants events of status.
func (l *Listeners) Listening(ctx context.Context, teamID, status string) (bool, error) {
	if l.global.wants(status) {
		return true, nil
	}
	if teamID == "" {
		return false, nil
	}
	now := l.opts.Now()
	l.mu.Lock()
	e, ok := l.cache[teamID]
	l.mu.Unlock()
	if ok && now.Before(e.expires) {
		return e.wants(status), nil
	}
	o, err := l.load(ctx, teamID)
	if err != nil {
		return false, err
	}
	l.mu.Lock()
	if len(l.cache) >= l.opts.MaxEntries {
		clear(l.cache) // rare: more teams calling than the bound; they reload
	}
	l.cache[teamID] = entry{outcomes: o, expires: now.Add(l.opts.TTL)}
	l.mu.Unlock()
	return o.wants(status), nil
}

// Forget drops teamID's cached answer, so a change to its callbacks counts
// from the next event (the local process calls it on every write).
func (l *Listeners) Forget(teamID string) {
	l.mu.Lock()
	delete(l.cache, teamID)
	l.mu.Unlock()
}

// load reads which outcomes teamID's callback records listen for.
func (l *Listeners) load(ctx context.Context, teamID string) (outcomes, error) {
	var o outcomes
	q := TeamQuery(teamID)
	for {
		page, err := l.records.Query(ctx, q)
		if err != nil {
			return o, fmt.Errorf("read callbacks of team %s: %w", teamID, err)
		}
		for _, r := range page.Records {
			if _, typ, ok := ParseKey(r.Key.SK); ok {
				o.add(typ)
			}
		}
		if !page.More || len(page.Records) == 0 || o.success && o.failure {
			return o, nil
		}
		q.After = page.Records[len(page.Records)-1].Key.SK
	}
}

// Callback is a configured callback: a destination and the outcomes it
// receives.
type Callback struct {
	Name string
	Type string
}

// GatewayCallbacks reads the gateway-wide callbacks of the config, in
// LiteLLM's form: litellm_settings.success_callback, failure_callback and
// callbacks (both), each a list of names. Names sluice does not deliver to
// (LiteLLM has many more) are logged and left out.
func GatewayCallbacks(cfg *config.Config) []Callback {
	if cfg == nil {
		return nil
	}
	var out []Callback
	for _, f := range []struct{ key, typ string }{
		{"success_callback", TypeSuccess}, {"failure_callback", TypeFailure}, {"callbacks", TypeSuccessAndFailure},
	} {
		for _, name := range names(cfg.LiteLLMSettings[f.key]) {
			if !known(name) {
				slog.Warn("litellm_settings names a callback sluice does not deliver to; ignored", "setting", f.key, "callback", name)
				continue
			}
			out = append(out, Callback{Name: name, Type: f.typ})
		}
	}
	return out
}

// names reads a YAML list of strings (or one string).
func names(v any) []string {
	switch v := v.(type) {
	case string:
		return []string{v}
	case []any:
		var out []string
		for _, x := range v {
			if s, ok := x.(string); ok {
				out = append(out, s)
			}
		}
		return out
	}
	return nil
}

func known(name string) bool {
	for _, n := range Names() {
		if n == name {
			return true
		}
	}
	return false
}
