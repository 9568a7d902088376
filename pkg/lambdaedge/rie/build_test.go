package rie

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestFlagsWithoutAProfile(t *testing.T) {
	got, err := Flags(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(BuildFlags, got); diff != "" {
		t.Errorf("Flags of a module without a profile (-want +got):\n%s", diff)
	}
}

func TestFlagsWithAProfile(t *testing.T) {
	root := t.TempDir()
	profile := filepath.Join(root, Profile)
	if err := os.MkdirAll(filepath.Dir(profile), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(profile, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	got, err := Flags(root)
	if err != nil {
		t.Fatal(err)
	}
	want := append(append([]string(nil), BuildFlags...), "-pgo="+profile)
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("Flags (-want +got):\n%s", diff)
	}
}

func TestModuleRoot(t *testing.T) {
	root := t.TempDir()
	if err := os.WriteFile(filepath.Join(root, "go.mod"), []byte("module example.com/m\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	deep := filepath.Join(root, "functions", "health")
	if err := os.MkdirAll(deep, 0o755); err != nil {
		t.Fatal(err)
	}
	for _, dir := range []string{root, deep} {
		got, err := ModuleRoot(dir)
		if err != nil {
			t.Fatal(err)
		}
		if got != root {
			t.Errorf("ModuleRoot(%s) = %s, want %s", dir, got, root)
		}
	}
}
