package callbacks

import (
	"context"
	"encoding/json"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// keyJSON is a service-account key (the private key is never parsed here).
func keyJSON(tokenURI string) string {
	b, _ := json.Marshal(map[string]string{
		"type": "service_account", "client_email": "logs@p.iam.gserviceaccount.com",
		"private_key": "-----BEGIN PRIVATE KEY-----\nMII\n-----END PRIVATE KEY-----\n", "token_uri": tokenURI,
	})
	return string(b)
}

func gcsCallback(account string) AddCallback {
	return AddCallback{CallbackName: GCSBucket, CallbackType: TypeSuccessAndFailure,
		CallbackVars: vars(VarGCSBucketName, "team-logs/sluice", VarGCSServiceAccount, account)}
}

func TestServiceAccountForms(t *testing.T) {
	h := newHarness(t)
	ctx := context.Background()
	outside := t.TempDir()
	if err := os.MkdirAll(filepath.Join(h.saDir, "team-a"), 0o700); err != nil {
		t.Fatal(err)
	}
	write := func(path, content string) {
		t.Helper()
		if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	write(filepath.Join(h.saDir, "team-a", "logs.json"), keyJSON(""))
	write(filepath.Join(h.saDir, "huge.json"), `{"type":"service_account",`+strings.Repeat(" ", maxServiceAccountBytes)+`}`)
	write(filepath.Join(h.saDir, "user.json"), `{"type":"authorized_user","client_id":"x","client_secret":"y","refresh_token":"z"}`)
	write(filepath.Join(outside, "stolen.json"), keyJSON(""))
	if err := os.Symlink(filepath.Join(outside, "stolen.json"), filepath.Join(h.saDir, "link.json")); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name    string
		account string
		ok      bool
	}{
		{"inline JSON", keyJSON(""), true},
		{"inline JSON, token endpoint allow-listed", keyJSON("http://127.0.0.1:9/token"), true},
		{"relative path inside the directory", "team-a/logs.json", true},
		{"absolute path inside the directory", filepath.Join(h.saDir, "team-a", "logs.json"), true},
		{"inline JSON, private token endpoint", keyJSON("https://169.254.169.254/token"), false},
		{"inline JSON, plain http token endpoint", keyJSON("http://public.example/token"), false},
		{"inline JSON, not a service account", `{"type":"authorized_user"}`, false},
		{"inline JSON, broken", `{"type":`, false},
		{"a file outside the directory", filepath.Join(outside, "stolen.json"), false},
		{"dot-dot out of the directory", "../" + filepath.Base(outside) + "/stolen.json", false},
		{"system file", "/etc/passwd", false},
		{"symbolic link out of the directory", "link.json", false},
		{"a directory", "team-a", false},
		{"missing file", "team-a/none.json", false},
		{"file too large", "huge.json", false},
		{"file not a service account", "user.json", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := h.svc.Add(ctx, h.admin, "team-a", gcsCallback(tc.account), "")
			if tc.ok {
				if err != nil {
					t.Fatalf("refused: %v", err)
				}
				if _, err := h.svc.Delete(ctx, h.admin, "team-a", GCSBucket, ""); err != nil {
					t.Fatal(err)
				}
				return
			}
			if status, param := apiErr(err); status != http.StatusBadRequest || !strings.HasPrefix(param, "callback_vars."+VarGCSServiceAccount) {
				t.Errorf("err = %v, want a 400 naming %s", err, VarGCSServiceAccount)
			}
		})
	}
}

func TestServiceAccountPathsNeedTheOperatorsDirectory(t *testing.T) {
	h := newHarness(t)
	h.svc.accounts = NewServiceAccounts("", h.svc.guard)
	path := filepath.Join(t.TempDir(), "key.json")
	if err := os.WriteFile(path, []byte(keyJSON("")), 0o600); err != nil {
		t.Fatal(err)
	}
	_, err := h.svc.Add(context.Background(), h.admin, "team-a", gcsCallback(path), "")
	if status, _ := apiErr(err); status != http.StatusBadRequest {
		t.Errorf("a path without a configured directory: err = %v, want 400", err)
	}
	if _, err := h.svc.Add(context.Background(), h.admin, "team-a", gcsCallback(keyJSON("")), ""); err != nil {
		t.Errorf("inline JSON without a directory: %v", err)
	}
}

func TestServiceAccountAsJSONObject(t *testing.T) {
	h := newHarness(t)
	in := gcsCallback("")
	in.CallbackVars[VarGCSServiceAccount] = json.RawMessage(keyJSON(""))
	got, err := h.svc.Add(context.Background(), h.admin, "team-a", in, "")
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(map[string]string{VarGCSBucketName: "team-logs/sluice", VarGCSServiceAccount: Masked}, got.Callbacks[0].Vars); diff != "" {
		t.Errorf("answer vars (-want +got):\n%s", diff)
	}
	cbs, err := h.catalog.For(context.Background(), "team-a")
	if err != nil {
		t.Fatal(err)
	}
	opened, err := h.catalog.Open(context.Background(), cbs[0])
	if err != nil {
		t.Fatal(err)
	}
	key, err := h.svc.accounts.Key(opened[VarGCSServiceAccount])
	if err != nil || !json.Valid(key) {
		t.Errorf("Key = %s, %v", key, err)
	}
}

func TestServiceAccountDirectoryGivenRelative(t *testing.T) {
	h := newHarness(t)
	if err := os.MkdirAll(h.saDir, 0o700); err != nil {
		t.Fatal(err)
	}
	key := filepath.Join(h.saDir, "k.json")
	if err := os.WriteFile(key, []byte(keyJSON("")), 0o600); err != nil {
		t.Fatal(err)
	}
	t.Chdir(filepath.Dir(h.saDir))
	accounts := NewServiceAccounts(filepath.Base(h.saDir), h.svc.guard)
	for _, path := range []string{key, "k.json"} {
		if err := accounts.Check(context.Background(), path); err != nil {
			t.Errorf("Check(%s) with the directory given relative: %v", path, err)
		}
	}
}
