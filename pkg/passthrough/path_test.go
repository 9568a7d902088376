package passthrough

import (
	"net/url"
	"path"
	"regexp"
	"strings"
	"testing"

	"github.com/sluice-gateway/sluice/pkg/providers/bedrock"
)

func TestParseEndpoint(t *testing.T) {
	for _, tc := range []struct {
		rest string
		ok   bool
	}{
		{"/v1/messages", true},
		{"/v1/messages/count_tokens", true},
		{"/v1beta/models/gemini-2.5-flash:streamGenerateContent", true},
		{"/v1/projects/p/locations/us-east5/publishers/anthropic/models/claude-3-5-sonnet-v2@20241022:rawPredict", true},
		{"/model/anthropic.claude-3-5-sonnet-20241022-v2%3A0/converse", true},
		{"/model/arn%3Aaws%3Abedrock%3Aus-east-1%3A123456789012%3Aapplication-inference-profile%2Fabc123/converse", true},
		{"/sessions/", true},                  // trailing slash (bedrock agent CreateSession)
		{"/v1/files/a%20b", true},             // encoded space
		{"/v1/x%3Fy%23z", true},               // encoded ? and # stay in the path
		{"", false},                           // no endpoint
		{"/", false},                          // no endpoint
		{"/v1/../admin", false},               // plain dot-dot
		{"/v1/./messages", false},             // plain dot
		{"/v1/%2e%2e/admin", false},           // encoded dot-dot
		{"/v1/%2E%2e/admin", false},           // mixed case
		{"/v1/.%2e/admin", false},             // half encoded
		{"/v1/%2e/admin", false},              // encoded dot
		{"/v1/a%2F..%2Fb", false},             // dot-dot formed by encoded slashes
		{"/v1/a%2F.%2Fb", false},              // dot formed by encoded slashes
		{"/v1/..%2Fadmin", false},             // dot-dot then encoded slash
		{"/v1/%2F%2Fevil.com", false},         // encoded slashes forming an absolute path
		{"/v1/a%2F", false},                   // encoded slash leaving an empty part
		{"//evil.com/v1/messages", false},     // network-path reference
		{"/v1//messages", false},              // empty segment
		{"/https:%2F%2Fevil.com/x", false},    // scheme in the first segment
		{"/http:/evil.com", false},            // scheme
		{"/javascript:alert(1)", false},       // scheme
		{"/v1/a%5Cb", false},                  // encoded backslash
		{"/v1/a\\b", false},                   // raw backslash
		{"/v1/a%0d%0aX-Injected:%201", false}, // CRLF
		{"/v1/a%0aX", false},                  // LF
		{"/v1/a%00b", false},                  // NUL
		{"/v1/a%7fb", false},                  // DEL
		{"/v1/a%zz", false},                   // malformed escape
		{"/v1/a%2", false},                    // truncated escape
		{"v1/messages", false},                // no leading slash
	} {
		_, err := parseEndpoint(tc.rest)
		if (err == nil) != tc.ok {
			t.Errorf("parseEndpoint(%q) err = %v, want ok=%v", tc.rest, err, tc.ok)
		}
	}
}

func TestSplitPrefix(t *testing.T) {
	for in, want := range map[string][2]string{
		"/anthropic/v1/messages": {"anthropic", "/v1/messages"},
		"/vertex_ai/v1/x":        {"vertex_ai", "/v1/x"},
		"/gemini":                {"gemini", ""},
		"/gemini/":               {"gemini", "/"},
	} {
		p, r := splitPrefix(in)
		if p != want[0] || r != want[1] {
			t.Errorf("splitPrefix(%q) = %q, %q", in, p, r)
		}
	}
}

