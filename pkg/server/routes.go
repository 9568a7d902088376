// Package server declares sluice's routes — which handler serves each method
// and path, who may call it, and which Lambda function serves it in the cloud
// — and turns them into an http.Handler with the shared middleware.
package server

import "net/http"

// Access says who may call a route.
type Access int

const (
	// Public routes need no key (health checks).
	Public Access = iota
	// AnyKey routes need a valid key: a team key or the master key.
	AnyKey
	// AdminOnly routes need the master key; team keys get 403.
	AdminOnly
)

// HandlerFunc is a route handler: it returns an error instead of writing
// one, and the middleware renders it.
type HandlerFunc func(w http.ResponseWriter, r *http.Request) error

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
	handler    func(*Services) HandlerFunc
}

// passthroughMethods are the methods every passthrough prefix accepts.
var passthroughMethods = []string{http.MethodGet, http.MethodPost, http.MethodPut, http.MethodDelete, http.MethodPatch}

// Routes returns the route table. Every route is declared here once; the
// SAM template is checked against it.
func Routes() []Route {
	return []Route{
		{Method: "GET", Pattern: "/health/liveliness", Function: "health", Access: Public, handler: func(s *Services) HandlerFunc { return s.liveliness }},
		{Method: "GET", Pattern: "/health/readiness", Function: "health", Access: Public, handler: func(s *Services) HandlerFunc { return s.readiness }},

		{Method: "GET", Pattern: "/v1/models", Function: "models", Access: AnyKey, handler: func(s *Services) HandlerFunc { return s.listModels }},

		{Method: "POST", Pattern: "/team/new", Function: "admin", Access: AdminOnly, handler: func(s *Services) HandlerFunc { return s.admin().TeamNew }},
		{Method: "GET", Pattern: "/team/info", Function: "admin", Access: AnyKey, handler: func(s *Services) HandlerFunc { return s.admin().TeamInfo }},
		{Method: "GET", Pattern: "/team/list", Function: "admin", Access: AdminOnly, handler: func(s *Services) HandlerFunc { return s.admin().TeamList }},
		{Method: "POST", Pattern: "/key/generate", Function: "admin", Access: AdminOnly, handler: func(s *Services) HandlerFunc { return s.admin().KeyGenerate }},
		{Method: "GET", Pattern: "/key/info", Function: "admin", Access: AnyKey, handler: func(s *Services) HandlerFunc { return s.admin().KeyInfo }},
		{Method: "POST", Pattern: "/key/delete", Function: "admin", Access: AdminOnly, handler: func(s *Services) HandlerFunc { return s.admin().KeyDelete }},
	}
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
