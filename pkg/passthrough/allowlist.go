package passthrough

import (
	"encoding/json"
	"errors"
	"net/http"
	"slices"
	"strings"

	"github.com/sluice-gateway/sluice/pkg/api"
	"github.com/sluice-gateway/sluice/pkg/jsonscan"
)

// A key limited to some models (auth.Principal.RestrictsModels) may use a
// passthrough prefix only for calls whose model sluice reads where the
// provider does, and allows; everything else fails closed. Keys without a
// model list are not looked at here: their bodies stream untouched.

// modelSource is where a provider reads the model a request runs.
type modelSource int

const (
	// sourceUnknown: the request may run a model sluice cannot name (a
	// Vertex endpoint id, a tuned model, an agent): refused.
	sourceUnknown modelSource = iota
	// sourceNone: the request runs no model (reads, deletes, file uploads,
	// cancels).
	sourceNone
	// sourcePath: the path names it (models/{model}:{action},
	// model/{modelId}/{action}), checked with the path.
	sourcePath
	// sourceBody: a member of the JSON body names it.
	sourceBody
	// sourceBatch: each request of an Anthropic message batch names its
	// own, in params.model.
	sourceBatch
)

// modelRule is how a request names its model: where, and for sourceBody,
// in which top-level member.
type modelRule struct {
	source modelSource
	member string
}

// methodOverrides are headers with which some APIs (Google's) let a request
// be served as another method: a restricted key may not send them, since
// only a POST is checked for the model it runs.
var methodOverrides = []string{"X-Http-Method-Override", "X-Http-Method", "X-Method-Override"}

// modelRuleOf says how the request method ep names its model at provider,
// pathModel being the model its path names ("" when none), hasBody whether
// the request has a body. A read or delete without a body runs no model;
// any request with one — a PUT, a PATCH, a GET or DELETE with a body — is
// read as a POST to its endpoint would be, since sluice cannot know what a
// provider (or a proxy before it) does with a body on another method.
func modelRuleOf(provider Provider, method string, ep endpoint, pathModel string, hasBody bool) modelRule {
	switch {
	case pathModel != "":
		return modelRule{source: sourcePath}
	case method != http.MethodPost && !hasBody:
		return modelRule{source: sourceNone}
	}
	segs := ep.segs
	last := segs[len(segs)-1]
	switch provider {
	case Anthropic:
		// The Messages API and its relatives name the model in the body;
		// a batch names one per request.
		switch {
		case len(segs) == 2 && segs[1] == "files", last == "cancel":
			return modelRule{source: sourceNone}
		case len(segs) == 3 && segs[1] == "messages" && segs[2] == "batches":
			return modelRule{source: sourceBatch}
		}
		return modelRule{source: sourceBody, member: "model"}
	case Gemini:
		// Native calls name the model in the path; the OpenAI-compatible
		// API (v1beta/openai/...) and a context cache in the body.
		if segs[0] == "upload" {
			return modelRule{source: sourceNone} // a media upload: upload/v1beta/files
		}
		rest := withoutVersion(segs)
		switch {
		case len(rest) > 1 && rest[0] == "openai", len(rest) == 1 && rest[0] == "cachedContents":
			return modelRule{source: sourceBody, member: "model"}
		case len(rest) == 1 && rest[0] == "files", strings.HasSuffix(last, ":cancel"):
			return modelRule{source: sourceNone}
		}
	case VertexAI:
		// Publisher models are named in the path; the OpenAI-compatible
		// endpoint (endpoints/openapi/...), a context cache and a batch
		// prediction job in the body. Any other endpoint serves whatever
		// was deployed to it, which its id does not say.
		rest := withoutVersion(segs)
		if len(rest) >= 4 && rest[0] == "projects" && rest[2] == "locations" {
			rest = rest[4:]
		}
		switch {
		case len(rest) > 2 && rest[0] == "endpoints" && rest[1] == "openapi",
			len(rest) == 1 && (rest[0] == "cachedContents" || rest[0] == "batchPredictionJobs"):
			return modelRule{source: sourceBody, member: "model"}
		case len(rest) > 0 && strings.HasSuffix(last, ":cancel"):
			return modelRule{source: sourceNone}
		}
	case Bedrock:
		// Model calls are model/{modelId}/{action}; the OpenAI-compatible
		// APIs (openai/v1/chat/completions, openai/v1/responses and
		// v1/chat/completions) and an asynchronous invocation name the
		// model in the body. Agents, knowledge bases and flows run models
		// their configuration names, not the request.
		switch {
		case len(segs) > 2 && segs[0] == "openai", len(segs) > 1 && segs[0] == "v1":
			return modelRule{source: sourceBody, member: "model"}
		case len(segs) == 1 && segs[0] == "async-invoke":
			return modelRule{source: sourceBody, member: "modelId"}
		case segs[0] == "guardrail" || segs[0] == "sessions":
			return modelRule{source: sourceNone}
		}
	}
	return modelRule{source: sourceUnknown}
}

// withoutVersion drops a leading API version segment (v1, v1beta).
func withoutVersion(segs []string) []string {
	if len(segs) > 0 && isAPIVersion(segs[0]) {
		return segs[1:]
	}
	return segs
}

