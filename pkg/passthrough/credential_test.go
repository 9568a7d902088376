package passthrough

import (
	"encoding/base64"
	"encoding/hex"
	"net/http"
	"net/url"
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

// encodingEcho answers with every request header echoed in the spellings a
// debugging upstream or proxy might use: lower- and upper-cased,
// percent-encoded, in hex, base64 alone and inside a Basic credential.
func encodingEcho(w http.ResponseWriter, r *http.Request, body []byte) {
	for k, vs := range r.Header {
		v := strings.Join(vs, ",")
		w.Header().Set("X-Lower-"+k, strings.ToLower(v))
		w.Header().Set("X-Upper-"+k, strings.ToUpper(v))
		w.Header().Set("X-Pct-"+k, url.QueryEscape(v))
		w.Header().Set("X-Hex-"+k, hex.EncodeToString([]byte(v)))
		w.Header().Set("X-B64-"+k, base64.StdEncoding.EncodeToString([]byte(v)))
		w.Header().Set("X-B64url-"+k, base64.RawURLEncoding.EncodeToString([]byte(v)))
		for _, user := range []string{"u:", "us:", "usr:"} { // the three alignments
			w.Header().Set("X-Basic-"+user[:len(user)-1]+"-"+k, "Basic "+base64.StdEncoding.EncodeToString([]byte(user+v)))
		}
	}
	w.Header().Set("Content-Type", "application/json")
	w.Write([]byte(`{}`))
}

// TestEncodedEchoOfTheCredentialIsNotHandedBack: the injected key, echoed
// in another case or an encoding credentials travel in, is dropped too.
func TestEncodedEchoOfTheCredentialIsNotHandedBack(t *testing.T) {
	up := newUpstream(t, encodingEcho)
	const key = "sk-ant-Provider-KEY-123"
	h := newHarness(t, "passthrough:\n  anthropic: {api_base: "+up.srv.URL+", api_key: "+key+"}\n", nil, nil)
	resp, body := h.do(t, "POST", "/anthropic/v1/messages", strings.NewReader(`{}`), "Content-Type", "application/json", "Anthropic-Version", "2023-06-01")
	if resp.StatusCode != 200 {
		t.Fatalf("%d %s", resp.StatusCode, body)
	}
	if up.last(t).Header.Get("X-Api-Key") != key {
		t.Fatal("the key was not injected")
	}
	for k, vs := range resp.Header {
		for _, v := range vs {
			low := strings.ToLower(v)
			if strings.Contains(low, strings.ToLower(key)) || strings.Contains(low, strings.ToLower(url.QueryEscape(key))) ||
				strings.Contains(v, hex.EncodeToString([]byte(key))) || strings.Contains(k, "Api-Key") {
				t.Errorf("answer header %s: %s hands back the injected key", k, v)
			}
			if dec, err := base64.StdEncoding.DecodeString(strings.TrimPrefix(v, "Basic ")); err == nil && strings.Contains(string(dec), key) {
				t.Errorf("answer header %s: %s hands back the injected key in base64", k, v)
			}
			if dec, err := base64.RawURLEncoding.DecodeString(v); err == nil && strings.Contains(string(dec), key) {
				t.Errorf("answer header %s: %s hands back the injected key in base64url", k, v)
			}
		}
	}
	if resp.Header.Get("X-B64-Content-Type") == "" || resp.Header.Get("X-Lower-Anthropic-Version") != "2023-06-01" {
		t.Errorf("harmless echoes were dropped too: %v", resp.Header)
	}
}

func TestEchoFormsFindEveryAlignment(t *testing.T) {
	forms := newEchoSet(echoForms([]string{"secret-value-42"}))
	for _, prefix := range []string{"", "a", "ab", "abc", "abcd"} {
		enc := base64.StdEncoding.EncodeToString([]byte(prefix + "secret-value-42" + "tail"))
		if !forms.revealedIn("X", []string{enc}) {
			t.Errorf("base64 after %q not recognised: %s", prefix, enc)
		}
	}
	if forms.revealedIn("X", []string{"application/json", base64.StdEncoding.EncodeToString([]byte("hello world"))}) {
		t.Error("innocent values taken for the secret")
	}
}

func TestEveryPassthroughIsAVendor(t *testing.T) {
	for _, p := range providerList {
		if _, ok := vendors.Lookup(string(p)); !ok {
			t.Errorf("passthrough %q has no row in the vendor table", p)
		}
	}
}
