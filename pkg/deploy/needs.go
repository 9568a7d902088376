// Package deploy declares what each of sluice's Lambda functions needs from
// its cloud deployment — the environment variables it reads and the
// capabilities it uses (records, file bytes, queues, secrets, models) — and
// writes template.yaml's per-function sections from it (Generate: every
// route on the function that serves it, streaming where the route table says
// so, every job on its schedule or queue, the managed policies whose grants
// are exactly its capabilities). Check holds the template to it: the
// generated sections current, and the hand-written core (the API, storage,
// queues, policies, Globals, alarms, outputs) what they rely on
// (ARCHITECTURE §2).
//
// A function's capabilities follow from its declarations in pkg/server:
// each route and each job says what its handler touches (its Needs), so a
// new route or job comes with its needs, and a need the template does not
// grant fails the tests.
package deploy

import (
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/sluice-gateway/sluice/pkg/server"
)

// Timeouts bound what the template may give a function (seconds).
const (
	// MaxBufferedTimeout is the longest a buffered HTTP function may run:
	// API Gateway ends a buffered integration at 29 s.
	MaxBufferedTimeout = 29
	// MaxStreamingTimeout is the longest a streamed answer may run (API
	// Gateway response streaming, and Lambda itself: 15 minutes).
	MaxStreamingTimeout = 900
	// MaxTimeout is Lambda's own ceiling.
	MaxTimeout = 900
)

// StreamIntegrationTimeout is every streamed route's integration timeout
// (ms): API Gateway's and Lambda's maximum, so the function's own Timeout —
// a parameter for some — ends the stream. A TimeoutInMillis that followed a
// parameter would never reach API Gateway: SAM names the deployment from the
// template text before parameters are resolved.
const StreamIntegrationTimeout = MaxStreamingTimeout * 1000

// TimeoutParameters are the functions whose Timeout is a template
// parameter:
// model calls that stream for as long as a provider answers, where the
// operator chooses how long a call may run (and be billed).
var TimeoutParameters = map[string]string{
	"chat-completions":      "ChatTimeout",
	"messages":              "ChatTimeout",
	"completions":           "ChatTimeout",
	"responses":             "ChatTimeout",
	"passthrough-anthropic": "PassthroughTimeout",
	"passthrough-bedrock":   "PassthroughTimeout",
	"passthrough-gemini":    "PassthroughTimeout",
	"passthrough-vertex-ai": "PassthroughTimeout",
}

// Function is what one Lambda function needs from the deployment.
type Function struct {
	// Name is the function's name: its directory under functions/ and its
	// name in the route table or the jobs table.
	Name string
	// Routes are the routes it serves (none for a job).
	Routes []server.Route
	// Stream reports whether its answers stream (all its routes do).
	Stream bool
	// Schedule is the EventBridge schedule expression of a scheduled job
	// ("" for the others).
	Schedule string
	// Queue is the logical ID of the SQS queue a queue job consumes ("" for
	// the others).
	Queue string
	// Workers is how many messages a queue job handles at once; Batch how
	// many one invocation may be given, gathered for BatchWindow.
	Workers     int
	Batch       int
	BatchWindow time.Duration
	// Env are the environment variables the template must set for it.
	Env []EnvVar
	// Capabilities are what it touches, sorted as server.Capabilities
	// lists them.
	Capabilities []server.Capability
	// Memory is its memory size (MB): what its declaration says, else
	// DefaultMemory.
	Memory int
	// Timeout is what its declaration says (0: the template's default,
	// DefaultTimeout, unless TimeoutParameters names a parameter for it).
	Timeout time.Duration
}

// DefaultMemory is the memory size (MB) of a function whose route or job
// declares none.
const DefaultMemory = 512

// DefaultTimeout is the timeout (seconds) of a function whose declaration
// gives none (the template's Globals): a buffered route's, within API
// Gateway's 29 s, so sluice answers its own 504 first.
const DefaultTimeout = 28

// Has reports whether f needs c.
func (f Function) Has(c server.Capability) bool { return slices.Contains(f.Capabilities, c) }

// LogicalID is the function's resource name in template.yaml: its name in
// CamelCase and "Function" (files-upload → FilesUploadFunction). The build
// targets (infra/deploy.mk) derive the same name.
func (f Function) LogicalID() string { return LogicalID(f.Name) }

// ConcurrencyParameter is the template parameter that sets a queue job's
// ScalingConfig.MaximumConcurrency (batch-worker →
// BatchWorkerMaxConcurrency): how many of its invocations may run at once.
func (f Function) ConcurrencyParameter() string {
	return strings.TrimSuffix(f.LogicalID(), "Function") + "MaxConcurrency"
}