// checkRestricted refuses, for a key limited to some models, a request
// that would run a model sluice cannot name where the provider reads it
// (403), or whose body it could not read as the provider would (400). It
// returns the rule the request's body must then pass (checkBody).
func checkRestricted(r *http.Request, c *call, ep endpoint) (modelRule, error) {
	for _, h := range methodOverrides {
		if _, ok := r.Header[h]; ok {
			return modelRule{}, api.InvalidValue(h, "A key limited to some models may not send %s on passthrough routes.", h)
		}
	}
	hasBody := r.Body != nil && r.Body != http.NoBody && r.ContentLength != 0
	rule := modelRuleOf(c.provider, r.Method, ep, c.model, hasBody)
	switch rule.source {
	case sourceUnknown:
		return rule, api.Forbidden("This key is limited to some models, and sluice cannot tell which model %s %s would run (an endpoint id, a tuned model or an agent runs whatever it was set up with), so it is refused: only calls that name their model where the provider reads it are allowed.",
			r.Method, "/"+prefixes[c.provider][0]+truncate(ep.escaped, 200))
	case sourceBody, sourceBatch:
		if enc := r.Header.Get("Content-Encoding"); enc != "" && !strings.EqualFold(enc, "identity") {
			return rule, api.InvalidValue("Content-Encoding", "A key limited to some models must send this request's body unencoded (not %s), so that sluice can read its model.", truncate(enc, 40))
		}
		if mt := mediaType(r.Header.Get("Content-Type")); mt != "application/json" {
			return rule, api.InvalidValue("Content-Type", "A key limited to some models must send this request's body as application/json (not %q), so that sluice can read its model.", truncate(mt, 60))
		}
	}
	return rule, nil
}

// modelsOfBody returns the models a body names under rule: one for
// sourceBody, one per request for sourceBatch. The body must be exactly one
// JSON object (no byte-order mark, nothing after it) naming each model once,
// as a string, in the member spelt exactly so (a provider ignores "Model",
// and one parser keeps the first of two names, another the last).
func modelsOfBody(body []byte, rule modelRule) ([]string, error) {
	if !json.Valid(body) {
		return nil, api.InvalidJSON("A key limited to some models must send a body that is exactly one JSON object, so that sluice can read its model as the provider would.")
	}
	switch rule.source {
	case sourceBody:
		m, err := memberString(body, rule.member)
		if err != nil {
			return nil, err
		}
		return []string{m}, nil
	case sourceBatch:
		raw, err := member(body, "requests")
		if err != nil {
			return nil, err
		}
		var out []string
		err = jsonscan.Elements(raw, func(req []byte) error {
			params, err := member(req, "params")
			if err != nil {
				return err
			}
			m, err := memberString(params, "model")
			if err != nil {
				return err
			}
			out = append(out, m)
			return nil
		})
		if err != nil {
			var e *api.Error
			if errors.As(err, &e) {
				return nil, err
			}
			return nil, api.InvalidValue("requests", "A key limited to some models must send 'requests' as an array of objects, each with its 'params'.")
		}
		return out, nil
	}
	return nil, nil
}

// member returns the raw value of doc's member name, which must be there
// once; doc must be an object.
func member(doc []byte, name string) ([]byte, error) {
	var (
		value []byte
		seen  int
	)
	err := jsonscan.Members(doc, func(n, v []byte) error {
		if string(n) == name {
			value, seen = v, seen+1
		}
		return nil
	})
	switch {
	case err != nil:
		return nil, api.InvalidValue(name, "A key limited to some models must send a JSON object where sluice reads '%s'.", name)
	case seen == 0:
		return nil, api.Forbidden("This key is limited to some models, and the request names none in '%s', so it is refused.", name)
	case seen > 1:
		return nil, api.InvalidValue(name, "The request names '%s' %d times; a key limited to some models must name it once.", name, seen)
	}
	return value, nil
}

// memberString returns doc's member name as a non-empty string.
func memberString(doc []byte, name string) (string, error) {
	raw, err := member(doc, name)
	if err != nil {
		return "", err
	}
	s, err := jsonscan.String(raw)
	if err != nil || s == "" {
		return "", api.InvalidValue(name, "'%s' must be a model name (a non-empty string).", name)
	}
	return s, nil
}

// bodyModelName reduces a model named in a Google body to the form its path
// would give, so that one allow-list entry covers both: a resource name
// ("models/X", "publishers/P/models/X",
// "projects/P/locations/L/publishers/P/models/X") is X, as
// ".../models/X:action" in a path is, and so is the OpenAI-compatible
// "google/X". Any other form ("meta/llama-…", "tunedModels/…") is kept whole,
// and allowed only if listed so.
func bodyModelName(p Provider, m string) string {
	if p != Gemini && p != VertexAI {
		return m
	}
	parts := strings.Split(m, "/")
	if slices.Contains(parts, "") {
		return m
	}
	switch {
	case len(parts) == 2 && (parts[0] == "models" || p == VertexAI && parts[0] == "google"),
		len(parts) == 4 && parts[0] == "publishers" && parts[2] == "models",
		len(parts) == 8 && parts[0] == "projects" && parts[2] == "locations" && parts[4] == "publishers" && parts[6] == "models":
		return parts[len(parts)-1]
	}
	return m
}

// checkBodyModels checks the models body names under rule, for c's key:
// each must be allowed (403 naming the first that is not). The first names
// the call's model in its log event.
func (s *Service) checkBodyModels(c *call, body []byte, rule modelRule) error {
	models, err := modelsOfBody(body, rule)
	if err != nil {
		return err
	}
	for i, m := range models {
		m = bodyModelName(c.provider, m)
		if !s.allowsModel(c.principal, c.provider, m) {
			return forbiddenModel(m)
		}
		if i == 0 {
			c.model = m
		}
	}
	if len(models) == 0 {
		return api.Forbidden("This key is limited to some models, and the batch names none, so it is refused.")
	}
	return nil
}
