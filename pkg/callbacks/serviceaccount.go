package callbacks

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"github.com/sluice-gateway/sluice/pkg/api"
)

// maxServiceAccountBytes bounds a service-account key, inline or in a file
// (a real one is about 2.4 KB).
const maxServiceAccountBytes = 64 << 10

// paramServiceAccount names the var in errors.
const paramServiceAccount = "callback_vars." + VarGCSServiceAccount

// defaultTokenURI is Google's token endpoint, used when a key names none.
const defaultTokenURI = "https://oauth2.googleapis.com/token"

// ServiceAccounts resolves gcs_path_service_account: a team must never make
// the gateway read its files, so the value is either the service-account
// key JSON itself, or the path of a file inside the one directory the
// operator configured (SLUICE_GCS_SERVICE_ACCOUNT_DIR). Paths are opened
// through os.Root, which refuses any path leaving the directory, by "..",
// an absolute path elsewhere or a symbolic link.
type ServiceAccounts struct {
	dir   string // "" when the operator configured none: paths are refused
	guard *Guard
}

// NewServiceAccounts resolves keys under dir ("" accepts inline JSON only);
// the guard checks each key's token_uri.
func NewServiceAccounts(dir string, guard *Guard) *ServiceAccounts {
	if dir != "" {
		if abs, err := filepath.Abs(dir); err == nil {
			dir = abs
		}
	}
	return &ServiceAccounts{dir: dir, guard: guard}
}

// serviceAccountKey is the part of a key file sluice checks.
type serviceAccountKey struct {
	Type        string `json:"type"`
	ClientEmail string `json:"client_email"`
	PrivateKey  string `json:"private_key"`
	TokenURI    string `json:"token_uri"`
}

// Check validates a gcs_path_service_account value as a team sends it:
// inline JSON of a service-account key, or a path inside the directory
// naming one. Anything else is a 400.
func (s *ServiceAccounts) Check(ctx context.Context, value string) error {
	data, err := s.read(value)
	if err != nil {
		return err
	}
	return s.checkKey(ctx, data)
}

// Key returns the service-account key JSON a stored value stands for,
// reading the file when it is a path (it may have been rotated since).
func (s *ServiceAccounts) Key(value string) ([]byte, error) {
	data, err := s.read(value)
	if err != nil {
		return nil, err
	}
	if _, err := parseKey(data); err != nil {
		return nil, err
	}
	return data, nil
}

func (s *ServiceAccounts) read(value string) ([]byte, error) {
	v := strings.TrimSpace(value)
	if strings.HasPrefix(v, "{") {
		if len(v) > maxServiceAccountBytes {
			return nil, api.InvalidValue(paramServiceAccount, "%s is larger than %d bytes.", VarGCSServiceAccount, maxServiceAccountBytes)
		}
		return []byte(v), nil
	}
	if s.dir == "" {
		return nil, api.InvalidValue(paramServiceAccount,
			"%s must be the service-account key JSON itself: this gateway reads no key files (its operator has configured no service-account directory).", VarGCSServiceAccount)
	}
	rel := v
	if filepath.IsAbs(v) {
		r, err := filepath.Rel(filepath.Clean(s.dir), v)
		if err != nil || r == ".." || strings.HasPrefix(r, ".."+string(filepath.Separator)) {
			return nil, outsideDir()
		}
		rel = r
	}
	root, err := os.OpenRoot(s.dir)
	if err != nil {
		return nil, fmt.Errorf("open service-account directory: %w", err)
	}
	defer root.Close()
	f, err := root.Open(rel)
	if err != nil {
		if errors.Is(err, os.ErrNotExist) {
			return nil, api.InvalidValue(paramServiceAccount, "%s names no file in the service-account directory.", VarGCSServiceAccount)
		}
		// os.Root refuses paths that escape the directory (.., symbolic
		// links out of it) with an error of its own.
		return nil, outsideDir()
	}
	defer f.Close()
	if st, err := f.Stat(); err != nil || !st.Mode().IsRegular() {
		return nil, api.InvalidValue(paramServiceAccount, "%s must name a regular file in the service-account directory.", VarGCSServiceAccount)
	}
	data, err := io.ReadAll(io.LimitReader(f, maxServiceAccountBytes+1))
	if err != nil {
		return nil, fmt.Errorf("read service-account file: %w", err)
	}
	if len(data) > maxServiceAccountBytes {
		return nil, api.InvalidValue(paramServiceAccount, "the file %s names is larger than %d bytes.", VarGCSServiceAccount, maxServiceAccountBytes)
	}
	return data, nil
}

func outsideDir() error {
	return api.InvalidValue(paramServiceAccount,
		"%s must be the service-account key JSON, or a path inside the operator's service-account directory.", VarGCSServiceAccount)
}

func parseKey(data []byte) (serviceAccountKey, error) {
	var k serviceAccountKey
	if err := json.Unmarshal(data, &k); err != nil {
		return k, api.InvalidValue(paramServiceAccount, "%s is not a service-account key: not JSON.", VarGCSServiceAccount)
	}
	if k.Type != "service_account" || k.ClientEmail == "" || k.PrivateKey == "" {
		return k, api.InvalidValue(paramServiceAccount,
			"%s must be a service-account key (type service_account, with client_email and private_key).", VarGCSServiceAccount)
	}
	return k, nil
}

// checkKey parses a key and checks its token endpoint like any other
// team-supplied destination: the JWT grant is sent there.
func (s *ServiceAccounts) checkKey(ctx context.Context, data []byte) error {
	k, err := parseKey(data)
	if err != nil {
		return err
	}
	uri := k.TokenURI
	if uri == "" {
		uri = defaultTokenURI
	}
	if _, err := s.guard.CheckURL(ctx, paramServiceAccount+".token_uri", uri); err != nil {
		return err
	}
	return nil
}
