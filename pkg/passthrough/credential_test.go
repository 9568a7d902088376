package passthrough

import (
	"net/http"
	"strings"
	"testing"

	"github.com/sluice-gateway/sluice/pkg/providers/google/googletest"
	"github.com/sluice-gateway/sluice/pkg/providers/vendors"
)

// echoHeaders answers with every request header echoed back, as a
// debugging upstream or proxy does: one X-Echo-* header per request header,
// and one X-Debug-Request line holding them all.
func echoHeaders(w http.ResponseWriter, r *http.Request, body []byte) {
	var all []string
	for k, vs := range r.Header {
		w.Header()["X-Echo-"+k] = vs
		all = append(all, k+"="+strings.Join(vs, ","))
	}
	w.Header().Set("X-Debug-Request", strings.Join(all, "; "))
	w.Header().Set("Content-Type", "application/json")
	w.Write([]byte(`{}`))
}

// TestEchoedCredentialIsNotHandedBack: whatever credential sluice injected —
// an API key, an OAuth2 token, a SigV4 signature and session token — an
// answer header that holds it is dropped; the other echoes pass.
func TestEchoedCredentialIsNotHandedBack(t *testing.T) {
	tokens := googletest.NewTokenServer(t)
	up := newUpstream(t, echoHeaders)
	cfg := "passthrough:\n" +
		"  anthropic: {api_base: " + up.srv.URL + ", api_key: sk-ant-provider}\n" +
		"  gemini: {api_base: " + up.srv.URL + ", api_key: gemini-provider-key}\n" +
		"  vertex_ai: {api_base: " + up.srv.URL + ", vertex_credentials: os.environ/SA, vertex_project: p, vertex_location: us-east5}\n" +
		"  bedrock: {api_base: " + up.srv.URL + ", aws_region_name: us-east-1, aws_access_key_id: AKIDSLUICE, aws_secret_access_key: sluice-secret, aws_session_token: sluice-session-token}\n"
	h := newHarness(t, cfg, map[string]string{"SA": tokens.ServiceAccountJSON("p")}, nil)
	bearer := func(h http.Header) []string { return []string{strings.TrimPrefix(h.Get("Authorization"), "Bearer ")} }
	for _, tc := range []struct {
		path    string
		secrets func(sent http.Header) []string
	}{
		{"/anthropic/v1/messages", func(http.Header) []string { return []string{"sk-ant-provider"} }},
		{"/gemini/v1beta/models/gemini-2.5-flash:generateContent", func(http.Header) []string { return []string{"gemini-provider-key"} }},
		{"/vertex-ai/v1/publishers/google/models/gemini-2.5-flash:generateContent", bearer},
		{"/bedrock/model/amazon.titan-embed-text-v2:0/invoke", func(h http.Header) []string {
			_, sig, _ := strings.Cut(h.Get("Authorization"), "Signature=")
			return []string{"sluice-session-token", sig}
		}},
	} {
		resp, body := h.do(t, "POST", tc.path, strings.NewReader(`{}`), "Content-Type", "application/json", "Anthropic-Version", "2023-06-01")
		if resp.StatusCode != 200 {
			t.Fatalf("%s: %d %s", tc.path, resp.StatusCode, body)
		}
		for _, secret := range tc.secrets(up.last(t).Header) {
			if len(secret) < 8 {
				t.Fatalf("%s: no credential to look for (%q)", tc.path, secret)
			}
			for k, vs := range resp.Header {
				for _, v := range vs {
					if strings.Contains(v, secret) {
						t.Errorf("%s: answer header %s hands back the injected credential", tc.path, k)
					}
				}
			}
		}
		if resp.Header.Get("X-Echo-Content-Type") != "application/json" {
			t.Errorf("%s: a harmless echo was dropped too: %v", tc.path, resp.Header)
		}
	}
}

// TestCredentialHeadersSpelledWithUnderscores: a credential header spelled
// with '_' for '-' is dropped like the header it imitates.
func TestCredentialHeadersSpelledWithUnderscores(t *testing.T) {
	up := newUpstream(t, nil)
	h := newHarness(t, allPrefixes(up.srv.URL), nil, nil)
	resp, body := h.do(t, "POST", "/anthropic/v1/messages", strings.NewReader(`{}`),
		"x_api_key", "client-x-api-key",
		"X_Goog_Api_Key", "client-goog",
		"x_sluice_api_key", "sk-sluice-key",
		"proxy_authorization", "Basic client-proxy",
		"x_amz_security_token", "client-session",
		"x_forwarded_for", "10.0.0.1",
		"anthropic_beta", "kept",
	)
	if resp.StatusCode != 200 {
		t.Fatalf("%d %s", resp.StatusCode, body)
	}
	got := up.last(t).Header
	for k, vs := range got {
		for _, v := range vs {
			for _, s := range []string{"client-x-api-key", "client-goog", "sk-sluice-key", "client-proxy", "client-session", "10.0.0.1"} {
				if strings.Contains(v, s) {
					t.Errorf("header %s carried %q upstream", k, s)
				}
			}
		}
	}
	if got.Get("X-Api-Key") != "sk-ant-provider" || got.Get("Anthropic_beta") != "kept" {
		t.Errorf("forwarded %v", got)
	}
}

func TestEveryPassthroughIsAVendor(t *testing.T) {
	for _, p := range providerList {
		if _, ok := vendors.Lookup(string(p)); !ok {
			t.Errorf("passthrough %q has no row in the vendor table", p)
		}
	}
}
