package rie

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"runtime"
)

// BuildFlags are the go build flags of a deployable bootstrap: no legacy RPC
// start path, no file system paths, no VCS stamp, stripped, no build id (so
// an unchanged function builds byte for byte the same and is not redeployed).
// Build also sets CGO_ENABLED=0: a static binary runs on provided.al2023.
var BuildFlags = []string{"-tags", "lambda.norpc", "-trimpath", "-buildvcs=false", "-ldflags", "-s -w -buildid="}

// Build builds the main packages pkgs (import paths or ./relative patterns,
// resolved in dir) with BuildFlags for goos/goarch (the host's when empty),
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
	args := append(append([]string{"build"}, BuildFlags...), "-o", tmp+string(filepath.Separator))
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
