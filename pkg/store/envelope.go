package store

import (
	"crypto/aes"
	"crypto/cipher"
	"crypto/rand"
	"encoding/binary"
	"errors"
	"fmt"
	"slices"
)

// A sealed secret is an Envelope: the secret encrypted under a fresh data key,
// and that data key wrapped by a master key (a KMS key in the cloud, a key file
// locally). Both backends share this format, so the parsing and the data
// encryption are written once and the format can evolve under a version byte.
//
// Layout of version 1 (lengths big-endian; fixed-width lengths keep the
// encoding canonical, so Marshal(ParseEnvelope(b)) == b):
//
//	size  field
//	1     version, 1
//	1     s = len(scheme), 1..MaxSchemeLen
//	s     scheme: how the data key is wrapped (SchemeLocal, SchemeAWSKMS)
//	2     w = len(wrapped key), 1..MaxWrappedKeyLen
//	w     wrapped data key, opaque here: only the scheme knows how to unwrap it
//	12    AES-GCM nonce
//	rest  AES-256-GCM ciphertext of the secret, 16-byte tag included
//
// The data ciphertext's additional data binds the version, the scheme and the
// encryption context (see EncryptionContextAAD): opening with another context,
// or after the scheme byte was altered, fails.

// EnvelopeVersion is the envelope format this package writes.
const EnvelopeVersion = 1

// Key-wrapping schemes. A scheme names how Envelope.WrappedKey was produced.
const (
	// SchemeLocal: AES-256-GCM under the local master key file; WrappedKey is
	// the 12-byte nonce followed by the sealed data key.
	SchemeLocal = "local-aes256gcm"
	// SchemeAWSKMS: WrappedKey is the CiphertextBlob of KMS GenerateDataKey,
	// called with the same encryption context.
	SchemeAWSKMS = "aws-kms"
)

// Envelope limits and sizes.
const (
	MaxSchemeLen     = 64
	MaxWrappedKeyLen = 4096 // a KMS CiphertextBlob is about 200 bytes
	DataKeySize      = 32   // AES-256
	nonceSize        = 12
	tagSize          = 16
)

// Envelope is a parsed sealed secret.
type Envelope struct {
	Scheme     string
	WrappedKey []byte
	Nonce      []byte
	Ciphertext []byte
}

// SealEnvelope encrypts plaintext under dataKey (DataKeySize random bytes the
// caller has wrapped as wrappedKey under scheme), binding encCtx.
func SealEnvelope(scheme string, wrappedKey, dataKey, plaintext []byte, encCtx map[string]string) (Envelope, error) {
	e := Envelope{Scheme: scheme, WrappedKey: slices.Clone(wrappedKey), Nonce: make([]byte, nonceSize)}
	if err := e.checkHeader(); err != nil {
		return Envelope{}, fmt.Errorf("store: seal envelope: %w", err)
	}
	aead, err := newGCM(dataKey)
	if err != nil {
		return Envelope{}, fmt.Errorf("store: seal envelope: %w", err)
	}
	rand.Read(e.Nonce) // never fails (crypto/rand, Go ≥ 1.24)
	e.Ciphertext = aead.Seal(nil, e.Nonce, plaintext, e.aad(encCtx))
	return e, nil
}

// Open decrypts the envelope's secret with the unwrapped data key. It fails
// when the context differs from the one sealed with or the bytes were altered.
func (e Envelope) Open(dataKey []byte, encCtx map[string]string) ([]byte, error) {
	if err := e.checkHeader(); err != nil {
		return nil, fmt.Errorf("store: open envelope: %w", err)
	}
	aead, err := newGCM(dataKey)
	if err != nil {
		return nil, fmt.Errorf("store: open envelope: %w", err)
	}
	if len(e.Nonce) != nonceSize {
		return nil, errors.New("store: open envelope: bad nonce length")
	}
	pt, err := aead.Open(nil, e.Nonce, e.Ciphertext, e.aad(encCtx))
	if err != nil {
		return nil, fmt.Errorf("store: open envelope: wrong key or context, or altered: %w", err)
	}
	return pt, nil
}

