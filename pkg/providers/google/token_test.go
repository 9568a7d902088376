package google_test

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sluice-gateway/sluice/pkg/providers/google"
	"github.com/sluice-gateway/sluice/pkg/providers/google/googletest"
)

// clock is a settable clock for refresh tests.
type clock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *clock) now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.t }
func (c *clock) add(d time.Duration) {
	c.mu.Lock()
	c.t = c.t.Add(d)
	c.mu.Unlock()
}

func TestServiceAccountTokenIsCachedUntilNearExpiry(t *testing.T) {
	srv := googletest.NewTokenServer(t)
	clk := &clock{t: time.Now()}
	ts, err := google.NewTokenSource(srv.ServiceAccountJSON("proj-1"), google.Options{Now: clk.now})
	if err != nil {
		t.Fatal(err)
	}
	if ts.ProjectID() != "proj-1" || ts.Email() != srv.Email {
		t.Errorf("project %q email %q", ts.ProjectID(), ts.Email())
	}
	ctx := context.Background()
	first, err := ts.AccessToken(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if !srv.Valid(first) {
		t.Fatalf("token %q was not minted by the token_uri", first)
	}
	for range 3 {
		if tok, _ := ts.AccessToken(ctx); tok != first {
			t.Fatalf("cached token changed: %q", tok)
		}
	}
	if srv.Issued() != 1 {
		t.Fatalf("issued %d tokens, want 1 (cached)", srv.Issued())
	}
	// 54 minutes later the token still has 6 minutes: kept.
	clk.add(54 * time.Minute)
	if tok, _ := ts.AccessToken(ctx); tok != first || srv.Issued() != 1 {
		t.Fatalf("token replaced too early: %q, issued %d", tok, srv.Issued())
	}
	// Within the 5-minute margin: replaced.
	clk.add(2 * time.Minute)
	second, err := ts.AccessToken(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if second == first || srv.Issued() != 2 {
		t.Fatalf("token not refreshed near expiry: %q, issued %d", second, srv.Issued())
	}
}

func TestShortLivedTokensAreStillReused(t *testing.T) {
	srv := googletest.NewTokenServer(t)
	srv.Lifetime = 2 * time.Minute // shorter than the refresh margin
	ts, err := google.NewTokenSource(srv.ServiceAccountJSON("p"), google.Options{})
	if err != nil {
		t.Fatal(err)
	}
	for range 3 {
		if _, err := ts.AccessToken(context.Background()); err != nil {
			t.Fatal(err)
		}
	}
	if srv.Issued() != 1 {
		t.Fatalf("issued %d, want 1", srv.Issued())
	}
}

func TestConcurrentCallersShareOneFetch(t *testing.T) {
	srv := googletest.NewTokenServer(t)
	ts, err := google.NewTokenSource(srv.ServiceAccountJSON("p"), google.Options{})
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	tokens := make([]string, 16)
	for i := range tokens {
		wg.Go(func() {
			tok, err := ts.AccessToken(context.Background())
			if err != nil {
				t.Error(err)
			}
			tokens[i] = tok
		})
	}
	wg.Wait()
	for _, tok := range tokens {
		if tok != tokens[0] {
			t.Fatalf("callers got different tokens: %v", tokens)
		}
	}
	if srv.Issued() != 1 {
		t.Fatalf("issued %d, want 1", srv.Issued())
	}
}

func TestCredentialsFromFile(t *testing.T) {
	srv := googletest.NewTokenServer(t)
	path := filepath.Join(t.TempDir(), "sa.json")
	if err := os.WriteFile(path, []byte(srv.ServiceAccountJSON("from-file")), 0o600); err != nil {
		t.Fatal(err)
	}
	ts, err := google.NewTokenSource(path, google.Options{})
	if err != nil {
		t.Fatal(err)
	}
	tok, err := ts.AccessToken(context.Background())
	if err != nil || !srv.Valid(tok) || ts.ProjectID() != "from-file" {
		t.Fatalf("token %q err %v project %q", tok, err, ts.ProjectID())
	}
}

func TestAuthorizedUserRefreshes(t *testing.T) {
	var calls atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		calls.Add(1)
		r.ParseForm()
		if r.PostForm.Get("grant_type") != "refresh_token" || r.PostForm.Get("refresh_token") != "1//refresh" {
			http.Error(w, `{"error":"invalid_grant"}`, http.StatusBadRequest)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		w.Write([]byte(`{"access_token":"ya29.user","token_type":"Bearer","expires_in":3600}`))
	}))
	defer srv.Close()
	creds := `{"type":"authorized_user","client_id":"cid","client_secret":"cs","refresh_token":"1//refresh","quota_project_id":"qp","token_uri":"` + srv.URL + `"}`
	ts, err := google.NewTokenSource(creds, google.Options{})
	if err != nil {
		t.Fatal(err)
	}
	tok, err := ts.AccessToken(context.Background())
	if err != nil || tok != "ya29.user" || ts.ProjectID() != "qp" || calls.Load() != 1 {
		t.Fatalf("token %q err %v project %q calls %d", tok, err, ts.ProjectID(), calls.Load())
	}
}

func TestBadCredentials(t *testing.T) {
	for name, creds := range map[string]string{
		"empty":             "  ",
		"not JSON":          "{nope",
		"missing file":      filepath.Join(t.TempDir(), "absent.json"),
		"external account":  `{"type":"external_account","audience":"x","credential_source":{"file":"/etc/passwd"}}`,
		"no type":           `{"client_email":"a@b"}`,
		"service no key":    `{"type":"service_account","client_email":"a@b","private_key":""}`,
		"user no refresh":   `{"type":"authorized_user","client_id":"a","client_secret":"b"}`,
		"impersonated":      `{"type":"impersonated_service_account"}`,
		"gdch":              `{"type":"gdch_service_account"}`,
		"external authuser": `{"type":"external_account_authorized_user"}`,
	} {
		t.Run(name, func(t *testing.T) {
			if _, err := google.NewTokenSource(creds, google.Options{}); err == nil {
				t.Fatal("accepted")
			}
		})
	}
}

func TestTokenEndpointFailureIsReportedAndNotCached(t *testing.T) {
	srv := googletest.NewTokenServer(t)
	srv.SetUnavailable(true)
	ts, err := google.NewTokenSource(srv.ServiceAccountJSON("p"), google.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := ts.AccessToken(context.Background()); !errors.Is(err, google.ErrNoToken) {
		t.Fatalf("err = %v, want ErrNoToken", err)
	}
	srv.SetUnavailable(false)
	tok, err := ts.AccessToken(context.Background())
	if err != nil || !srv.Valid(tok) {
		t.Fatalf("after recovery: %q %v", tok, err)
	}
}

func TestCallerContextEndsWait(t *testing.T) {
	block := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		<-block
		http.Error(w, "late", 503)
	}))
	defer srv.Close()
	defer close(block)
	tsrv := googletest.NewTokenServer(t)
	sa := strings.Replace(tsrv.ServiceAccountJSON("p"), tsrv.URL, srv.URL, 1)
	ts, err := google.NewTokenSource(sa, google.Options{FetchTimeout: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	if _, err := ts.AccessToken(ctx); !errors.Is(err, google.ErrNoToken) || !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("err = %v", err)
	}
}
