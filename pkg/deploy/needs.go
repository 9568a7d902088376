// Package deploy declares what each of sluice's Lambda functions needs from
// its cloud deployment — the environment variables it reads and the
// capabilities it uses (records, file bytes, queues, secrets, models) — and
// checks template.yaml against it: every route on the function that serves
// it, streaming where the route table says so, every variable set, every
// capability granted and nothing more (ARCHITECTURE §2).
//
// A function's capabilities follow from its routes: each route of the route
// table (pkg/server) declares here what its handler touches, so a new route
// without a declaration fails the tests, and a declaration the template does
// not grant fails them too.
package deploy

import (
	"fmt"
	"net/http"
	"slices"
	"strings"

	"github.com/sluice-gateway/sluice/pkg/server"
)

// Capability is one kind of access a function has to the deployment's
// resources. Grants maps each to the IAM statements that give it.
type Capability string

// The capabilities. Reads and writes are separate so that, e.g., listing
// files cannot change them.
const (
	// RecordsRead reads the records table and its indexes (GetItem,
	// BatchGetItem, Query).
	RecordsRead Capability = "records-read"
	// RecordsWrite writes items of the records table (PutItem, UpdateItem,
	// DeleteItem; transactions are authorized per item).
	RecordsWrite Capability = "records-write"
	// Limits takes units from the shared rate-limit windows: the LIMIT#
	// items of the records table only.
	Limits Capability = "limits"
	// FilesRead reads file bytes (the files/ and uploads/ objects).
	FilesRead Capability = "files-read"
	// FilesWrite stores file bytes.
	FilesWrite Capability = "files-write"
	// FilesDelete removes file bytes.
	FilesDelete Capability = "files-delete"
	// ClaimCheckWrite stores log-event bodies too large for the bus under
	// the claim-check prefix (write only).
	ClaimCheckWrite Capability = "claim-check-write"
	// WorkSend enqueues batch work.
	WorkSend Capability = "work-send"
	// EventsPublish publishes log events on the topic.
	EventsPublish Capability = "events-publish"
	// Seal seals and opens team secrets with the KMS key (envelope
	// encryption).
	Seal Capability = "seal"
	// ConfigRead reads the configuration document (an S3 object or an SSM
	// parameter).
	ConfigRead Capability = "config-read"
	// MasterKey reads the master key's secret.
	MasterKey Capability = "master-key"
	// ProviderSecrets reads the provider credentials' secret.
	ProviderSecrets Capability = "provider-secrets"
	// BedrockInvoke invokes Bedrock models (InvokeModel, Converse and their
	// streaming forms), when the deployment enables Bedrock.
	BedrockInvoke Capability = "bedrock-invoke"
	// BedrockAgents calls the Bedrock agent runtime (agents, knowledge
	// bases, flows), when the deployment enables it.
	BedrockAgents Capability = "bedrock-agents"
)

// Capabilities lists every capability, in a fixed order.
func Capabilities() []Capability {
	return []Capability{
		RecordsRead, RecordsWrite, Limits, FilesRead, FilesWrite, FilesDelete, ClaimCheckWrite,
		WorkSend, EventsPublish, Seal, ConfigRead, MasterKey, ProviderSecrets, BedrockInvoke, BedrockAgents,
	}
}

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

// FilesSweep is the scheduled function that finishes file expiry and
// deletion (files.Service.Sweep).
const FilesSweep = "files-sweep"

// SweepSchedule is when the sweep runs: hourly (files.DefaultSweepInterval
// is the local process's shorter period).
const SweepSchedule = "rate(1 hour)"

// Function is what one Lambda function needs from the deployment.
type Function struct {
	// Name is the function's name: its directory under functions/ and its
	// name in the route table.
	Name string
	// Routes are the routes it serves (none for a scheduled function).
	Routes []server.Route
	// Stream reports whether its answers stream (all its routes do).
	Stream bool
	// Schedule is the EventBridge schedule expression of a scheduled
	// function ("" for the others).
	Schedule string
	// Queue is the logical ID of the SQS queue a worker consumes ("" for
	// the others).
	Queue string
	// Env are the environment variables the template must set for it.
	Env []EnvVar
	// Capabilities are what it touches, sorted as Capabilities lists them.
	Capabilities []Capability
}

// Has reports whether f needs c.
func (f Function) Has(c Capability) bool { return slices.Contains(f.Capabilities, c) }

// LogicalID is the function's resource name in template.yaml: its name in
// CamelCase and "Function" (files-upload → FilesUploadFunction). The build
// targets (infra/deploy.mk) derive the same name.
func (f Function) LogicalID() string { return LogicalID(f.Name) }

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
var every = []Capability{ConfigRead}

// authenticated is what a route that takes a key needs: the master key
// (read on the first request that needs it), the key and team lookups, and
// the key's and team's rate-limit windows.
var authenticated = []Capability{MasterKey, RecordsRead, Limits}