// LogicalID turns a function name into its template resource name.
func LogicalID(name string) string {
	var b strings.Builder
	for _, part := range strings.Split(name, "-") {
		if part == "" {
			continue
		}
		b.WriteString(strings.ToUpper(part[:1]) + part[1:])
	}
	return b.String() + "Function"
}

// every is what every function needs, whatever it serves: gateway.Open
// reads the configuration on every start.
var every = []server.Capability{server.ConfigRead}

// queueIDs are the template's queues a job can consume.
var queueIDs = map[server.Queue]string{
	server.WorkQueue:     WorkQueueID,
	server.DeliveryQueue: DeliveryQueueID,
}

// Functions lists every Lambda function with its needs: one per function of
// the route table, in table order, then one per job of the jobs table.
func Functions() ([]Function, error) {
	return FunctionsOf(server.Routes(), server.Jobs())
}

// FunctionsOf lists the functions of a route table and a jobs table: one per
// function the routes name, in their order, with its routes and their
// capabilities; then one per job, with its trigger and needs. It fails when
// a function mixes streaming and buffered routes, a job is not well declared,
// or a name is taken twice.
func FunctionsOf(routes []server.Route, jobs []server.Job) ([]Function, error) {
	var fns []Function
	index := map[string]int{} // function name → position in fns
	for _, r := range routes {
		i, ok := index[r.Function]
		if !ok {
			i = len(fns)
			index[r.Function] = i
			fns = append(fns, Function{Name: r.Function, Stream: r.Stream, Env: FunctionEnv(), Capabilities: slices.Clone(every)})
		}
		f := &fns[i]
		if r.Stream != f.Stream {
			return nil, fmt.Errorf("deploy: function %q mixes streaming and buffered routes (%s %s is %s): API Gateway sets the transfer mode per integration",
				r.Function, r.Method, r.Pattern, map[bool]string{true: "streamed", false: "buffered"}[r.Stream])
		}
		f.Routes = append(f.Routes, r)
		f.Capabilities = append(f.Capabilities, r.Capabilities()...)
		f.Memory = max(f.Memory, r.Memory)
		f.Timeout = max(f.Timeout, r.Timeout)
	}
	for _, j := range jobs {
		if err := j.Validate(); err != nil {
			return nil, err
		}
		if _, taken := index[j.Name]; taken {
			return nil, fmt.Errorf("deploy: job %q has the name of another function", j.Name)
		}
		index[j.Name] = len(fns)
		fns = append(fns, Function{
			Name: j.Name, Schedule: j.Schedule.Cloud, Queue: queueIDs[j.Queue], Env: FunctionEnv(),
			Capabilities: append(slices.Clone(every), j.Capabilities()...),
			Memory:       j.Memory, Timeout: j.Timeout, Workers: j.Workers,
			Batch: j.BatchSize(), BatchWindow: j.BatchWindow,
		})
	}
	for i := range fns {
		fns[i].Capabilities = server.SortCapabilities(fns[i].Capabilities)
		if fns[i].Memory == 0 {
			fns[i].Memory = DefaultMemory
		}
	}
	return fns, nil
}

// Lookup returns the function named name.
func Lookup(name string) (Function, error) {
	fns, err := Functions()
	if err != nil {
		return Function{}, err
	}
	for _, f := range fns {
		if f.Name == name {
			return f, nil
		}
	}
	return Function{}, fmt.Errorf("deploy: no function %q", name)
}

// APIPath turns a net/http route pattern into an API Gateway resource path:
// {name} stays, a trailing {name...} becomes the greedy {name+}. Patterns
// API Gateway cannot express (a host, {$}, a wildcard inside a segment)
// are an error.
func APIPath(pattern string) (string, error) {
	if !strings.HasPrefix(pattern, "/") {
		return "", fmt.Errorf("deploy: pattern %q: want a path starting with / (no method, no host)", pattern)
	}
	segs := strings.Split(pattern[1:], "/")
	for i, s := range segs {
		if !strings.ContainsAny(s, "{}") {
			continue
		}
		name, ok := strings.CutPrefix(s, "{")
		if name, ok = strings.CutSuffix(name, "}"); !ok || name == "" || strings.ContainsAny(name, "{}") {
			return "", fmt.Errorf("deploy: pattern %q: segment %q is not a whole {name} wildcard", pattern, s)
		}
		if name == "$" {
			return "", fmt.Errorf("deploy: pattern %q: API Gateway has no {$} anchor", pattern)
		}
		if base, greedy := strings.CutSuffix(name, "..."); greedy {
			if i != len(segs)-1 || base == "" {
				return "", fmt.Errorf("deploy: pattern %q: {name...} must be the last segment", pattern)
			}
			segs[i] = "{" + base + "+}"
		}
	}
	return "/" + strings.Join(segs, "/"), nil
}
