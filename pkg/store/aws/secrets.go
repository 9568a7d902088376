package awsstore

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/secretsmanager"
	smtypes "github.com/aws/aws-sdk-go-v2/service/secretsmanager/types"

	"github.com/sluice-gateway/sluice/pkg/store"
)

// SecretStore resolves the gateway's own secrets (the master key, provider
// keys: config references "secretsmanager/NAME[#json-key]") from Secrets
// Manager. Each secret is read once per process and kept: a Lambda
// container reads it on its first request, not on every one. A failed read is
// not kept, so the next call tries again.
type SecretStore struct {
	sm *secretsmanager.Client

	mu    sync.Mutex
	cache map[string]*secretEntry
}

// secretEntry is one secret, fetched once; done closes when value or err is set.
type secretEntry struct {
	done  chan struct{}
	value string
	err   error
}

// NewSecretStore returns a secret store reading through cfg.
func NewSecretStore(cfg aws.Config) *SecretStore {
	return &SecretStore{sm: secretsmanager.NewFromConfig(cfg), cache: map[string]*secretEntry{}}
}

// Secret returns the secret name (a name or an ARN), or with jsonKey the
// field jsonKey of the JSON object the secret holds (a string field as
// is, any other value as its JSON text). A missing secret wraps
// store.ErrNotFound; so does a missing key.
func (s *SecretStore) Secret(ctx context.Context, name, jsonKey string) (string, error) {
	value, err := s.fetch(ctx, name)
	if err != nil {
		return "", err
	}
	if jsonKey == "" {
		return value, nil
	}
	var fields map[string]json.RawMessage
	if err := json.Unmarshal([]byte(value), &fields); err != nil {
		return "", fmt.Errorf("secretsmanager: secret %q is not a JSON object, so it has no key %q", name, jsonKey)
	}
	raw, ok := fields[jsonKey]
	if !ok {
		return "", fmt.Errorf("secretsmanager: secret %q has no key %q: %w", name, jsonKey, store.ErrNotFound)
	}
	var str string
	if err := json.Unmarshal(raw, &str); err == nil {
		return str, nil
	}
	return string(raw), nil
}

// fetch returns the secret's text, reading it at most once at a time and
// once in all if it succeeds.
func (s *SecretStore) fetch(ctx context.Context, name string) (string, error) {
	s.mu.Lock()
	e, ok := s.cache[name]
	if !ok {
		e = &secretEntry{done: make(chan struct{})}
		s.cache[name] = e
	}
	s.mu.Unlock()
	if !ok {
		e.value, e.err = s.read(ctx, name)
		if e.err != nil {
			s.mu.Lock()
			delete(s.cache, name)
			s.mu.Unlock()
		}
		close(e.done)
	}
	select {
	case <-e.done:
		return e.value, e.err
	case <-ctx.Done():
		return "", fmt.Errorf("secretsmanager: secret %q: %w", name, ctx.Err())
	}
}

func (s *SecretStore) read(ctx context.Context, name string) (string, error) {
	out, err := s.sm.GetSecretValue(ctx, &secretsmanager.GetSecretValueInput{SecretId: &name})
	var notFound *smtypes.ResourceNotFoundException
	switch {
	case errors.As(err, &notFound):
		return "", wrapAs(store.ErrNotFound, err, "secretsmanager: secret %q not found", name)
	case err != nil:
		return "", wrap(err, "secretsmanager: read secret %q", name)
	case out.SecretString != nil:
		return *out.SecretString, nil
	default:
		return string(out.SecretBinary), nil
	}
}
