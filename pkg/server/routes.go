// Package server is sluice's route and job tables and its composition root.
//
//   - routes.go declares every route — its method and path, who may call it,
//     its handler, what it touches, the Lambda function that serves it — and
//     jobs.go every worker function (schedule or queue); capabilities.go names
//     what they touch. pkg/deploy, the Lambda entry points and the local
//     process derive everything else from the two tables.
//   - services.go builds the capability services from settings, config and
//     the storage backend, in dependency order (NewServices).
//   - mux.go mounts the routes, each inside the middleware
//     (pkg/server/middleware: what runs around every handler).
package server

import (
	"fmt"
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/sluice-gateway/sluice/pkg/messages"
	"github.com/sluice-gateway/sluice/pkg/passthrough"
	"github.com/sluice-gateway/sluice/pkg/server/middleware"
)

// Access says who may call a route; the middleware enforces it.
type Access = middleware.Access

// Who may call a route.
const (
	// Public routes need no key (health checks).
	Public = middleware.Public
	// AnyKey routes need a valid key: a team key or the master key.
	AnyKey = middleware.AnyKey
	// AdminOnly routes need the master key; team keys get 403.
	AdminOnly = middleware.AdminOnly
)

// HandlerFunc is a route handler: it returns an error instead of writing
// one, and the middleware renders it.
type HandlerFunc = middleware.HandlerFunc

// Route is one method on one path.
type Route struct {
	Method  string
	Pattern string // a net/http path pattern
	// Function is the Lambda function that serves the route in the cloud.
	Function string
	Access   Access
	// Stream marks routes whose response streams in the cloud (ARCHITECTURE
	// §10): model calls and file content. The rest are buffered.
	Stream bool
	// KeyInQuery accepts the key in the ?key= query parameter (passthrough only).
	KeyInQuery bool
	// AWSErrors renders sluice's own errors in AWS's JSON error shape
	// (api.WriteAWSError): the Bedrock prefix, whose clients are AWS SDKs.
	AWSErrors bool
	// Spends marks routes that make (or start) model calls: the caller's
	// budgets admit each request (pkg/spend).
	Spends bool
	// Needs is what the handler touches in the deployment, beyond what the
	// middleware needs for Access (see Route.Capabilities).
	Needs []Capability
	// Memory (MB) and Timeout size the route's Lambda function (0: the
	// defaults of pkg/deploy). A function with several routes takes the
	// largest value any of them declares, so set it on one. `make template`
	// writes them into template.yaml.
	Memory  int
	Timeout time.Duration
	handler func(*Services) HandlerFunc
	// writeError renders the route's errors (nil: api.WriteError, OpenAI's
	// shape); the Messages routes answer in Anthropic's.
	writeError func(http.ResponseWriter, *http.Request, error)
}

// passthroughMethods are the methods every passthrough prefix accepts.
var passthroughMethods = []string{http.MethodGet, http.MethodPost, http.MethodPut, http.MethodDelete, http.MethodPatch}

// passthroughRoutes are the four passthrough prefixes (and LiteLLM's
// /vertex_ai alias), all five methods each: one Lambda function per provider,
// streaming, with the key also accepted in ?key= (Google SDKs send it there).
func passthroughRoutes() []Route {
	var routes []Route
	// Bedrock is called with the function's own role (SigV4).
	bedrock := append(slices.Clone(passthroughCall), BedrockInvoke, BedrockAgents)
	for _, p := range []struct {
		prefix, function string
		provider         passthrough.Provider
		needs            []Capability
	}{
		{"/vertex-ai", "passthrough-vertex-ai", passthrough.VertexAI, passthroughCall},
		{"/vertex_ai", "passthrough-vertex-ai", passthrough.VertexAI, passthroughCall},
		{"/bedrock", "passthrough-bedrock", passthrough.Bedrock, bedrock},
		{"/anthropic", "passthrough-anthropic", passthrough.Anthropic, passthroughCall},
		{"/gemini", "passthrough-gemini", passthrough.Gemini, passthroughCall},
	} {
		for _, m := range passthroughMethods {
			routes = append(routes, Route{
				Method: m, Pattern: p.prefix + "/{endpoint...}", Function: p.function, Access: AnyKey,
				Stream: true, KeyInQuery: true, Spends: true, Needs: p.needs, AWSErrors: p.provider == passthrough.Bedrock,
				handler: func(s *Services) HandlerFunc { return s.Passthrough.Handler(p.provider) },
			})
		}
	}
	return routes
}

