package store_test

import (
	"bytes"
	"crypto/rand"
	"testing"

	"github.com/sluice-gateway/sluice/pkg/store"
)

func newKey() []byte {
	k := make([]byte, store.DataKeySize)
	rand.Read(k)
	return k
}

func TestEnvelopeRoundTrip(t *testing.T) {
	key := newKey()
	encCtx := map[string]string{"team": "t", "callback": "langfuse"}
	env, err := store.SealEnvelope(store.SchemeAWSKMS, []byte("wrapped"), key, []byte("secret"), encCtx)
	if err != nil {
		t.Fatal(err)
	}
	parsed, err := store.ParseEnvelope(env.Marshal())
	if err != nil {
		t.Fatal(err)
	}
	if parsed.Scheme != store.SchemeAWSKMS || string(parsed.WrappedKey) != "wrapped" {
		t.Fatalf("parsed %+v", parsed)
	}
	pt, err := parsed.Open(key, map[string]string{"callback": "langfuse", "team": "t"})
	if err != nil || string(pt) != "secret" {
		t.Fatalf("Open: %q, %v", pt, err)
	}
	if _, err := parsed.Open(newKey(), encCtx); err == nil {
		t.Fatal("Open with another data key succeeded")
	}
	// The scheme is bound: relabelling the envelope breaks it.
	parsed.Scheme = store.SchemeLocal
	if _, err := parsed.Open(key, encCtx); err == nil {
		t.Fatal("Open after changing the scheme succeeded")
	}
}

func TestSealEnvelopeChecksInputs(t *testing.T) {
	for _, tc := range []struct {
		scheme  string
		wrapped []byte
		key     []byte
	}{
		{"", []byte("w"), newKey()},
		{"Bad Scheme", []byte("w"), newKey()},
		{store.SchemeLocal, nil, newKey()},
		{store.SchemeLocal, []byte("w"), []byte("short key")},
	} {
		if _, err := store.SealEnvelope(tc.scheme, tc.wrapped, tc.key, []byte("x"), nil); err == nil {
			t.Fatalf("SealEnvelope(%q, %q, %d-byte key) succeeded", tc.scheme, tc.wrapped, len(tc.key))
		}
	}
}

func TestEncryptionContextAADIsUnambiguous(t *testing.T) {
	cases := []map[string]string{
		nil,
		{"a": "bc"},
		{"ab": "c"},
		{"a": "b", "c": "d"},
		{"a": "b\x01\x01c\x01d"},
		{"a=b": ""},
		{"": "a=b"},
	}
	seen := map[string]int{}
	for i, c := range cases {
		k := string(store.EncryptionContextAAD(c))
		if j, dup := seen[k]; dup {
			t.Fatalf("contexts %v and %v encode alike", cases[j], c)
		}
		seen[k] = i
	}
	if !bytes.Equal(store.EncryptionContextAAD(map[string]string{}), store.EncryptionContextAAD(nil)) {
		t.Fatal("empty and nil contexts differ")
	}
}

func FuzzParseEnvelope(f *testing.F) {
	key := newKey()
	env, err := store.SealEnvelope(store.SchemeLocal, bytes.Repeat([]byte{7}, 40), key, []byte("secret"), map[string]string{"team": "t"})
	if err != nil {
		f.Fatal(err)
	}
	f.Add(env.Marshal())
	f.Add([]byte{})
	f.Add([]byte{1, 0})
	f.Add([]byte{1, 3, 'a', 'w', 's', 0xff, 0xff})
	f.Fuzz(func(t *testing.T, b []byte) {
		e, err := store.ParseEnvelope(b)
		if err != nil {
			return
		}
		// The encoding is canonical, and opening untrusted bytes fails
		// cleanly rather than panicking.
		if !bytes.Equal(e.Marshal(), b) {
			t.Fatalf("Marshal(ParseEnvelope(b)) != b")
		}
		if pt, err := e.Open(key, map[string]string{"team": "t"}); err == nil && !bytes.Equal(b, env.Marshal()) {
			t.Fatalf("opened altered bytes: %q", pt)
		}
	})
}