func TestForwardQuery(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{"", ""},
		{"alt=sse", "alt=sse"},
		{"key=sk-sluice&alt=sse", "alt=sse"},
		{"alt=sse&key=sk-sluice", "alt=sse"},
		{"KEY=sk-sluice&alt=sse", "alt=sse"},
		{"k%65y=sk-sluice&alt=sse", "alt=sse"},
		{"access_token=ya29.x&pageSize=10&oauth_token=y", "pageSize=10"},
		{"%24httpHeaders=X-Goog-Api-Key%3Ax&a=1", "a=1"},
		{"X-Amz-Credential=AKID%2F20240101&X-Amz-Signature=abc&maxResults=5", "maxResults=5"},
		{"b=2&a=1&b=3", "b=2&a=1&b=3"}, // order and repeats kept
		{"q=a%20b+c&empty=&flag", "q=a%20b+c&empty=&flag"},
		{"&&a=1&&", "a=1"},
		{"key", ""},
		// Every spelling a provider, framework or proxy could read as key.
		{"alt=sse;key=sk-sluice", "alt=sse"},
		{"key=sk-sluice;alt=sse&b=1", "alt=sse&b=1"},
		{"key[]=sk-sluice&alt=sse", "alt=sse"},
		{"key%5B%5D=sk-sluice&alt=sse", "alt=sse"},
		{"key%255B%255D=sk-sluice&alt=sse", "alt=sse"},
		{"key[0]=sk-sluice&key.x=y&alt=sse", "alt=sse"},
		{"%24key=sk-sluice&alt=sse", "alt=sse"},
		{"key+=sk-sluice&%20key=x&alt=sse", "alt=sse"},
		{"ACCESS_TOKEN[]=ya29&alt=sse", "alt=sse"},
		{"filter=a;b&q=x", "filter=a;b&q=x"},
		{"keys=1&monkey=2&keyword=3", "keys=1&monkey=2&keyword=3"},
	} {
		got, err := forwardQuery(tc.in)
		if err != nil || got != tc.want {
			t.Errorf("forwardQuery(%q) = %q, %v; want %q", tc.in, got, err, tc.want)
		}
	}
	// A name that cannot be decoded cannot be checked: refused.
	if _, err := forwardQuery("k%zzy=1"); err == nil {
		t.Error("forwardQuery accepted a malformed parameter name")
	}
}

func TestJoinURLKeepsTheBaseHost(t *testing.T) {
	base, _ := url.Parse("https://api.anthropic.com/base")
	u := joinURL(base, "/model/a%3Ab%2Fc/converse", "x=1")
	if u.Host != "api.anthropic.com" || u.Scheme != "https" {
		t.Fatalf("url %s", u)
	}
	if got := u.String(); got != "https://api.anthropic.com/base/model/a%3Ab%2Fc/converse?x=1" {
		t.Errorf("url %s", got)
	}
	if u.RequestURI() != "/base/model/a%3Ab%2Fc/converse?x=1" {
		t.Errorf("request URI %s", u.RequestURI())
	}
}

func TestVertexTarget(t *testing.T) {
	ts := &upstream{provider: VertexAI, project: "def-proj", location: "europe-west4"}
	for _, tc := range []struct {
		rest, want, model string
		bad               bool
	}{
		{rest: "/v1/projects/p1/locations/us-east5/publishers/anthropic/models/claude-3-5-sonnet-v2@20241022:rawPredict",
			want:  "https://us-east5-aiplatform.googleapis.com/v1/projects/p1/locations/us-east5/publishers/anthropic/models/claude-3-5-sonnet-v2@20241022:rawPredict",
			model: "claude-3-5-sonnet-v2@20241022"},
		{rest: "/v1beta1/projects/p1/locations/global/publishers/google/models/gemini-2.5-flash:generateContent",
			want: "https://aiplatform.googleapis.com/v1beta1/projects/p1/locations/global/publishers/google/models/gemini-2.5-flash:generateContent", model: "gemini-2.5-flash"},
		{rest: "/v1/projects/p1/locations/us/publishers/google/models/gemini-2.5-pro:generateContent",
			want: "https://aiplatform.us.rep.googleapis.com/v1/projects/p1/locations/us/publishers/google/models/gemini-2.5-pro:generateContent", model: "gemini-2.5-pro"},
		{rest: "/v1/publishers/google/models/gemini-2.5-flash:generateContent",
			want: "https://europe-west4-aiplatform.googleapis.com/v1/projects/def-proj/locations/europe-west4/publishers/google/models/gemini-2.5-flash:generateContent", model: "gemini-2.5-flash"},
		{rest: "/publishers/google/models/gemini-2.5-flash:countTokens",
			want: "https://europe-west4-aiplatform.googleapis.com/v1/projects/def-proj/locations/europe-west4/publishers/google/models/gemini-2.5-flash:countTokens", model: "gemini-2.5-flash"},
		{rest: "/cachedContents", want: "https://europe-west4-aiplatform.googleapis.com/v1beta1/projects/def-proj/locations/europe-west4/cachedContents"},
		{rest: "/projects/p2/locations/asia-northeast1/endpoints/123:predict",
			want: "https://asia-northeast1-aiplatform.googleapis.com/v1/projects/p2/locations/asia-northeast1/endpoints/123:predict"},
		{rest: "/v1/projects/p1/locations/evil.com%2Fx/publishers/google/models/m:generateContent", bad: true},
		{rest: "/v1/projects/p1/locations/Evil.Com/publishers/google/models/m:generateContent", bad: true},
		{rest: "/v1/projects/p1/locations/us-east5@evil.com/x", bad: true},
	} {
		ep, err := parseEndpoint(tc.rest)
		if err != nil {
			if !tc.bad {
				t.Errorf("%s: %v", tc.rest, err)
			}
			continue
		}
		got, err := vertexTarget(ts, ep, "")
		if tc.bad {
			if err == nil {
				t.Errorf("%s: accepted, url %s", tc.rest, got.url)
			}
			continue
		}
		if err != nil || got.url.String() != tc.want || got.model != tc.model {
			t.Errorf("%s:\n got %v %q %v\nwant %s %q", tc.rest, got.url, got.model, err, tc.want, tc.model)
		}
	}
	// Without a default project, a path that names none is a clear 400.
	ep, _ := parseEndpoint("/v1/publishers/google/models/m:generateContent")
	if _, err := vertexTarget(&upstream{provider: VertexAI, location: "us-central1"}, ep, ""); err == nil {
		t.Error("no project: accepted")
	}
	// A configured api_base replaces the host for every location.
	base, _ := url.Parse("http://127.0.0.1:9999")
	ep, _ = parseEndpoint("/v1/projects/p/locations/us-east5/publishers/google/models/m:generateContent")
	got, _ := vertexTarget(&upstream{provider: VertexAI, base: base}, ep, "alt=sse")
	if got.url.String() != "http://127.0.0.1:9999/v1/projects/p/locations/us-east5/publishers/google/models/m:generateContent?alt=sse" {
		t.Errorf("api_base: %s", got.url)
	}
}