// Routes returns the route table. Every route is declared here once, with
// what its handler touches (readiness pings the table; an upload stores the
// bytes, then the record, and deletes the bytes of a refused one); the SAM
// template is checked against it.
func Routes() []Route {
	routes := []Route{
		{Method: "GET", Pattern: "/health/liveliness", Function: "health", Access: Public, handler: func(s *Services) HandlerFunc { return s.liveliness }},
		{Method: "GET", Pattern: "/health/readiness", Function: "health", Access: Public, Needs: []Capability{RecordsRead}, handler: func(s *Services) HandlerFunc { return s.readiness }},

		{Method: "GET", Pattern: "/ui", Function: "ui", Access: Public, handler: func(s *Services) HandlerFunc { return s.page() }},
		{Method: "GET", Pattern: "/ui/{asset}", Function: "ui", Access: Public, handler: func(s *Services) HandlerFunc { return s.page() }},

		{Method: "GET", Pattern: "/v1/models", Function: "models", Access: AnyKey, handler: func(s *Services) HandlerFunc { return s.listModels }},
		// The local process's metrics; in the cloud each function writes
		// its own as EMF lines, so this answers where they are.
		{Method: "GET", Pattern: "/metrics", Function: "models", Access: AdminOnly, handler: func(s *Services) HandlerFunc { return s.metricsPage }},

		{Method: "POST", Pattern: "/v1/embeddings", Function: "embeddings", Access: AnyKey, Stream: true, Spends: true, Needs: modelCall, Timeout: 300 * time.Second, handler: func(s *Services) HandlerFunc { return s.call("/v1/embeddings") }},
		{Method: "POST", Pattern: "/v1/chat/completions", Function: "chat-completions", Access: AnyKey, Stream: true, Spends: true, Needs: modelCall, handler: func(s *Services) HandlerFunc { return s.call("/v1/chat/completions") }},
		{Method: "POST", Pattern: "/chat/completions", Function: "chat-completions", Access: AnyKey, Stream: true, Spends: true, Needs: modelCall, handler: func(s *Services) HandlerFunc { return s.call("/v1/chat/completions") }},
		{Method: "POST", Pattern: "/v1/messages", Function: "messages", Access: AnyKey, Stream: true, Spends: true, Needs: modelCall, writeError: messages.WriteError, handler: func(s *Services) HandlerFunc {
			return messages.Handler(s.Operations["/v1/messages"], s.Settings.JSONBodyLimit)
		}},
		{Method: "POST", Pattern: "/v1/messages/count_tokens", Function: "messages", Access: AnyKey, Stream: true, writeError: messages.WriteError, handler: func(s *Services) HandlerFunc {
			return s.Messages.CountHandler(s.Settings.JSONBodyLimit)
		}},
		{Method: "POST", Pattern: "/v1/completions", Function: "completions", Access: AnyKey, Stream: true, Spends: true, Needs: forwardedCall, handler: func(s *Services) HandlerFunc { return s.call("/v1/completions") }},
		{Method: "POST", Pattern: "/v1/responses", Function: "responses", Access: AnyKey, Stream: true, Spends: true, Needs: forwardedCall, handler: func(s *Services) HandlerFunc { return s.call("/v1/responses") }},
		{Method: "POST", Pattern: "/moderations", Function: "moderations", Access: AnyKey, Stream: true, Spends: true, Needs: modelCall, Timeout: 300 * time.Second, handler: func(s *Services) HandlerFunc { return s.call("/v1/moderations") }},
		{Method: "POST", Pattern: "/v1/moderations", Function: "moderations", Access: AnyKey, Stream: true, Spends: true, Needs: modelCall, handler: func(s *Services) HandlerFunc { return s.call("/v1/moderations") }},

		{Method: "POST", Pattern: "/v1/files", Function: "files-upload", Access: AnyKey, Needs: []Capability{RecordsWrite, FilesWrite, FilesDelete}, Memory: 1024, handler: func(s *Services) HandlerFunc { return s.filesAPI().Upload }},
		{Method: "GET", Pattern: "/v1/files", Function: "files-list", Access: AnyKey, handler: func(s *Services) HandlerFunc { return s.filesAPI().List }},
		{Method: "GET", Pattern: "/v1/files/{file_id}", Function: "file-get", Access: AnyKey, handler: func(s *Services) HandlerFunc { return s.filesAPI().Get }},
		{Method: "DELETE", Pattern: "/v1/files/{file_id}", Function: "file-delete", Access: AnyKey, Needs: []Capability{RecordsWrite, FilesDelete}, handler: func(s *Services) HandlerFunc { return s.filesAPI().Delete }},
		{Method: "GET", Pattern: "/v1/files/{file_id}/content", Function: "file-content", Access: AnyKey, Stream: true, Needs: []Capability{FilesRead}, Memory: 1024, Timeout: 300 * time.Second, handler: func(s *Services) HandlerFunc { return s.filesAPI().Content }},
		{Method: "POST", Pattern: "/v1/uploads", Function: "uploads", Access: AnyKey, Needs: []Capability{RecordsWrite}, Memory: 1024, handler: func(s *Services) HandlerFunc { return s.filesAPI().CreateUpload }},
		{Method: "POST", Pattern: "/v1/uploads/{upload_id}/parts", Function: "uploads", Access: AnyKey, Needs: []Capability{RecordsWrite, FilesWrite, FilesDelete}, handler: func(s *Services) HandlerFunc { return s.filesAPI().AddPart }},
		{Method: "POST", Pattern: "/v1/uploads/{upload_id}/complete", Function: "uploads", Access: AnyKey, Needs: []Capability{RecordsWrite, FilesRead, FilesDelete}, handler: func(s *Services) HandlerFunc { return s.filesAPI().CompleteUpload }},
		{Method: "POST", Pattern: "/v1/uploads/{upload_id}/cancel", Function: "uploads", Access: AnyKey, Needs: []Capability{RecordsWrite, FilesDelete}, handler: func(s *Services) HandlerFunc { return s.filesAPI().CancelUpload }},

		{Method: "POST", Pattern: "/v1/batches", Function: "batches-create", Access: AnyKey, Spends: true, Needs: nativeBatch(RecordsWrite, WorkSend, FilesRead, FilesWrite, FilesDelete), handler: func(s *Services) HandlerFunc { return s.batchesAPI().Create }},
		{Method: "GET", Pattern: "/v1/batches", Function: "batches-list", Access: AnyKey, handler: func(s *Services) HandlerFunc { return s.batchesAPI().List }},
		{Method: "GET", Pattern: "/v1/batches/{batch_id}", Function: "batch-get", Access: AnyKey, Needs: nativeBatch(RecordsWrite, FilesRead, FilesWrite, FilesDelete), handler: func(s *Services) HandlerFunc { return s.batchesAPI().Get }},
		{Method: "POST", Pattern: "/v1/batches/{batch_id}/cancel", Function: "batch-cancel", Access: AnyKey, Needs: nativeBatch(RecordsWrite, WorkSend), handler: func(s *Services) HandlerFunc { return s.batchesAPI().Cancel }},

		{Method: "POST", Pattern: "/team/new", Function: "admin", Access: AdminOnly, Needs: []Capability{RecordsWrite}, handler: func(s *Services) HandlerFunc { return s.admin().TeamNew }},
		{Method: "GET", Pattern: "/team/info", Function: "admin", Access: AnyKey, handler: func(s *Services) HandlerFunc { return s.admin().TeamInfo }},
		{Method: "GET", Pattern: "/team/list", Function: "admin", Access: AdminOnly, handler: func(s *Services) HandlerFunc { return s.admin().TeamList }},
		{Method: "POST", Pattern: "/key/generate", Function: "admin", Access: AdminOnly, Needs: []Capability{RecordsWrite}, handler: func(s *Services) HandlerFunc { return s.admin().KeyGenerate }},
		{Method: "GET", Pattern: "/key/info", Function: "admin", Access: AnyKey, handler: func(s *Services) HandlerFunc { return s.admin().KeyInfo }},
		{Method: "GET", Pattern: "/key/list", Function: "admin", Access: AnyKey, handler: func(s *Services) HandlerFunc { return s.admin().KeyList }},
		{Method: "POST", Pattern: "/key/delete", Function: "admin", Access: AdminOnly, Needs: []Capability{RecordsWrite}, handler: func(s *Services) HandlerFunc { return s.admin().KeyDelete }},
		{Method: "POST", Pattern: "/key/update", Function: "admin", Access: AdminOnly, Needs: []Capability{RecordsWrite}, handler: func(s *Services) HandlerFunc { return s.admin().KeyUpdate }},
		{Method: "POST", Pattern: "/team/update", Function: "admin", Access: AdminOnly, Needs: []Capability{RecordsWrite}, handler: func(s *Services) HandlerFunc { return s.admin().TeamUpdate }},
		// Spend per day and team, key or model (the admin: every team's;
		// a team key: its own team's).
		{Method: "GET", Pattern: "/global/spend/report", Function: "admin", Access: AnyKey, handler: func(s *Services) HandlerFunc { return s.Reports.Handler }},

		// Team logging callbacks (the admin or a key of the team): one
		// function each, so only the add seals secrets.
		{Method: "POST", Pattern: "/team/{team_id}/callback", Function: "team-callback-add", Access: AnyKey, Needs: []Capability{RecordsWrite, Seal}, handler: func(s *Services) HandlerFunc { return s.callbacksAPI().Add }},
		{Method: "GET", Pattern: "/team/{team_id}/callback", Function: "team-callback-get", Access: AnyKey, handler: func(s *Services) HandlerFunc { return s.callbacksAPI().Get }},
		{Method: "DELETE", Pattern: "/team/{team_id}/callback/{callback_name}", Function: "team-callback-delete", Access: AnyKey, Needs: []Capability{RecordsWrite}, handler: func(s *Services) HandlerFunc { return s.callbacksAPI().Delete }},
		{Method: "POST", Pattern: "/team/{team_id}/disable_logging", Function: "team-disable-logging", Access: AnyKey, Needs: []Capability{RecordsWrite}, handler: func(s *Services) HandlerFunc { return s.callbacksAPI().DisableLogging }},
		{Method: "GET", Pattern: "/team/{team_id}/audit", Function: "team-audit", Access: AnyKey, handler: func(s *Services) HandlerFunc { return s.callbacksAPI().Audit }},
	}
	return append(routes, passthroughRoutes()...)
}

