package local

import (
	"context"
	"crypto/aes"
	"crypto/cipher"
	"crypto/rand"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"runtime"

	"github.com/sluice-gateway/sluice/pkg/store"
)

// Sealer is store.Sealer with envelope encryption under a master key file:
// each Seal draws a fresh data key, encrypts the secret with it
// (store.SealEnvelope) and wraps the data key with AES-256-GCM under the
// master key, binding the encryption context to both. The result is the same
// envelope format the KMS sealer writes, with scheme store.SchemeLocal.
type Sealer struct {
	master cipher.AEAD
}

var _ store.Sealer = (*Sealer)(nil)

const masterKeySize = 32

// OpenSealer loads the master key at path, creating it (32 random bytes, mode
// 0600) if the file does not exist. It refuses a key file that other users can
// read or write: whoever reads it can open every sealed secret.
func OpenSealer(path string) (*Sealer, error) {
	key, err := loadOrCreateKey(path)
	if err != nil {
		return nil, fmt.Errorf("local sealer: %w", err)
	}
	block, err := aes.NewCipher(key)
	if err != nil {
		return nil, fmt.Errorf("local sealer: %w", err)
	}
	aead, err := cipher.NewGCM(block)
	if err != nil {
		return nil, fmt.Errorf("local sealer: %w", err)
	}
	return &Sealer{master: aead}, nil
}

// Seal encrypts plaintext bound to encCtx.
func (s *Sealer) Seal(ctx context.Context, plaintext []byte, encCtx map[string]string) ([]byte, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	dataKey := make([]byte, store.DataKeySize)
	rand.Read(dataKey) // never fails (crypto/rand, Go ≥ 1.24)
	defer clear(dataKey)
	nonce := make([]byte, s.master.NonceSize())
	rand.Read(nonce)
	wrapped := s.master.Seal(nonce, nonce, dataKey, wrapAAD(encCtx))
	env, err := store.SealEnvelope(store.SchemeLocal, wrapped, dataKey, plaintext, encCtx)
	if err != nil {
		return nil, fmt.Errorf("local sealer: seal: %w", err)
	}
	return env.Marshal(), nil
}

// Open decrypts sealed bytes; it fails if encCtx is not the context they were
// sealed with, or if they were altered or sealed under another master key.
func (s *Sealer) Open(ctx context.Context, sealed []byte, encCtx map[string]string) ([]byte, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	env, err := store.ParseEnvelope(sealed)
	if err != nil {
		return nil, fmt.Errorf("local sealer: open: %w", err)
	}
	if env.Scheme != store.SchemeLocal {
		return nil, fmt.Errorf("local sealer: open: sealed with scheme %q, not %q", env.Scheme, store.SchemeLocal)
	}
	ns := s.master.NonceSize()
	if len(env.WrappedKey) < ns {
		return nil, errors.New("local sealer: open: wrapped key too short")
	}
	dataKey, err := s.master.Open(nil, env.WrappedKey[:ns], env.WrappedKey[ns:], wrapAAD(encCtx))
	if err != nil {
		return nil, fmt.Errorf("local sealer: open: unwrap data key (wrong context or master key, or altered): %w", err)
	}
	defer clear(dataKey)
	pt, err := env.Open(dataKey, encCtx)
	if err != nil {
		return nil, fmt.Errorf("local sealer: open: %w", err)
	}
	return pt, nil
}

// wrapAAD binds the data key's wrapping to the context, as KMS does with its
// encryption context, so a wrapped key cannot be moved to another secret.
func wrapAAD(encCtx map[string]string) []byte {
	return append([]byte("sluice-local-wrap\x01"), store.EncryptionContextAAD(encCtx)...)
}

// loadOrCreateKey reads the key file or creates it atomically: the key is
// written and synced under a temporary name, then linked into place, so a
// crash never leaves a short key and two racing creators agree on one key.
func loadOrCreateKey(path string) ([]byte, error) {
	key, err := readKey(path)
	if !errors.Is(err, fs.ErrNotExist) {
		return key, err
	}
	tmp, err := os.CreateTemp(filepath.Dir(path), ".sealer-key-*")
	if err != nil {
		return nil, fmt.Errorf("create key: %w", err)
	}
	defer os.Remove(tmp.Name())
	key = make([]byte, masterKeySize)
	rand.Read(key)
	// CreateTemp makes the file with mode 0600.
	if _, err := tmp.Write(key); err != nil {
		tmp.Close()
		return nil, fmt.Errorf("create key: %w", err)
	}
	if err := tmp.Sync(); err != nil {
		tmp.Close()
		return nil, fmt.Errorf("create key: %w", err)
	}
	if err := tmp.Close(); err != nil {
		return nil, fmt.Errorf("create key: %w", err)
	}
	if err := os.Link(tmp.Name(), path); err != nil {
		if errors.Is(err, fs.ErrExist) {
			return readKey(path) // another process won the race
		}
		return nil, fmt.Errorf("create key: %w", err)
	}
	syncDir(filepath.Dir(path))
	return key, nil
}

func readKey(path string) ([]byte, error) {
	fi, err := os.Stat(path)
	if err != nil {
		return nil, err
	}
	if runtime.GOOS != "windows" && fi.Mode().Perm()&0o077 != 0 {
		return nil, fmt.Errorf("key file %s has mode %v: other users may read it; chmod 600 it", path, fi.Mode().Perm())
	}
	key, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("read key: %w", err)
	}
	if len(key) != masterKeySize {
		return nil, fmt.Errorf("key file %s holds %d bytes, want %d", path, len(key), masterKeySize)
	}
	return key, nil
}

// syncDir makes a rename or link in dir durable. It is best effort: some
// systems cannot sync a directory, and the data itself is already synced.
func syncDir(dir string) {
	if d, err := os.Open(dir); err == nil {
		_ = d.Sync()
		d.Close()
	}
}