func TestBedrockTarget(t *testing.T) {
	auth, err := bedrock.NewAuth(t.Context(), bedrock.Keys{Region: "eu-central-1", AccessKeyID: "A", SecretAccessKey: "s"}, bedrock.Keys{}, nil)
	if err != nil {
		t.Fatal(err)
	}
	u := &upstream{provider: Bedrock, aws: auth}
	const arn = "arn:aws:bedrock:eu-central-1:123456789012:application-inference-profile/abc123"
	for _, tc := range []struct{ rest, want, model string }{
		{"/model/anthropic.claude-3-5-sonnet-20241022-v2%3A0/converse",
			"https://bedrock-runtime.eu-central-1.amazonaws.com/model/anthropic.claude-3-5-sonnet-20241022-v2%3A0/converse", "anthropic.claude-3-5-sonnet-20241022-v2:0"},
		// A literal ':' is encoded as the SDK would.
		{"/model/anthropic.claude-v2:1/invoke", "https://bedrock-runtime.eu-central-1.amazonaws.com/model/anthropic.claude-v2%3A1/invoke", "anthropic.claude-v2:1"},
		// An ARN with its slash encoded stays one segment…
		{"/model/" + url.PathEscape(arn) + "/converse-stream",
			"https://bedrock-runtime.eu-central-1.amazonaws.com/model/arn%3Aaws%3Abedrock%3Aeu-central-1%3A123456789012%3Aapplication-inference-profile%2Fabc123/converse-stream", arn},
		// …and one sent with a literal slash is encoded into one.
		{"/model/" + arn + "/invoke",
			"https://bedrock-runtime.eu-central-1.amazonaws.com/model/arn%3Aaws%3Abedrock%3Aeu-central-1%3A123456789012%3Aapplication-inference-profile%2Fabc123/invoke", arn},
		{"/agents/AG1/agentAliases/AL1/sessions/s1/text", "https://bedrock-agent-runtime.eu-central-1.amazonaws.com/agents/AG1/agentAliases/AL1/sessions/s1/text", ""},
		{"/knowledgebases/KB1/retrieve", "https://bedrock-agent-runtime.eu-central-1.amazonaws.com/knowledgebases/KB1/retrieve", ""},
		{"/retrieveAndGenerate", "https://bedrock-agent-runtime.eu-central-1.amazonaws.com/retrieveAndGenerate", ""},
		{"/rerank", "https://bedrock-agent-runtime.eu-central-1.amazonaws.com/rerank", ""},
		{"/async-invoke", "https://bedrock-runtime.eu-central-1.amazonaws.com/async-invoke", ""},
	} {
		ep, err := parseEndpoint(tc.rest)
		if err != nil {
			t.Fatalf("%s: %v", tc.rest, err)
		}
		got := bedrockTarget(u, ep, "")
		if got.url.String() != tc.want || got.model != tc.model {
			t.Errorf("%s:\n got %s %q\nwant %s %q", tc.rest, got.url, got.model, tc.want, tc.model)
		}
	}
}

func TestModelFromGooglePath(t *testing.T) {
	for rest, want := range map[string]string{
		"/v1beta/models/gemini-2.5-flash:generateContent": "gemini-2.5-flash",
		"/v1beta/models/gemini-2.5-flash":                 "gemini-2.5-flash",
		"/v1beta/models":                                  "",
		"/v1beta/files/abc":                               "",
		"/v1/projects/p/locations/l/publishers/anthropic/models/claude-3-5-haiku@20241022:streamRawPredict": "claude-3-5-haiku@20241022",
	} {
		ep, err := parseEndpoint(rest)
		if err != nil {
			t.Fatal(err)
		}
		if got := modelFromGooglePath(ep); got != want {
			t.Errorf("%s: %q, want %q", rest, got, want)
		}
	}
}

