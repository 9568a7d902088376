package storetest

import (
	"bytes"
	"context"
	"maps"
	"slices"
	"testing"
	"time"

	"github.com/sluice-gateway/sluice/pkg/store"
)

// Sealer runs the conformance suite for store.Sealer.
func Sealer(t *testing.T, open func(t *testing.T) store.Sealer) {
	cases := []struct {
		name string
		run  func(t *testing.T, ctx context.Context, s store.Sealer)
	}{
		{"RoundTrip", sealerRoundTrip},
		{"WrongContext", sealerWrongContext},
		{"Tampered", sealerTampered},
		{"SealsDiffer", sealerSealsDiffer},
		{"PlaintextHidden", sealerPlaintextHidden},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			c.run(t, testCtx(t, time.Minute), open(t))
		})
	}
}

func secretCtx() map[string]string {
	return map[string]string{"team": "team-abc", "callback": "langfuse"}
}

func mustSeal(t *testing.T, ctx context.Context, s store.Sealer, pt []byte, encCtx map[string]string) []byte {
	t.Helper()
	sealed, err := s.Seal(ctx, pt, encCtx)
	ok(t, err, "Seal")
	return sealed
}

func sealerRoundTrip(t *testing.T, ctx context.Context, s store.Sealer) {
	for _, tc := range []struct {
		pt     []byte
		encCtx map[string]string
	}{
		{[]byte("sk-lf-0123456789abcdef"), secretCtx()},
		{[]byte{0, 1, 2, 0xff}, map[string]string{"team": "t"}},
		{nil, secretCtx()},
		{[]byte("no context"), nil},
		{bytes.Repeat([]byte("long secret "), 400), secretCtx()},
	} {
		sealed := mustSeal(t, ctx, s, tc.pt, tc.encCtx)
		// Open with an equal context built anew.
		got, err := s.Open(ctx, sealed, maps.Clone(tc.encCtx))
		ok(t, err, "Open")
		if !bytes.Equal(got, tc.pt) {
			t.Fatalf("Open returned %q, want %q", got, tc.pt)
		}
	}
}

func sealerWrongContext(t *testing.T, ctx context.Context, s store.Sealer) {
	sealed := mustSeal(t, ctx, s, []byte("secret"), map[string]string{"team": "team-abc", "callback": "langfuse"})
	for _, wrong := range []map[string]string{
		{"team": "team-abd", "callback": "langfuse"},
		{"team": "team-abc"},
		{"team": "team-abc", "callback": "langfuse", "extra": ""},
		{"team": "team-abc", "callback": "langsmith"},
		{"callback": "team-abc", "team": "langfuse"},
		{"team": "team-abclangfuse", "callback": ""},
		{"team=team-abc": "callback=langfuse"},
		nil,
	} {
		if pt, err := s.Open(ctx, sealed, wrong); err == nil {
			t.Fatalf("Open with context %v succeeded (%q)", wrong, pt)
		}
	}
	unbound := mustSeal(t, ctx, s, []byte("secret"), nil)
	if _, err := s.Open(ctx, unbound, map[string]string{"team": "x"}); err == nil {
		t.Fatal("Open of a secret sealed without context succeeded with one")
	}
}

func sealerTampered(t *testing.T, ctx context.Context, s store.Sealer) {
	sealed := mustSeal(t, ctx, s, []byte("secret value"), secretCtx())
	// Flip one bit at up to 64 positions spread over the sealed bytes, the
	// first and last included; each must fail to open.
	step := max(1, len(sealed)/63)
	var positions []int
	for i := 0; i < len(sealed); i += step {
		positions = append(positions, i)
	}
	positions = append(positions, len(sealed)-1)
	for _, i := range positions {
		bad := slices.Clone(sealed)
		bad[i] ^= 0x10
		if _, err := s.Open(ctx, bad, secretCtx()); err == nil {
			t.Fatalf("Open succeeded after byte %d of %d was altered", i, len(sealed))
		}
	}
	for _, bad := range [][]byte{nil, sealed[:1], sealed[:len(sealed)/2], sealed[:len(sealed)-1], append(slices.Clone(sealed), 0)} {
		if _, err := s.Open(ctx, bad, secretCtx()); err == nil {
			t.Fatalf("Open of %d altered bytes (sealed %d) succeeded", len(bad), len(sealed))
		}
	}
}

func sealerSealsDiffer(t *testing.T, ctx context.Context, s store.Sealer) {
	pt := []byte("same secret")
	a, b := mustSeal(t, ctx, s, pt, secretCtx()), mustSeal(t, ctx, s, pt, secretCtx())
	if bytes.Equal(a, b) {
		t.Fatal("two seals of one plaintext are identical")
	}
}

func sealerPlaintextHidden(t *testing.T, ctx context.Context, s store.Sealer) {
	pt := []byte("sk-lf-PLAINTEXT-MUST-NOT-SHOW-0123456789")
	sealed := mustSeal(t, ctx, s, pt, secretCtx())
	for _, part := range [][]byte{pt, pt[6:18], []byte("PLAINTEXT")} {
		if bytes.Contains(sealed, part) {
			t.Fatalf("sealed bytes contain the plaintext fragment %q", part)
		}
	}
}