// Functions lists the distinct Lambda functions of the route table, in
// table order.
func Functions() []string {
	var out []string
	seen := map[string]bool{}
	for _, r := range Routes() {
		if !seen[r.Function] {
			seen[r.Function] = true
			out = append(out, r.Function)
		}
	}
	return out
}

// Streams reports whether the Lambda function fn answers streamed. Its routes
// must all stream or all be buffered: API Gateway sets the transfer mode per
// integration, and one binary answers in one format. A function without
// routes, or with both kinds, is an error.
func Streams(fn string) (bool, error) {
	var streaming, buffered []string
	for _, r := range Routes() {
		switch {
		case r.Function != fn:
		case r.Stream:
			streaming = append(streaming, r.Method+" "+r.Pattern)
		default:
			buffered = append(buffered, r.Method+" "+r.Pattern)
		}
	}
	if len(streaming) > 0 && len(buffered) > 0 {
		return false, fmt.Errorf("server: function %q mixes streaming routes (%s) and buffered ones (%s)",
			fn, strings.Join(streaming, ", "), strings.Join(buffered, ", "))
	}
	if len(streaming) == 0 && len(buffered) == 0 {
		return false, fmt.Errorf("server: no route is served by function %q", fn)
	}
	return len(streaming) > 0, nil
}
