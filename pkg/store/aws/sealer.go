package awsstore

import (
	"context"
	"fmt"

	"github.com/aws/aws-sdk-go-v2/service/kms"
	kmstypes "github.com/aws/aws-sdk-go-v2/service/kms/types"

	"github.com/sluice-gateway/sluice/pkg/store"
)

// Sealer implements store.Sealer with KMS envelope encryption in the shared
// store.Envelope format: a fresh data key from GenerateDataKey per secret,
// its KMS ciphertext as the wrapped key. The encryption context goes both to
// KMS (so it shows in CloudTrail and IAM conditions can test it) and into the
// envelope's AES-GCM additional data.
type Sealer struct {
	kms   *kms.Client
	keyID string
}

var _ store.Sealer = (*Sealer)(nil)

// NewSealer returns a sealer using the KMS key keyID (id, ARN or alias).
func NewSealer(client *kms.Client, keyID string) *Sealer {
	return &Sealer{kms: client, keyID: keyID}
}

// Seal encrypts plaintext under a new data key bound to encCtx.
func (s *Sealer) Seal(ctx context.Context, plaintext []byte, encCtx map[string]string) ([]byte, error) {
	out, err := s.kms.GenerateDataKey(ctx, &kms.GenerateDataKeyInput{
		KeyId:             &s.keyID,
		KeySpec:           kmstypes.DataKeySpecAes256,
		EncryptionContext: kmsContext(encCtx),
	})
	if err != nil {
		return nil, wrap(err, "kms seal: generate data key")
	}
	defer clear(out.Plaintext)
	env, err := store.SealEnvelope(store.SchemeAWSKMS, out.CiphertextBlob, out.Plaintext, plaintext, encCtx)
	if err != nil {
		return nil, fmt.Errorf("kms seal: %w", err)
	}
	return env.Marshal(), nil
}

// Open decrypts a sealed secret; it fails for another context, another key
// or altered bytes.
func (s *Sealer) Open(ctx context.Context, sealed []byte, encCtx map[string]string) ([]byte, error) {
	env, err := store.ParseEnvelope(sealed)
	if err != nil {
		return nil, fmt.Errorf("kms open: %w", err)
	}
	if env.Scheme != store.SchemeAWSKMS {
		return nil, fmt.Errorf("kms open: sealed with scheme %q, want %q", env.Scheme, store.SchemeAWSKMS)
	}
	out, err := s.kms.Decrypt(ctx, &kms.DecryptInput{
		KeyId:             &s.keyID, // refuse data keys wrapped by any other key
		CiphertextBlob:    env.WrappedKey,
		EncryptionContext: kmsContext(encCtx),
	})
	if err != nil {
		return nil, wrap(err, "kms open: decrypt data key")
	}
	defer clear(out.Plaintext)
	pt, err := env.Open(out.Plaintext, encCtx)
	if err != nil {
		return nil, fmt.Errorf("kms open: %w", err)
	}
	return pt, nil
}

// kmsContext passes an empty context as none (KMS rejects an empty map).
func kmsContext(encCtx map[string]string) map[string]string {
	if len(encCtx) == 0 {
		return nil
	}
	return encCtx
}
