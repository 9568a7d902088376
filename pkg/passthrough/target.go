package passthrough

import (
	"net/url"
	"strings"

	"github.com/sluice-gateway/sluice/pkg/api"
	"github.com/sluice-gateway/sluice/pkg/providers/bedrock"
	"github.com/sluice-gateway/sluice/pkg/providers/google"
)

// target is where one request goes.
type target struct {
	url   *url.URL
	model string // the model the path names, decoded ("" when it names none)
}

// modelFromGooglePath returns the model of a Gemini or Vertex AI path:
// ".../models/{model}[:action]" ("gemini-2.5-flash", "claude-3-5-sonnet-v2@20241022").
// Encoded slashes count as separators here, so "models%2Fx" names x too.
func modelFromGooglePath(ep endpoint) string {
	parts := strings.Split(strings.Join(ep.segs, "/"), "/")
	for i := len(parts) - 2; i >= 0; i-- {
		if parts[i] == "models" {
			m := parts[i+1]
			if j := strings.LastIndexByte(m, ':'); j >= 0 {
				m = m[:j]
			}
			return m
		}
	}
	return ""
}

// anthropicTarget: https://api.anthropic.com/{endpoint}. The model travels in
// the body.
func anthropicTarget(base *urlBase, ep endpoint, query string) target {
	return target{url: base.join(ep.escaped, query)}
}

// geminiTarget: https://generativelanguage.googleapis.com/{endpoint}.
func geminiTarget(base *urlBase, ep endpoint, query string) target {
	return target{url: base.join(ep.escaped, query), model: modelFromGooglePath(ep)}
}

// isAPIVersion reports whether seg is a Google API version segment (v1,
// v1beta, v1beta1, v1alpha): v[0-9]+((alpha|beta)[0-9]*)?, read by hand,
// as every Anthropic and Gemini call asks it (classifyObject): a regexp
// match cost ~900 instructions a call.
func isAPIVersion(seg string) bool {
	rest, ok := strings.CutPrefix(seg, "v")
	n := leadingDigits(rest)
	if !ok || n == 0 {
		return false
	}
	rest = rest[n:]
	if r, ok := strings.CutPrefix(rest, "alpha"); ok {
		rest = r
	} else if r, ok := strings.CutPrefix(rest, "beta"); ok {
		rest = r
	}
	return leadingDigits(rest) == len(rest)
}

// leadingDigits is the number of ASCII digits s starts with.
func leadingDigits(s string) int {
	i := 0
	for i < len(s) && '0' <= s[i] && s[i] <= '9' {
		i++
	}
	return i
}

// checkVertexLocation refuses a path whose location segment could not be a
// Vertex AI location, before anything else is looked at: it would become
// part of the upstream host name.
func checkVertexLocation(ep endpoint) error {
	loc, ok := "", false
	switch {
	case isAPIVersion(ep.segment(0)) && ep.segment(1) == "projects" && ep.segment(3) == "locations" && len(ep.segs) > 4:
		loc, ok = ep.segs[4], true
	case ep.segment(0) == "projects" && ep.segment(2) == "locations" && len(ep.segs) > 3:
		loc, ok = ep.segs[3], true
	}
	if ok && !google.ValidLocation(loc) {
		return api.InvalidValue("path", "%q is not a Vertex AI location.", truncate(loc, 64))
	}
	return nil
}

// vertexTarget: project and location come from the path
// (/{version}/projects/{project}/locations/{location}/...), else the
// configured defaults are inserted after the version (a path without a
// version gets v1). The host is https://{location}-aiplatform.googleapis.com,
// unless an api_base is configured.
func vertexTarget(u *upstream, ep endpoint, query string) (target, error) {
	escaped := ep.escaped
	var location string
	switch {
	case isAPIVersion(ep.segment(0)) && ep.segment(1) == "projects" && ep.segment(3) == "locations" && len(ep.segs) > 4:
		location = ep.segs[4]
	case ep.segment(0) == "projects" && ep.segment(2) == "locations" && len(ep.segs) > 3:
		// projects/... without a version: v1.
		location = ep.segs[3]
		escaped = "/v1" + escaped
	default:
		if u.project == "" {
			return target{}, api.InvalidValue("path", "The path names no project (/v1/projects/{project}/locations/{location}/...) and no vertex_project is configured for the vertex_ai passthrough.")
		}
		location = u.location
		version, rest := "v1", escaped
		if isAPIVersion(ep.segment(0)) {
			version, rest = ep.raw[0], strings.TrimPrefix(escaped, "/"+ep.raw[0])
		} else if strings.Contains(escaped, "cachedContents") {
			version = "v1beta1"
		}
		escaped = "/" + version + "/projects/" + url.PathEscape(u.project) + "/locations/" + url.PathEscape(location) + rest
	}
	if !google.ValidLocation(location) {
		return target{}, api.InvalidValue("path", "%q is not a Vertex AI location.", truncate(location, 64))
	}
	base := u.base
	if base == nil {
		base = &url.URL{Scheme: "https", Host: google.VertexHost(location)}
	}
	return target{url: joinURL(base, escaped, query), model: modelFromGooglePath(ep)}, nil
}

// agentRuntimeRoots are the first path segments of the Bedrock agent runtime
// API (InvokeAgent, Retrieve, RetrieveAndGenerate, InvokeFlow, Rerank,
// GenerateQuery, OptimizePrompt, the session APIs); everything else is the
// runtime API.
var agentRuntimeRoots = map[string]bool{
	"agents": true, "knowledgebases": true, "flows": true, "retrieveAndGenerate": true,
	"retrieveAndGenerateStream": true, "rerank": true, "generateQuery": true,
	"optimize-prompt": true, "sessions": true,
}

// bedrockTarget: agent paths go to bedrock-agent-runtime, the rest to
// bedrock-runtime, in the configured region. Runtime model paths
// (/model/{modelId}/{action}) are re-encoded the way the AWS SDK encodes
// them — one segment with ':' as %3A and an ARN's '/' as %2F — whether the
// client sent the ARN encoded or with literal slashes.
func bedrockTarget(u *upstream, ep endpoint, query string) target {
	escaped, model := ep.escaped, ""
	if ep.segment(0) == "model" && len(ep.segs) >= 3 && ep.segs[len(ep.segs)-1] != "" {
		model = strings.Join(ep.segs[1:len(ep.segs)-1], "/")
		escaped = bedrock.ModelPath(model, ep.raw[len(ep.raw)-1])
	}
	base := u.base
	if base == nil {
		host := bedrock.RuntimeEndpoint(u.aws.Region)
		if agentRuntimeRoots[ep.segment(0)] {
			host = bedrock.AgentRuntimeEndpoint(u.aws.Region)
		}
		base, _ = url.Parse(host) // the region was validated
	}
	return target{url: joinURL(base, escaped, query), model: model}
}
