// Package metrics owns sluice's measurements: one set of instruments,
// recorded where the log event is filled (the call layer, passthrough's
// relay, the batch engine), where a request ends (the route middleware) and
// where callback deliveries end, and exported two ways — the Prometheus text
// format locally (GET /metrics, SLUICE_METRICS_ADDR) and CloudWatch Embedded
// Metric Format lines on stdout in Lambda (EMF). Every label value comes
// from the config or from a fixed set, never from a client's input: a model
// or team the gateway does not know is counted under Other.
package metrics

import (
	"io"
	"net/http"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/sluice-gateway/sluice/pkg/config"
)

// Label values standing for what is not a configured value.
const (
	// Other is a model, deployment, provider, team or code the config does
	// not name (a client's unknown model, a team past MaxTeams).
	Other = "other"
	// None is an absent value: a call refused before it named a model, a
	// master-key call with no team.
	None = ""
)

// DefaultMaxTeams bounds the team label: the first teams seen get a value
// each, later ones count under Other.
const DefaultMaxTeams = 200

// Options tune a Metrics.
type Options struct {
	// MaxTeams bounds the distinct team label values (DefaultMaxTeams when 0).
	MaxTeams int
	// EMF, when set, receives every measurement as a CloudWatch Embedded
	// Metric Format line as well (a Lambda function's stdout).
	EMF io.Writer
	// Namespace is the CloudWatch namespace of the EMF lines (one per stack).
	Namespace string
	// Function names the Lambda function in the EMF lines' properties.
	Function string
	// Process adds the Go runtime and process collectors (the local process).
	Process bool
}

// Metrics is the set of instruments. A nil *Metrics records nothing, so
// callers need no check: metrics off costs a nil test per measurement.
type Metrics struct {
	reg *prometheus.Registry

	models, deployments, providers *labelSet
	teams                          *teamSet
	emf                            *emfWriter

	errors        *prometheus.CounterVec
	refusals      *prometheus.CounterVec
	retries       *prometheus.CounterVec
	cooldowns     *prometheus.CounterVec
	batchLines    *prometheus.CounterVec
	deliveries    *prometheus.CounterVec
	storeDuration *prometheus.HistogramVec
	storeErrors   *prometheus.CounterVec
	storeAgg      *storeAggregate // a Lambda function's store operations; nil without EMF
	waiting       *linesWaiting
	// epoch is when the instruments were made: store operations are timed
	// as monotonic offsets from it.
	epoch time.Time

	// The per-request and per-call instruments' series (series.go): a
	// request or a call looks its series up once and adds all its figures
	// under one lock; collectors expose them at a scrape.
	routeSeries *seriesCache[string, *routeSeries]
	callSeries  *seriesCache[uint64, *callSeries] // by callStatusKey.packed
	scrapes     prometheus.Counter
	handler     http.Handler
}

// Seconds buckets: sluice's own overhead is sub-millisecond to tens of
// milliseconds; model calls take up to minutes (OTel GenAI's advice).
var (
	overheadBuckets = []float64{.0001, .00025, .0005, .001, .0025, .005, .01, .025, .05, .1, .25, 1}
	durationBuckets = []float64{.01, .02, .04, .08, .16, .32, .64, 1.28, 2.56, 5.12, 10.24, 20.48, 40.96, 81.92, 300}
	ttftBuckets     = []float64{.001, .005, .01, .02, .04, .06, .08, .1, .25, .5, .75, 1, 2.5, 5, 7.5, 10}
	tokenBuckets    = []float64{1, 4, 16, 64, 256, 1024, 4096, 16384, 65536, 262144, 1048576, 4194304}
)

// Label names.
const (
	lModel      = "model"
	lDeployment = "deployment"
	lProvider   = "provider"
	lTeam       = "team"
	lRoute      = "route"
	lStatus     = "status"
	lCode       = "code"
	lReason     = "reason"
	lTokenType  = "gen_ai_token_type"
	lKind       = "kind"
	lOutcome    = "outcome"
	lBackend    = "backend"
	lStore      = "store"
	lOperation  = "operation"
)

