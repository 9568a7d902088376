// Package callbacks owns team logging callbacks: the settings a team keeps
// (validated per destination family, secrets sealed at rest and masked in
// every answer, every change in the team's audit trail), the Catalog that
// serves a team's callbacks to the emitter and the delivery side, and the
// Guard that keeps team-supplied destinations off private networks. The
// destinations themselves live in subpackages (langfuse, langsmith,
// gcsbucket) and the delivery worker in delivery.
package callbacks

import (
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"time"
)

// Callback names (LiteLLM's).
const (
	Langfuse  = "langfuse"
	LangSmith = "langsmith"
	GCSBucket = "gcs_bucket"
)

// Callback types: which outcomes a callback receives.
const (
	TypeSuccess           = "success"
	TypeFailure           = "failure"
	TypeSuccessAndFailure = "success_and_failure"
)

// callback_vars keys, as LiteLLM's StandardCallbackDynamicParams names them.
const (
	VarLangfusePublicKey     = "langfuse_public_key"
	VarLangfuseSecretKey     = "langfuse_secret_key"
	VarLangfuseSecret        = "langfuse_secret" // older alias of langfuse_secret_key
	VarLangfuseHost          = "langfuse_host"
	VarGCSBucketName         = "gcs_bucket_name"
	VarGCSServiceAccount     = "gcs_path_service_account"
	VarLangSmithAPIKey       = "langsmith_api_key"
	VarLangSmithProject      = "langsmith_project"
	VarLangSmithBaseURL      = "langsmith_base_url"
	VarTurnOffMessageLogging = "turn_off_message_logging"
)

// Defaults of optional vars, as LiteLLM's.
const (
	DefaultLangfuseHost     = "https://cloud.langfuse.com"
	DefaultLangSmithBaseURL = "https://api.smith.langchain.com"
	DefaultLangSmithProject = "litellm-completion"
)

// Masked stands in for a secret in every answer.
const Masked = "***REDACTED***"

// family describes the callback_vars a callback name takes.
type family struct {
	vars     []string // the keys it accepts besides turn_off_message_logging
	required [][]string
	secrets  []string // sealed at rest, masked in answers
}

var families = map[string]family{
	Langfuse: {
		vars:     []string{VarLangfusePublicKey, VarLangfuseSecretKey, VarLangfuseSecret, VarLangfuseHost},
		required: [][]string{{VarLangfusePublicKey}, {VarLangfuseSecretKey, VarLangfuseSecret}},
		secrets:  []string{VarLangfuseSecretKey, VarLangfuseSecret},
	},
	LangSmith: {
		vars:     []string{VarLangSmithAPIKey, VarLangSmithProject, VarLangSmithBaseURL},
		required: [][]string{{VarLangSmithAPIKey}},
		secrets:  []string{VarLangSmithAPIKey},
	},
	GCSBucket: {
		vars:     []string{VarGCSBucketName, VarGCSServiceAccount},
		required: [][]string{{VarGCSBucketName}, {VarGCSServiceAccount}},
		secrets:  []string{VarGCSServiceAccount},
	},
}

// Names lists the callback names, sorted.
func Names() []string { return slices.Sorted(maps.Keys(families)) }

var types = []string{TypeSuccess, TypeFailure, TypeSuccessAndFailure}

// isSecret reports whether a var is sealed and masked.
func isSecret(name, v string) bool { return slices.Contains(families[name].secrets, v) }

// Receives reports whether a callback of type typ receives an event of
// status (logevent.StatusSuccess or StatusFailure).
func Receives(typ, status string) bool {
	return typ == TypeSuccessAndFailure || typ == status
}

// Callback is one configured callback: a team's, as stored (its vars in
// clear except the secrets, which stay sealed until Open), or a gateway-wide
// one of the config (Gateway; TeamID empty; every var in Vars, secret
// references resolved by Open).
type Callback struct {
	TeamID string
	Name   string
	Type   string
	// Gateway marks a gateway-wide callback (GatewayCallbacks): it receives
	// every team's events.
	Gateway bool
	// Vars holds the non-secret vars (hosts, project, bucket,
	// turn_off_message_logging).
	Vars map[string]string
	// Sealed is the store.Sealer envelope of the secret vars (a JSON object),
	// sealed with SealContext; SecretNames names them.
	Sealed      []byte
	SecretNames []string
	// Version is the record's version: it changes whenever the callback is
	// replaced, so caches keyed by it never serve stale credentials.
	Version   int64
	CreatedAt time.Time
}

// ID names the callback among those an event can go to: "<name>#<type>",
// as in a team callback's sort key; "gateway:<name>#<type>" for a
// gateway-wide one.
func (c Callback) ID() string {
	if c.Gateway {
		return "gateway:" + c.Name + "#" + c.Type
	}
	return c.Name + "#" + c.Type
}

