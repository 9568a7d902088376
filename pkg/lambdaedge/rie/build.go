package rie

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"runtime"
	"slices"
)

// BuildFlags are the go build flags of a deployable bootstrap: no legacy RPC
// start path, no file system paths, no VCS stamp, stripped, no build id (so
// an unchanged function builds byte for byte the same and is not redeployed).
// Build also sets CGO_ENABLED=0: a static binary runs on provided.al2023.
var BuildFlags = []string{"-tags", "lambda.norpc", "-trimpath", "-buildvcs=false", "-ldflags", "-s -w -buildid="}

// Profile is the CPU profile sluice's builds are optimized with
// (profile-guided optimization), relative to the module's root: a profile
// of the local process under the relay benchmarks (make pgo), which go
// build picks up by itself for functions/local. The bootstraps run the
// same handlers, relays and meters, so they are built with it too (-pgo;
// under -trimpath the binary records only its base name, so the build stays
// reproducible).
const Profile = "functions/local/default.pgo"

// Flags are BuildFlags with -pgo set to the Profile of the module rooted
// at root, when it has one.
func Flags(root string) ([]string, error) {
	p, err := filepath.Abs(filepath.Join(root, Profile))
	if err != nil {
		return nil, fmt.Errorf("rie: profile path: %w", err)
	}
	if _, err := os.Stat(p); errors.Is(err, fs.ErrNotExist) {
		return BuildFlags, nil
	} else if err != nil {
		return nil, fmt.Errorf("rie: profile: %w", err)
	}
	return append(slices.Clone(BuildFlags), "-pgo="+p), nil
}

// ModuleRoot is the directory of the go.mod that dir is in.
func ModuleRoot(dir string) (string, error) {
	d, err := filepath.Abs(dir)
	if err != nil {
		return "", err
	}
	for {
		if _, err := os.Stat(filepath.Join(d, "go.mod")); err == nil {
			return d, nil
		}
		up := filepath.Dir(d)
		if up == d {
			return "", fmt.Errorf("rie: not inside a Go module (no go.mod above %s)", dir)
		}
		d = up
	}
}

// Build builds the main packages pkgs (import paths or ./relative patterns,
// resolved in dir) with the Flags of dir's module for goos/goarch (the host's when empty),
// all in one go command so they share compiled packages, and returns each
// package's bootstrap path: outDir/<last path element>/bootstrap.
func Build(ctx context.Context, dir, outDir, goos, goarch string, pkgs ...string) (map[string]string, error) {
	if goos == "" {
		goos = runtime.GOOS
	}
	if goarch == "" {
		goarch = runtime.GOARCH
	}
	tmp, err := os.MkdirTemp(outDir, ".build-")
	if err != nil {
		return nil, fmt.Errorf("rie: build: %w", err)
	}
	defer os.RemoveAll(tmp)
	root, err := ModuleRoot(dir)
	if err != nil {
		return nil, err
	}
	flags, err := Flags(root)
	if err != nil {
		return nil, err
	}
	args := append(append([]string{"build"}, flags...), "-o", tmp+string(filepath.Separator))
	cmd := exec.CommandContext(ctx, "go", append(args, pkgs...)...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0", "GOOS="+goos, "GOARCH="+goarch)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Run(); err != nil {
		return nil, fmt.Errorf("rie: go build %v: %w\n%s", pkgs, err, out.String())
	}
	paths := map[string]string{}
	for _, p := range pkgs {
		name := path.Base(filepath.ToSlash(p))
		dst := filepath.Join(outDir, name, "bootstrap")
		if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
			return nil, err
		}
		if err := os.Rename(filepath.Join(tmp, name), dst); err != nil {
			return nil, fmt.Errorf("rie: build %s: %w", p, err)
		}
		paths[name] = dst
	}
	return paths, nil
}
