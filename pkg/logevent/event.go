// Package logevent defines the log event every model call produces — the
// fields of LiteLLM's StandardLoggingPayload, so logging destinations see what
// they already know — and the Emitter that publishes it on the bus.
package logevent

import (
	"encoding/json"
	"time"
)

// Call types, as LiteLLM names them.
const (
	CallEmbedding      = "aembedding"
	CallModeration     = "amoderation"
	CallCompletion     = "acompletion"
	CallTextCompletion = "atext_completion"
	CallResponses      = "aresponses"
	CallPassthrough    = "pass_through_endpoint"
	// CallBudgetAlert is no model call: a key's or team's spend crossed
	// its soft_budget (the event's BudgetAlert says which).
	CallBudgetAlert = "budget_alert"
)

// Outcomes.
const (
	StatusSuccess = "success"
	StatusFailure = "failure"
)

// Event is one model call's log record (StandardLoggingPayload-compatible).
type Event struct {
	ID                  string          `json:"id"`
	TraceID             string          `json:"trace_id"`
	CallType            string          `json:"call_type"`
	Stream              bool            `json:"stream"`
	ResponseCost        float64         `json:"response_cost"`
	Status              string          `json:"status"`
	CustomLLMProvider   string          `json:"custom_llm_provider,omitempty"`
	TotalTokens         int64           `json:"total_tokens"`
	PromptTokens        int64           `json:"prompt_tokens"`
	CompletionTokens    int64           `json:"completion_tokens"`
	StartTime           float64         `json:"startTime"`
	EndTime             float64         `json:"endTime"`
	CompletionStartTime float64         `json:"completionStartTime"`
	ResponseTime        float64         `json:"response_time"`
	Model               string          `json:"model"`
	ModelID             string          `json:"model_id,omitempty"`
	ModelGroup          string          `json:"model_group,omitempty"`
	APIBase             string          `json:"api_base,omitempty"`
	Metadata            Metadata        `json:"metadata"`
	RequestTags         []string        `json:"request_tags"`
	EndUser             string          `json:"end_user,omitempty"`
	Messages            json.RawMessage `json:"messages,omitempty"`
	Response            json.RawMessage `json:"response,omitempty"`
	// ModelParameters are the request's parameters as one JSON object,
	// as encoding/json writes a map of them (Params builds it).
	ModelParameters  json.RawMessage `json:"model_parameters,omitempty"`
	ErrorStr         string          `json:"error_str,omitempty"`
	ErrorInformation *ErrorInfo      `json:"error_information,omitempty"`

	// Passthrough carries the raw HTTP exchange of a passthrough call.
	Passthrough *Passthrough `json:"passthrough,omitempty"`
	// FinishReason is why the answer ended (its first choice's
	// finish_reason: stop, length, tool_calls, content_filter; a response's
	// status), when the answer says.
	FinishReason string `json:"finish_reason,omitempty"`
	// UsageEstimated is true when the provider reported no usage and sluice
	// estimated the token counts.
	UsageEstimated bool `json:"usage_estimated,omitempty"`
	// CostUnknown is true when no price is known for the call's model: its
	// ResponseCost of 0 is not a price (pkg/spend).
	CostUnknown bool `json:"cost_unknown,omitempty"`
	// CostEstimated is true when ResponseCost was counted from estimated
	// token counts (UsageEstimated: a stream cut before its usage came).
	CostEstimated bool `json:"estimated,omitempty"`
	// CachedTokens are the prompt tokens read from the provider's cache
	// (priced at the cached-input price), when the usage says.
	CachedTokens int64 `json:"cached_tokens,omitempty"`
	// NativeBatch marks a line of a provider-run batch: it is priced at
	// the batch prices.
	NativeBatch bool `json:"native_batch,omitempty"`
	// BudgetAlert is set on a CallBudgetAlert event: it costs nothing and
	// is no request (the spend counters skip it).
	BudgetAlert *BudgetAlert `json:"budget_alert,omitempty"`
	// ClaimCheck points at the blob holding Messages and Response when they
	// were too large to travel on the bus.
	ClaimCheck string `json:"claim_check,omitempty"`
}

// BudgetAlert is a soft budget crossing: one per scope, budget period and
// process.
type BudgetAlert struct {
	Type       string   `json:"type"`  // "soft_budget_crossed"
	Scope      string   `json:"scope"` // "key" or "team"
	ID         string   `json:"id"`    // the key's hash or the team's id
	Spend      float64  `json:"spend"`
	SoftBudget float64  `json:"soft_budget"`
	MaxBudget  *float64 `json:"max_budget"`
	// Period is the budget period's number (or "all"); ResetAt when it
	// ends (Unix seconds; absent when it never does).
	Period  string `json:"period"`
	ResetAt *int64 `json:"budget_reset_at,omitempty"`
}

// Metadata is StandardLoggingMetadata: who made the call.
type Metadata struct {
	UserAPIKeyHash      string `json:"user_api_key_hash,omitempty"`
	UserAPIKeyAlias     string `json:"user_api_key_alias,omitempty"`
	UserAPIKeyTeamID    string `json:"user_api_key_team_id,omitempty"`
	UserAPIKeyTeamAlias string `json:"user_api_key_team_alias,omitempty"`
	RequesterIPAddress  string `json:"requester_ip_address,omitempty"`
	RequestID           string `json:"request_id,omitempty"`
	// BatchID and CustomID name the batch line a call ran for.
	BatchID  string `json:"batch_id,omitempty"`
	CustomID string `json:"custom_id,omitempty"`
}

// ErrorInfo describes a failed call.
type ErrorInfo struct {
	ErrorCode    string `json:"error_code,omitempty"`
	ErrorClass   string `json:"error_class,omitempty"`
	LLMProvider  string `json:"llm_provider,omitempty"`
	ErrorMessage string `json:"error_message,omitempty"`
}

// Passthrough is the HTTP exchange of a passthrough call.
type Passthrough struct {
	Method     string `json:"method"`
	Path       string `json:"path"`
	StatusCode int    `json:"status_code"`
}

// SetTimes fills the time fields from wall-clock instants. first is the first
// byte of the answer (zero when not streamed).
func (e *Event) SetTimes(start, first, end time.Time) {
	e.StartTime = epoch(start)
	e.EndTime = epoch(end)
	if first.IsZero() {
		first = end
	}
	e.CompletionStartTime = epoch(first)
	e.ResponseTime = first.Sub(start).Seconds()
}

func epoch(t time.Time) float64 { return float64(t.UnixNano()) / 1e9 }