var callLabels = []string{lModel, lDeployment, lProvider, lTeam}

// New builds the instruments, bounding the model, deployment and provider
// labels to what cfg configures (nil: none configured).
func New(cfg *config.Config, opts Options) *Metrics {
	if opts.MaxTeams <= 0 {
		opts.MaxTeams = DefaultMaxTeams
	}
	m := &Metrics{
		reg:         prometheus.NewRegistry(),
		models:      newLabelSet(),
		deployments: newLabelSet(),
		providers:   newLimitedSet(1 << 8),
		teams:       newTeamSet(opts.MaxTeams),
		epoch:       time.Now(),
	}
	for _, p := range passthroughProviders {
		m.providers.add(p)
	}
	if cfg != nil {
		for i, d := range cfg.ModelList {
			m.models.add(d.ModelName)
			m.deployments.add(deploymentID(d, i))
			m.providers.add(d.Params.Provider())
		}
	}
	if opts.EMF != nil {
		m.emf = newEMFWriter(opts.EMF, opts.Namespace, opts.Function)
		m.storeAgg = &storeAggregate{w: m.emf}
	}
	f := factory{m.reg}
	m.routeSeries = newSeriesCache[string, *routeSeries]()
	m.reg.MustRegister(&routeCollector{series: m.routeSeries,
		requests: f.desc("sluice_requests_total", "HTTP requests answered, by route and status class.", lRoute, lStatus),
		duration: f.desc("sluice_request_duration_seconds", "Time from a request's arrival to the end of its answer.", lRoute, lStatus),
		overhead: f.desc("sluice_overhead_seconds", "sluice's own time on a request: from its arrival to its answer's headers, less the time spent waiting on providers and between retries (X-Sluice-Overhead-Ms).", lRoute),
	})
	m.errors = f.counter("sluice_errors_total", "HTTP requests answered with an error, by route, status class and error code.", lRoute, lStatus, lCode)
	m.refusals = f.counter("sluice_refusals_total", "Requests refused by an admission limit: rate_limit (rpm/tpm) or budget.", lRoute, lReason)
	m.callSeries = newSeriesCache[uint64, *callSeries]()
	m.reg.MustRegister(&callCollector{m: m,
		calls:       f.desc("sluice_model_calls_total", "Model calls ended (one per log event), by model, deployment, provider, team, status class and error code.", append(callLabels, lStatus, lCode)...),
		duration:    f.desc("gen_ai_server_request_duration_seconds", "Model call duration, from the call's start to its answer's last byte (OTel gen_ai.server.request.duration).", callLabels...),
		ttft:        f.desc("gen_ai_server_time_to_first_token_seconds", "Time to the first byte of a streamed answer (OTel gen_ai.server.time_to_first_token).", callLabels...),
		tokens:      f.desc("gen_ai_client_token_usage", "Tokens a model call used, by gen_ai_token_type input or output (OTel gen_ai.client.token.usage).", append(callLabels, lTokenType)...),
		tokensTotal: f.desc("sluice_tokens_total", "Tokens used by model calls, by gen_ai_token_type input or output.", append(callLabels, lTokenType)...),
		spend:       f.desc("sluice_spend_usd_total", "Spend of model calls in US dollars, from each log event's response_cost.", callLabels...),
	})
	m.retries = f.counter("sluice_deployment_retries_total", "Provider attempts after a call's first, by the deployment retried.", lModel, lDeployment, lProvider)
	m.cooldowns = f.counter("sluice_deployment_cooldowns_total", "Times a deployment was put in cooldown after failures.", lModel, lDeployment, lProvider)
	m.batchLines = f.counter("sluice_batch_lines_total", "Batch lines ended, by outcome done or failed.", lModel, lTeam, lOutcome)
	m.deliveries = f.counter("sluice_callback_events_total", "Log event deliveries to logging callbacks, by destination kind and outcome delivered, retried or dead_lettered.", lKind, lOutcome)
	m.storeDuration = f.histogram("sluice_store_operation_duration_seconds", "Store operations' duration, by backend (local, aws), store (records, blobs, work_queue, delivery_queue, dead_letter_queue, bus, limiter, sealer) and operation.", storeBuckets, lBackend, lStore, lOperation)
	m.storeErrors = f.counter("sluice_store_errors_total", "Store operations that returned an error, by backend, store, operation and code: not_found, condition_failed and canceled are answers callers expect; unavailable and error are faults.", lBackend, lStore, lOperation, lCode)
	m.waiting = &linesWaiting{}
	m.reg.MustRegister(m.waiting)
	m.scrapes = prometheus.NewCounter(prometheus.CounterOpts{Name: "sluice_metrics_scrapes_total", Help: "Scrapes of the metrics endpoint."})
	m.reg.MustRegister(m.scrapes)
	h := promhttp.HandlerFor(m.reg, promhttp.HandlerOpts{EnableOpenMetrics: true, MaxRequestsInFlight: 4})
	m.handler = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		m.scrapes.Inc()
		h.ServeHTTP(w, r)
	})
	if opts.Process {
		m.reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	}
	return m
}

