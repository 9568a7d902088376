package metrics

import (
	"context"
	"strconv"
	"time"

	"github.com/sluice-gateway/sluice/pkg/logevent"
)

// Request records one answered HTTP request on route (its pattern in the
// route table): its status, its error code ("" for a success), how long it
// took and sluice's own part of that (negative: not measured, the answer's
// headers never went out). refused names the admission limit that refused
// it ("rate_limit", "budget"), "" when none did.
func (m *Metrics) Request(route string, status int, errCode string, took, overhead time.Duration, refused string) {
	if m == nil {
		return
	}
	cid := classID(status)
	class, c := classes[cid], code(errCode)
	oh := -1.0
	if overhead >= 0 {
		oh = overhead.Seconds()
	}
	m.routeSeries.get(route, newRouteSeries).add(cid, took.Seconds(), oh)
	failed := status >= 400
	if failed {
		m.errors.WithLabelValues(route, class, c).Inc()
	}
	if refused != "" {
		m.refusals.WithLabelValues(route, refused).Inc()
	}
	if m.emf != nil {
		l := m.emf.line([][]string{{}, {"Route"}}, "Route", route, "Status", class, "Code", c)
		l.metric("Requests", unitCount, 1)
		l.metric("Errors", unitCount, b2f(failed))
		l.metric("RequestDuration", unitMilliseconds, ms(took))
		if overhead >= 0 {
			l.metric("Overhead", unitMilliseconds, ms(overhead))
		}
		if refused != "" {
			l.metric("Refusals", unitCount, 1)
			l.prop("Reason", refused)
		}
		l.write()
	}
}

// ObserveEvent records a model call from its log event, as the emitter
// sees it (logevent.Observer): every call's event passes here whether or
// not anyone listens to it.
func (m *Metrics) ObserveEvent(_ context.Context, ev *logevent.Event) {
	if m == nil || ev.BudgetAlert != nil { // a budget alert is no model call
		return
	}
	name := ev.ModelGroup
	if name == "" {
		name = ev.Model
	}
	key := callStatusKey{callKey: callKey{model: m.models.id(name), deployment: m.deployments.id(ev.ModelID),
		provider: m.providers.id(ev.CustomLLMProvider), team: m.teams.id(ev.Metadata.UserAPIKeyTeamID)}, status: classID(200)}
	if ev.Passthrough != nil && ev.Passthrough.StatusCode > 0 {
		key.status = classID(ev.Passthrough.StatusCode)
	}
	failed := ev.Status == logevent.StatusFailure
	if failed && ev.ErrorInformation != nil {
		if st, err := strconv.Atoi(ev.ErrorInformation.ErrorCode); err == nil {
			key.status = classID(st)
		}
		key.code = codes.id(ev.ErrorInformation.ErrorClass)
	}
	f := callFigures{took: max(ev.EndTime-ev.StartTime, 0), ttft: -1, cost: ev.ResponseCost}
	if ev.Stream && !failed && ev.CompletionStartTime > 0 {
		f.ttft = max(ev.ResponseTime, 0)
	}
	if ev.PromptTokens > 0 || ev.CompletionTokens > 0 {
		f.tokens, f.in, f.out = true, float64(ev.PromptTokens), float64(ev.CompletionTokens)
	}
	m.callSeries.get(key.packed(), func() *callSeries { return newCallSeries(key) }).add(&f)
	outcome := ""
	if ev.Metadata.BatchID != "" {
		outcome = "done"
		if failed {
			outcome = "failed"
		}
		m.batchLines.WithLabelValues(m.models.values[key.model], m.teams.values()[key.team], outcome).Inc()
	}
	if m.emf != nil {
		l := m.emf.line([][]string{{}, {"Model"}, {"Team"}},
			"Model", m.models.values[key.model], "Team", m.teams.values()[key.team], "Deployment", m.deployments.values[key.deployment],
			"Provider", m.providers.values[key.provider], "Status", classes[key.status], "Code", codes.values[key.code])
		l.metric("ModelCalls", unitCount, 1)
		l.metric("ModelCallErrors", unitCount, b2f(failed))
		l.metric("ModelCallDuration", unitMilliseconds, f.took*1000)
		if f.ttft >= 0 {
			l.metric("TimeToFirstToken", unitMilliseconds, f.ttft*1000)
		}
		l.metric("InputTokens", unitCount, float64(ev.PromptTokens))
		l.metric("OutputTokens", unitCount, float64(ev.CompletionTokens))
		l.metric("SpendUSD", unitNone, ev.ResponseCost)
		if outcome != "" {
			l.metric("BatchLinesDone", unitCount, b2f(!failed))
			l.metric("BatchLinesFailed", unitCount, b2f(failed))
		}
		l.write()
	}
}

// Retried records a provider attempt after a call's first, to deployment
// (models.Observer).
func (m *Metrics) Retried(model, deployment, provider string) {
	if m == nil {
		return
	}
	model, deployment = m.model(model), m.deployments.bound(deployment)
	m.retries.WithLabelValues(model, deployment, m.providers.bound(provider)).Inc()
	if m.emf != nil {
		l := m.emf.line([][]string{{}, {"Model"}}, "Model", model, "Deployment", deployment)
		l.metric("DeploymentRetries", unitCount, 1)
		l.write()
	}
}

// CooledDown records that a deployment was put in cooldown after failures
// (models.Observer).
func (m *Metrics) CooledDown(model, deployment, provider string) {
	if m == nil {
		return
	}
	model, deployment = m.model(model), m.deployments.bound(deployment)
	m.cooldowns.WithLabelValues(model, deployment, m.providers.bound(provider)).Inc()
	if m.emf != nil {
		l := m.emf.line([][]string{{}, {"Model"}}, "Model", model, "Deployment", deployment)
		l.metric("DeploymentCooldowns", unitCount, 1)
		l.write()
	}
}

// Delivery outcomes.
const (
	Delivered    = "delivered"
	Retried      = "retried"
	DeadLettered = "dead_lettered"
)

// destinationKinds are the callback destinations sluice delivers to; a
// kind outside them counts as Other.
var destinationKinds = newLabelSet("langfuse", "langsmith", "gcs_bucket", "s3", "generic_api", "datadog", "otel", "webhook")

// Delivery records n log event deliveries to callbacks of kind (the
// callback's name: langfuse, gcs_bucket, ...) that ended in outcome.
func (m *Metrics) Delivery(kind, outcome string, n int) {
	if m == nil || n <= 0 {
		return
	}
	kind = destinationKinds.bound(kind)
	m.deliveries.WithLabelValues(kind, outcome).Add(float64(n))
	if m.emf != nil {
		name := map[string]string{Delivered: "CallbackDelivered", Retried: "CallbackRetried", DeadLettered: "CallbackDeadLettered"}[outcome]
		if name == "" {
			return
		}
		l := m.emf.line([][]string{{}, {"Kind"}}, "Kind", kind)
		l.metric(name, unitCount, float64(n))
		l.write()
	}
}

func b2f(b bool) float64 {
	if b {
		return 1
	}
	return 0
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }
