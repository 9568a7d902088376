package google

import "regexp"

// DefaultVertexLocation is the Vertex AI location used when none is configured
// (LiteLLM's default).
const DefaultVertexLocation = "us-central1"

var (
	// locationPattern is what a Vertex AI location may look like: it
	// becomes part of a host name.
	locationPattern = regexp.MustCompile(`^[a-z][a-z0-9]*(-[a-z0-9]+)*$`)
	// projectPattern is a Google Cloud project id or number: it becomes a
	// path segment.
	projectPattern = regexp.MustCompile(`^[a-z0-9][a-z0-9.:-]{0,127}$`)
)

// ValidLocation reports whether location can name a Vertex AI location.
func ValidLocation(location string) bool {
	return len(location) <= 63 && locationPattern.MatchString(location)
}

// ValidProject reports whether project can name a Google Cloud project.
func ValidProject(project string) bool { return projectPattern.MatchString(project) }

// VertexHost is the Vertex AI host of a location, as the Google SDKs pick
// it: {location}-aiplatform.googleapis.com; aiplatform.googleapis.com for
// the global location; aiplatform.{us,eu}.rep.googleapis.com for the
// multi-regions. location must be ValidLocation.
func VertexHost(location string) string {
	switch location {
	case "global":
		return "aiplatform.googleapis.com"
	case "us", "eu":
		return "aiplatform." + location + ".rep.googleapis.com"
	}
	return location + "-aiplatform.googleapis.com"
}

// VertexEndpoint is the Vertex AI base URL of a location: https:// and its
// VertexHost.
func VertexEndpoint(location string) string { return "https://" + VertexHost(location) }