// deploymentID is the deployment's id as the router names it
// (models.Target.DeploymentID): model_info.id, or model_name#index.
func deploymentID(d config.Deployment, i int) string {
	if d.ModelInfo.ID != "" {
		return d.ModelInfo.ID
	}
	return d.ModelName + "#" + strconv.Itoa(i)
}

// passthroughProviders are the providers of the passthrough prefixes: a
// passthrough call names one, whatever the config lists.
var passthroughProviders = []string{"anthropic", "gemini", "vertex_ai", "bedrock"}

type factory struct{ reg *prometheus.Registry }

func (f factory) counter(name, help string, labels ...string) *prometheus.CounterVec {
	c := prometheus.NewCounterVec(prometheus.CounterOpts{Name: name, Help: help}, labels)
	f.reg.MustRegister(c)
	return c
}

// desc describes a metric a collector of this package exposes.
func (f factory) desc(name, help string, labels ...string) *prometheus.Desc {
	return prometheus.NewDesc(name, help, labels, nil)
}

func (f factory) histogram(name, help string, buckets []float64, labels ...string) *prometheus.HistogramVec {
	h := prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: name, Help: help, Buckets: buckets}, labels)
	f.reg.MustRegister(h)
	return h
}

// Handler serves the instruments in the Prometheus text format (or
// OpenMetrics when asked).
func (m *Metrics) Handler() http.Handler { return m.handler }

// EMF reports whether the measurements go out as EMF lines (a Lambda
// function), where a scrape of this process would tell little.
func (m *Metrics) EMF() bool { return m.emf != nil }

// Namespace is the EMF lines' CloudWatch namespace ("" without EMF).
func (m *Metrics) Namespace() string {
	if m.emf == nil {
		return ""
	}
	return m.emf.namespace
}

// Registry is the instruments' registry (tests gather from it).
func (m *Metrics) Registry() *prometheus.Registry { return m.reg }

// model bounds a model name to the configured ones.
func (m *Metrics) model(name string) string { return m.models.bound(name) }

// The ids every labelSet gives None and Other.
const (
	idNone  int32 = 0
	idOther int32 = 1
)

// labelSet is a label's bounded values: None, Other, then the known ones,
// each with an id that stands for it in the series keys (a few integers
// hash in a fraction of the time the label strings would). It is not
// changed once built (teamSet copies one on write).
type labelSet struct {
	ids    map[string]int32
	values []string
	limit  int // the most values (None and Other included): what its field of a packed series key holds
}

// maxLabelValues bounds a model, deployment or team set: its ids fit the 16
// bits of their field in callStatusKey.packed.
const maxLabelValues = 1 << 16

func newLabelSet(known ...string) *labelSet { return newLimitedSet(maxLabelValues, known...) }

func newLimitedSet(limit int, known ...string) *labelSet {
	l := &labelSet{ids: map[string]int32{}, values: []string{None, Other}, limit: limit}
	for _, v := range known {
		l.add(v)
	}
	return l
}

// add makes v a known value (Other and None already are) while the set has
// room; past it v counts as Other.
func (l *labelSet) add(v string) {
	if _, ok := l.ids[v]; ok || v == None || v == Other || len(l.values) >= l.limit {
		return
	}
	l.ids[v] = int32(len(l.values))
	l.values = append(l.values, v)
}

// id is v's id: idNone for "", idOther for a value not known.
func (l *labelSet) id(v string) int32 {
	if v == "" {
		return idNone
	}
	if id, ok := l.ids[v]; ok {
		return id
	}
	return idOther
}

// bound is v as a label value: v if known, else None or Other.
func (l *labelSet) bound(v string) string { return l.values[l.id(v)] }

func (l *labelSet) clone() *labelSet {
	c := &labelSet{ids: make(map[string]int32, len(l.ids)+1), values: append(make([]string, 0, len(l.values)+1), l.values...), limit: l.limit}
	for k, v := range l.ids {
		c.ids[k] = v
	}
	return c
}

// teamSet hands out team label values: a team id (from the caller's
// authenticated key, never the request) gets its own value while fewer than
// max have been seen. The set is copied on write (at most max times), so
// that a lookup takes no lock.
type teamSet struct {
	mu   sync.Mutex // serialises the writers
	max  int
	seen atomic.Pointer[labelSet]
}

func newTeamSet(max int) *teamSet {
	t := &teamSet{max: min(max, maxLabelValues-2)} // None and Other take two ids
	t.seen.Store(newLabelSet())
	return t
}

// id is team's id in the set, adding it while there is room.
func (t *teamSet) id(team string) int32 {
	if team == "" {
		return idNone
	}
	seen := t.seen.Load()
	if id, ok := seen.ids[team]; ok {
		return id
	}
	if len(seen.ids) >= t.max || team == Other {
		return idOther
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	seen = t.seen.Load()
	if id, ok := seen.ids[team]; ok {
		return id
	}
	if len(seen.ids) >= t.max {
		return idOther
	}
	next := seen.clone()
	next.add(team)
	t.seen.Store(next)
	return next.ids[team]
}

// label is team's label value.
func (t *teamSet) label(team string) string { return t.values()[t.id(team)] }

// values are the label values by id, as far as ids were handed out.
func (t *teamSet) values() []string { return t.seen.Load().values }

// classes are the status classes by id (0: none).
var classes = [...]string{"", "1xx", "2xx", "3xx", "4xx", "5xx"}

// classID is an HTTP status's class id; anything outside 1xx–4xx is 5xx.
func classID(status int) uint8 {
	if c := status / 100; c >= 1 && c <= 4 {
		return uint8(c)
	}
	return 5
}

// statusClass is an HTTP status's class: "2xx", "4xx", "5xx".
func statusClass(status int) string { return classes[classID(status)] }

// codes are the error codes sluice answers with (pkg/api, the providers'
// mapped errors): any other code counts as Other.
var codes = newLimitedSet(1<<5,
	"invalid_value", "missing_required_parameter", "invalid_json", "invalid_api_key",
	"permission_denied", "not_found", "model_not_found", "method_not_allowed",
	"request_timeout", "conflict", "payload_too_large", "rate_limit_exceeded",
	"budget_exceeded", "client_closed", "upstream_error", "upstream_timeout",
	"server_error", "internal_error", "unavailable", "service_unavailable",
	"context_length_exceeded", "content_filter", "unsupported_media_type",
)

func code(c string) string { return codes.bound(c) }