// FuzzParseEndpoint checks the path handling's promises on any input: it
// never panics, and an accepted path, joined onto a base, keeps the base's
// scheme and host, stays under the base path, decodes to a clean path (no
// dot or empty segments, no backslash, no control character), and survives
// a round trip through the URL parser with the same host.
func FuzzParseEndpoint(f *testing.F) {
	for _, s := range []string{
		"/v1/messages", "/model/a%3Ab/converse", "/v1/%2e%2e/x", "/v1/a%2F..%2Fb", "//evil.com/x",
		"/https:%2F%2Fevil.com", "/v1/a%0d%0ab", "/v1/a%5Cb", "/sessions/", "/a@b:c/d", "/%", "/v1/%C0%AE%C0%AE/x",
	} {
		f.Add(s, "alt=sse&key=k")
	}
	base, _ := url.Parse("https://upstream.example.com/base")
	f.Fuzz(func(t *testing.T, rest, query string) {
		ep, err := parseEndpoint(rest)
		q, qerr := forwardQuery(query)
		if qerr == nil {
			for part := range strings.FieldsFuncSeq(q, func(r rune) bool { return r == '&' || r == ';' }) {
				name, _, _ := strings.Cut(part, "=")
				if dec, err := url.QueryUnescape(name); err == nil && isCredentialParam(dec) {
					t.Fatalf("credential parameter %q forwarded from %q", name, query)
				}
			}
		} else {
			q = ""
		}
		if err != nil {
			return
		}
		// The segments decode as url.PathUnescape decodes them, and each
		// passes badSegment's reference: split at every decoded slash.
		for i, raw := range ep.raw {
			if want, _ := url.PathUnescape(raw); ep.segs[i] != want && raw != "" {
				t.Fatalf("segment %q decoded to %q, want %q", raw, ep.segs[i], want)
			}
			for part := range strings.SplitSeq(ep.segs[i], "/") {
				if part == "." || part == ".." || part == "" && ep.segs[i] != "" {
					t.Fatalf("segment %q of %q passed", ep.segs[i], rest)
				}
			}
		}
		u := joinURL(base, ep.escaped, q)
		if u.Scheme != "https" || u.Host != "upstream.example.com" {
			t.Fatalf("re-aimed: %s", u)
		}
		// The base's path and the request's, decoded apart (urlBase),
		// decode as their join would.
		if whole, err := url.PathUnescape(u.RawPath); err == nil && whole != u.Path {
			t.Fatalf("path %q decodes to %q, joined as %q", u.RawPath, whole, u.Path)
		}
		if !strings.HasPrefix(u.Path, "/base/") {
			t.Fatalf("left the base path: %q", u.Path)
		}
		// Fully decoded (an encoded slash counts as a separator), the path is clean.
		dec := u.Path
		clean := path.Clean(dec)
		if strings.HasSuffix(dec, "/") && clean != "/" {
			clean += "/"
		}
		if clean != dec {
			t.Fatalf("decoded path %q is not clean (%q) from %q", dec, clean, rest)
		}
		if strings.ContainsAny(dec, "\\\x00\r\n") {
			t.Fatalf("decoded path %q has a forbidden byte", dec)
		}
		back, perr := url.Parse(u.String())
		if perr != nil || back.Host != "upstream.example.com" || back.EscapedPath() != u.EscapedPath() {
			t.Fatalf("round trip of %s: %v %v", u, back, perr)
		}
	})
}

// apiVersionPattern is the rule isAPIVersion reads by hand.
var apiVersionPattern = regexp.MustCompile(`^v[0-9]+((alpha|beta)[0-9]*)?$`)

func TestIsAPIVersion(t *testing.T) {
	for _, seg := range []string{"v1", "v1beta", "v1beta1", "v1alpha", "v12alpha34", "", "v", "vbeta", "v1x", "v1betax", "v1alphabeta",
		"V1", "v1beta1 ", "projects", "v1\n", "v١", "xv1", "v1beta1beta"} {
		if got, want := isAPIVersion(seg), apiVersionPattern.MatchString(seg); got != want {
			t.Errorf("isAPIVersion(%q) = %v, want %v", seg, got, want)
		}
	}
}

func FuzzIsAPIVersion(f *testing.F) {
	for _, seg := range []string{"v1", "v1beta1", "v2alpha", "v1b"} {
		f.Add(seg)
	}
	f.Fuzz(func(t *testing.T, seg string) {
		if got, want := isAPIVersion(seg), apiVersionPattern.MatchString(seg); got != want {
			t.Fatalf("isAPIVersion(%q) = %v, want %v", seg, got, want)
		}
	})
}