// modelCall is what a route that calls providers needs: the provider
// credentials, Bedrock when it is enabled, and the log event's way out —
// the topic, and the claim-check prefix for bodies too large for it. (The
// emitter publishes only while someone listens; the grant does not wait for
// the first listener.)
var modelCall = []Capability{ProviderSecrets, BedrockInvoke, EventsPublish, ClaimCheckWrite}

// passthroughCall is a passthrough prefix's needs (Bedrock's are added to it).
var passthroughCall = []Capability{ProviderSecrets, EventsPublish, ClaimCheckWrite}

// passthroughMethods are the methods a passthrough prefix serves.
var passthroughMethods = []string{http.MethodGet, http.MethodPost, http.MethodPut, http.MethodDelete, http.MethodPatch}

// routeNeeds declares what each route's handler touches beyond its access
// level, keyed by "METHOD pattern". A route of the route table missing here
// is an error: whoever adds a route says what it needs.
var routeNeeds = func() map[string][]Capability {
	m := map[string][]Capability{
		"GET /health/liveliness": nil,
		// readiness pings the table.
		"GET /health/readiness": {RecordsRead},
		"GET /v1/models":        nil,

		"POST /v1/embeddings":  modelCall,
		"POST /moderations":    modelCall,
		"POST /v1/moderations": modelCall,

		// An upload stores the bytes, then the record; a refused one is
		// deleted again.
		"POST /v1/files":                  {RecordsWrite, FilesWrite, FilesDelete},
		"GET /v1/files":                   nil,
		"GET /v1/files/{file_id}":         nil,
		"DELETE /v1/files/{file_id}":      {RecordsWrite, FilesDelete},
		"GET /v1/files/{file_id}/content": {FilesRead},

		"POST /v1/uploads":                      {RecordsWrite},
		"POST /v1/uploads/{upload_id}/parts":    {RecordsWrite, FilesWrite, FilesDelete},
		"POST /v1/uploads/{upload_id}/complete": {RecordsWrite, FilesRead, FilesDelete},
		"POST /v1/uploads/{upload_id}/cancel":   {RecordsWrite, FilesDelete},

		"POST /team/new":     {RecordsWrite},
		"GET /team/info":     nil,
		"GET /team/list":     nil,
		"POST /key/generate": {RecordsWrite},
		"GET /key/info":      nil,
		"POST /key/delete":   {RecordsWrite},
	}
	for prefix, caps := range map[string][]Capability{
		"/vertex-ai": passthroughCall,
		"/vertex_ai": passthroughCall,
		"/anthropic": passthroughCall,
		"/gemini":    passthroughCall,
		// Bedrock is called with the function's own role (SigV4).
		"/bedrock": append(slices.Clone(passthroughCall), BedrockInvoke, BedrockAgents),
	} {
		for _, method := range passthroughMethods {
			m[method+" "+prefix+"/{endpoint...}"] = caps
		}
	}
	return m
}()

// RouteCapabilities is what route r needs: what its access level needs
// (the key lookups and limits) and what its handler touches.
func RouteCapabilities(r server.Route) ([]Capability, error) {
	caps, ok := routeNeeds[r.Method+" "+r.Pattern]
	if !ok {
		return nil, fmt.Errorf("deploy: route %s %s (function %s) declares no needs: add it to routeNeeds in pkg/deploy",
			r.Method, r.Pattern, r.Function)
	}
	out := slices.Clone(caps)
	if r.Access != server.Public {
		out = append(out, authenticated...)
	}
	return sortCapabilities(out), nil
}

// Functions lists every Lambda function with its needs: one per function of
// the route table, in table order, then the scheduled ones. It fails when a
// route declares no needs or a function mixes streaming and buffered routes.
func Functions() ([]Function, error) {
	routes := server.Routes()
	var fns []Function
	for _, name := range server.Functions() {
		stream, err := server.Streams(name)
		if err != nil {
			return nil, err
		}
		f := Function{Name: name, Stream: stream, Env: CloudEnv(), Capabilities: slices.Clone(every)}
		for _, r := range routes {
			if r.Function != name {
				continue
			}
			caps, err := RouteCapabilities(r)
			if err != nil {
				return nil, err
			}
			f.Routes = append(f.Routes, r)
			f.Capabilities = append(f.Capabilities, caps...)
		}
		f.Capabilities = sortCapabilities(f.Capabilities)
		fns = append(fns, f)
	}
	// The sweep walks the expiry index, removes objects, then records.
	fns = append(fns, Function{
		Name: FilesSweep, Schedule: SweepSchedule, Env: CloudEnv(),
		Capabilities: sortCapabilities(append(slices.Clone(every), RecordsRead, RecordsWrite, FilesDelete)),
	})
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

// sortCapabilities removes duplicates and orders caps as Capabilities does.
func sortCapabilities(caps []Capability) []Capability {
	var out []Capability
	for _, c := range Capabilities() {
		if slices.Contains(caps, c) {
			out = append(out, c)
		}
	}
	return out
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