// Marshal encodes the envelope in the version 1 layout.
func (e Envelope) Marshal() []byte {
	b := make([]byte, 0, 4+len(e.Scheme)+len(e.WrappedKey)+len(e.Nonce)+len(e.Ciphertext))
	b = append(b, EnvelopeVersion, byte(len(e.Scheme)))
	b = append(b, e.Scheme...)
	b = binary.BigEndian.AppendUint16(b, uint16(len(e.WrappedKey)))
	b = append(b, e.WrappedKey...)
	b = append(b, e.Nonce...)
	return append(b, e.Ciphertext...)
}

// ParseEnvelope parses sealed bytes. They come from storage and are treated
// as untrusted: every length is checked before use.
func ParseEnvelope(b []byte) (Envelope, error) {
	fail := func(what string) (Envelope, error) {
		return Envelope{}, fmt.Errorf("store: parse envelope: %s", what)
	}
	if len(b) < 2 {
		return fail("too short")
	}
	if b[0] != EnvelopeVersion {
		return fail(fmt.Sprintf("unknown version %d", b[0]))
	}
	s := int(b[1])
	b = b[2:]
	if s < 1 || s > MaxSchemeLen || len(b) < s+2 {
		return fail("bad scheme length")
	}
	e := Envelope{Scheme: string(b[:s])}
	b = b[s:]
	w := int(binary.BigEndian.Uint16(b))
	b = b[2:]
	if w < 1 || w > MaxWrappedKeyLen || len(b) < w+nonceSize+tagSize {
		return fail("bad wrapped key length or truncated")
	}
	e.WrappedKey = slices.Clone(b[:w])
	e.Nonce = slices.Clone(b[w : w+nonceSize])
	e.Ciphertext = slices.Clone(b[w+nonceSize:])
	if err := e.checkHeader(); err != nil {
		return Envelope{}, fmt.Errorf("store: parse envelope: %w", err)
	}
	return e, nil
}

func (e Envelope) checkHeader() error {
	if len(e.Scheme) < 1 || len(e.Scheme) > MaxSchemeLen {
		return errors.New("bad scheme length")
	}
	for _, c := range []byte(e.Scheme) {
		if !('a' <= c && c <= 'z' || '0' <= c && c <= '9' || c == '-') {
			return fmt.Errorf("bad scheme %q", e.Scheme)
		}
	}
	if len(e.WrappedKey) < 1 || len(e.WrappedKey) > MaxWrappedKeyLen {
		return errors.New("bad wrapped key length")
	}
	return nil
}

// aad is the data ciphertext's additional data: a domain label with the
// version, the scheme, then the encryption context.
func (e Envelope) aad(encCtx map[string]string) []byte {
	b := append([]byte("sluice-envelope"), EnvelopeVersion, byte(len(e.Scheme)))
	b = append(b, e.Scheme...)
	return append(b, EncryptionContextAAD(encCtx)...)
}

// EncryptionContextAAD encodes an encryption context canonically: entries
// sorted by key, each as uvarint(len(key)) key uvarint(len(value)) value.
// Length prefixes (rather than "k=v" joined by a separator) make the encoding
// unambiguous whatever the keys and values contain. nil and empty encode alike.
func EncryptionContextAAD(encCtx map[string]string) []byte {
	keys := make([]string, 0, len(encCtx))
	for k := range encCtx {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	var b []byte
	for _, k := range keys {
		b = binary.AppendUvarint(b, uint64(len(k)))
		b = append(b, k...)
		b = binary.AppendUvarint(b, uint64(len(encCtx[k])))
		b = append(b, encCtx[k]...)
	}
	return b
}

func newGCM(key []byte) (cipher.AEAD, error) {
	if len(key) != DataKeySize {
		return nil, fmt.Errorf("data key is %d bytes, want %d", len(key), DataKeySize)
	}
	block, err := aes.NewCipher(key)
	if err != nil {
		return nil, err
	}
	return cipher.NewGCM(block)
}
