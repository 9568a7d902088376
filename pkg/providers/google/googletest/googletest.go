// Package googletest stands in for Google's OAuth2 token endpoint in tests: it
// makes a throwaway service-account key whose token_uri points at a local
// server, and that server checks the signed JWT assertion (RS256 with the
// key, audience, issuer, scope) before it mints an access token.
package googletest

import (
	"crypto"
	"crypto/rand"
	"crypto/rsa"
	"crypto/sha256"
	"crypto/x509"
	"encoding/base64"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// TokenServer is a local OAuth2 token endpoint for one service account.
type TokenServer struct {
	URL   string // the token_uri
	Email string
	// Lifetime is the expires_in of minted tokens (default one hour).
	Lifetime time.Duration

	key    *rsa.PrivateKey
	srv    *httptest.Server
	issued atomic.Int64
	down   atomic.Bool
	mu     sync.Mutex
	tokens map[string]bool
	failed []string
}

// testKey is generated once per test binary: RSA key generation is slow
// under the race detector, and the key is thrown away with the process.
var testKey = sync.OnceValues(func() (*rsa.PrivateKey, error) { return rsa.GenerateKey(rand.Reader, 2048) })

// NewTokenServer starts a token endpoint with a throwaway 2048-bit key,
// closed when the test ends.
func NewTokenServer(t testing.TB) *TokenServer {
	t.Helper()
	key, err := testKey()
	if err != nil {
		t.Fatalf("generate RSA key: %v", err)
	}
	s := &TokenServer{Email: "sluice-test@test-project.iam.gserviceaccount.com", Lifetime: time.Hour, key: key, tokens: map[string]bool{}}
	s.srv = httptest.NewServer(http.HandlerFunc(s.serve))
	t.Cleanup(s.srv.Close)
	s.URL = s.srv.URL + "/token"
	t.Cleanup(func() {
		for _, f := range s.Failures() {
			t.Errorf("token endpoint: %s", f)
		}
	})
	return s
}

// ServiceAccountJSON is the service-account key file for the server's account.
func (s *TokenServer) ServiceAccountJSON(project string) string {
	der := x509.MarshalPKCS1PrivateKey(s.key)
	pemKey := pem.EncodeToMemory(&pem.Block{Type: "RSA PRIVATE KEY", Bytes: der})
	b, _ := json.Marshal(map[string]string{
		"type":           "service_account",
		"project_id":     project,
		"private_key_id": "test-key-1",
		"private_key":    string(pemKey),
		"client_email":   s.Email,
		"client_id":      "1234567890",
		"auth_uri":       "https://accounts.google.com/o/oauth2/auth",
		"token_uri":      s.URL,
	})
	return string(b)
}

// SetUnavailable makes the endpoint answer 503 (true) or work again (false).
func (s *TokenServer) SetUnavailable(down bool) { s.down.Store(down) }

// Issued is how many tokens the server has minted.
func (s *TokenServer) Issued() int64 { return s.issued.Load() }

// Valid reports whether token is one this server minted.
func (s *TokenServer) Valid(token string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.tokens[token]
}

// Failures lists the bad token requests the server saw.
func (s *TokenServer) Failures() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]string(nil), s.failed...)
}

func (s *TokenServer) fail(w http.ResponseWriter, format string, args ...any) {
	msg := fmt.Sprintf(format, args...)
	s.mu.Lock()
	s.failed = append(s.failed, msg)
	s.mu.Unlock()
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(http.StatusBadRequest)
	json.NewEncoder(w).Encode(map[string]string{"error": "invalid_grant", "error_description": msg})
}

func (s *TokenServer) serve(w http.ResponseWriter, r *http.Request) {
	if s.down.Load() {
		http.Error(w, `{"error":"temporarily_unavailable"}`, http.StatusServiceUnavailable)
		return
	}
	if r.Method != http.MethodPost || r.URL.Path != "/token" {
		s.fail(w, "unexpected %s %s", r.Method, r.URL.Path)
		return
	}
	if err := r.ParseForm(); err != nil {
		s.fail(w, "form: %v", err)
		return
	}
	if gt := r.PostForm.Get("grant_type"); gt != "urn:ietf:params:oauth:grant-type:jwt-bearer" {
		s.fail(w, "grant_type %q", gt)
		return
	}
	if err := s.verify(r.PostForm.Get("assertion")); err != nil {
		s.fail(w, "assertion: %v", err)
		return
	}
	n := s.issued.Add(1)
	token := fmt.Sprintf("ya29.minted-%d", n)
	s.mu.Lock()
	s.tokens[token] = true
	s.mu.Unlock()
	w.Header().Set("Content-Type", "application/json")
	json.NewEncoder(w).Encode(map[string]any{
		"access_token": token, "token_type": "Bearer", "expires_in": int(s.Lifetime.Seconds()),
	})
}

// verify checks the JWT's RS256 signature with the account's public key and
// its claims.
func (s *TokenServer) verify(assertion string) error {
	parts := strings.Split(assertion, ".")
	if len(parts) != 3 {
		return fmt.Errorf("want 3 parts, got %d", len(parts))
	}
	sig, err := base64.RawURLEncoding.DecodeString(parts[2])
	if err != nil {
		return fmt.Errorf("signature encoding: %w", err)
	}
	sum := sha256.Sum256([]byte(parts[0] + "." + parts[1]))
	if err := rsa.VerifyPKCS1v15(&s.key.PublicKey, crypto.SHA256, sum[:], sig); err != nil {
		return fmt.Errorf("signature: %w", err)
	}
	var header struct {
		Alg string `json:"alg"`
		Kid string `json:"kid"`
	}
	if err := decodeSegment(parts[0], &header); err != nil {
		return err
	}
	if header.Alg != "RS256" || header.Kid != "test-key-1" {
		return fmt.Errorf("header %+v", header)
	}
	var claims struct {
		Iss   string `json:"iss"`
		Aud   string `json:"aud"`
		Scope string `json:"scope"`
		Iat   int64  `json:"iat"`
		Exp   int64  `json:"exp"`
	}
	if err := decodeSegment(parts[1], &claims); err != nil {
		return err
	}
	now := time.Now().Unix()
	switch {
	case claims.Iss != s.Email:
		return fmt.Errorf("iss %q", claims.Iss)
	case claims.Aud != s.URL:
		return fmt.Errorf("aud %q, want the token_uri %q", claims.Aud, s.URL)
	case !strings.Contains(claims.Scope, "https://www.googleapis.com/auth/cloud-platform"):
		return fmt.Errorf("scope %q", claims.Scope)
	case claims.Exp <= now || claims.Iat > now+60:
		return fmt.Errorf("iat %d exp %d at %d", claims.Iat, claims.Exp, now)
	}
	return nil
}

func decodeSegment(seg string, v any) error {
	b, err := base64.RawURLEncoding.DecodeString(seg)
	if err != nil {
		return fmt.Errorf("segment encoding: %w", err)
	}
	return json.Unmarshal(b, v)
}