// SealContext is the encryption context of a callback's secrets: the team
// and the callback, so a sealed value copied to another team or callback
// does not open.
func SealContext(teamID, name, typ string) map[string]string {
	return map[string]string{"team_id": teamID, "callback": name + "#" + typ}
}

// TurnOffMessageLogging reports whether the callback must not receive the
// request and response contents.
func (c Callback) TurnOffMessageLogging() bool {
	b, _ := strconv.ParseBool(c.Vars[VarTurnOffMessageLogging])
	return b
}

// Record layout (ARCHITECTURE §4): a team's callbacks and audit entries live
// in the team's partition.
const (
	callbackPrefix = "CALLBACK#"
	auditPrefix    = "AUDIT#"
)

func teamPK(teamID string) string        { return "TEAM#" + teamID }
func callbackSK(name, typ string) string { return callbackPrefix + name + "#" + typ }

// storedCallback is a callback record's body.
type storedCallback struct {
	Name   string            `json:"callback_name"`
	Type   string            `json:"callback_type"`
	Vars   map[string]string `json:"callback_vars"`
	Sealed []byte            `json:"sealed_vars,omitempty"`
	// SecretNames lists the vars Sealed holds, so answers can show them
	// masked without opening them.
	SecretNames []string  `json:"secret_names,omitempty"`
	CreatedAt   time.Time `json:"created_at"`
	CreatedBy   string    `json:"created_by"`
}

// parseCallbackSK splits "CALLBACK#<name>#<type>".
func parseCallbackSK(sk string) (name, typ string, ok bool) {
	rest, ok := strings.CutPrefix(sk, callbackPrefix)
	if !ok {
		return "", "", false
	}
	name, typ, ok = strings.Cut(rest, "#")
	return name, typ, ok
}

func decodeCallback(teamID string, sk string, version int64, body []byte) (Callback, error) {
	var s storedCallback
	if err := json.Unmarshal(body, &s); err != nil {
		return Callback{}, fmt.Errorf("decode callback %s of team %s: %w", sk, teamID, err)
	}
	name, typ, ok := parseCallbackSK(sk)
	if !ok || name != s.Name || typ != s.Type {
		return Callback{}, fmt.Errorf("callback record %s of team %s names %s#%s", sk, teamID, s.Name, s.Type)
	}
	return Callback{TeamID: teamID, Name: s.Name, Type: s.Type, Vars: s.Vars, Sealed: s.Sealed,
		SecretNames: s.SecretNames, Version: version, CreatedAt: s.CreatedAt}, nil
}

// View is a callback as answers show it: secrets masked.
type View struct {
	Name string            `json:"callback_name"`
	Type string            `json:"callback_type"`
	Vars map[string]string `json:"callback_vars"`
	// Delivery is the callback's delivery health: set by
	// GET /team/{team_id}/callback, absent from the audit trail.
	Delivery *Delivery `json:"delivery,omitempty"`
}

// View returns c as answers show it: every secret it holds as Masked.
func (c Callback) View() View {
	vars := maps.Clone(c.Vars)
	if vars == nil {
		vars = map[string]string{}
	}
	for _, k := range c.SecretNames {
		vars[k] = Masked
	}
	return View{Name: c.Name, Type: c.Type, Vars: vars}
}

// TeamCallbacks is the answer of GET /team/{team_id}/callback (LiteLLM's
// shape, plus the list of callbacks it folds together).
type TeamCallbacks struct {
	TeamID           string   `json:"team_id"`
	SuccessCallbacks []string `json:"success_callbacks"`
	FailureCallbacks []string `json:"failure_callbacks"`
	// CallbackVars folds every callback's vars into one object, as LiteLLM
	// does; secrets masked.
	CallbackVars map[string]string `json:"callback_vars"`
	// Callbacks lists each callback with its own vars.
	Callbacks []View `json:"callbacks"`
}

func newTeamCallbacks(teamID string, views []View) *TeamCallbacks {
	t := &TeamCallbacks{TeamID: teamID, SuccessCallbacks: []string{}, FailureCallbacks: []string{},
		CallbackVars: map[string]string{}, Callbacks: views}
	if t.Callbacks == nil {
		t.Callbacks = []View{}
	}
	for _, v := range views {
		if Receives(v.Type, TypeSuccess) && !slices.Contains(t.SuccessCallbacks, v.Name) {
			t.SuccessCallbacks = append(t.SuccessCallbacks, v.Name)
		}
		if Receives(v.Type, TypeFailure) && !slices.Contains(t.FailureCallbacks, v.Name) {
			t.FailureCallbacks = append(t.FailureCallbacks, v.Name)
		}
		maps.Copy(t.CallbackVars, v.Vars)
	}
	return t
}
