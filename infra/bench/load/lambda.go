package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"text/tabwriter"

	"github.com/sluice-gateway/sluice/pkg/lambdaedge/rie"
)

// lambdaBuildArgs are the go build arguments of a deployable bootstrap
// (rie.Flags: static, RPC-less, stripped, reproducible, profile-guided).
func lambdaBuildArgs(root string) ([]string, error) {
	flags, err := rie.Flags(root)
	if err != nil {
		return nil, err
	}
	return append([]string{"build"}, flags...), nil
}

// lambdaReport is the Lambda-readiness part of the report.
type lambdaReport struct {
	// Build is the go command the bootstraps were built with.
	Build     string          `json:"build,omitempty"`
	Functions []bootstrapSize `json:"functions"`
	Note      string          `json:"note,omitempty"`
	Startup   *startupReport  `json:"startup,omitempty"`
}

// bootstrapSize is one function's linux/arm64 bootstrap.
type bootstrapSize struct {
	Name  string `json:"name"`
	Bytes int64  `json:"bytes,omitempty"`
	Error string `json:"error,omitempty"`
}

// functionDirs lists functions/*/ directories that hold Go files.
func functionDirs(root string) ([]string, error) {
	entries, err := os.ReadDir(filepath.Join(root, "functions"))
	if os.IsNotExist(err) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("list functions: %w", err)
	}
	var names []string
	for _, e := range entries {
		if !e.IsDir() {
			continue
		}
		if gos, _ := filepath.Glob(filepath.Join(root, "functions", e.Name(), "*.go")); len(gos) > 0 {
			names = append(names, e.Name())
		}
	}
	slices.Sort(names)
	return names, nil
}

// buildBootstraps builds every function for linux/arm64 as a Lambda would
// run it and records the size of each bootstrap. All functions are built in
// one go command (shared compilation, parallel links); if that fails, each is
// built on its own so that the failing ones are named.
func buildBootstraps(ctx context.Context, root, outDir string) *lambdaReport {
	rep := &lambdaReport{}
	names, err := functionDirs(root)
	if err != nil {
		rep.Note = err.Error()
		return rep
	}
	if len(names) == 0 {
		rep.Note = "no functions/*/ packages yet: nothing to size"
		return rep
	}
	dir, err := filepath.Abs(filepath.Join(outDir, "bootstrap"))
	if err == nil {
		_ = os.RemoveAll(dir)
		err = os.MkdirAll(dir, 0o755)
	}
	if err != nil {
		rep.Note = fmt.Sprintf("bootstrap dir: %v", err)
		return rep
	}
	args, err := lambdaBuildArgs(root)
	if err != nil {
		rep.Note = err.Error()
		return rep
	}
	rep.Build = "CGO_ENABLED=0 GOOS=linux GOARCH=arm64 go " + strings.Join(args, " ")
	build := func(out string, pkgs ...string) (string, error) {
		cmd := exec.CommandContext(ctx, "go", append(append(args, "-o", out), pkgs...)...)
		cmd.Dir = root
		cmd.Env = append(os.Environ(), "CGO_ENABLED=0", "GOOS=linux", "GOARCH=arm64")
		msg, err := cmd.CombinedOutput()
		return string(msg), err
	}
	pkgs := make([]string, len(names))
	for i, name := range names {
		pkgs[i] = "./functions/" + name
	}
	_, allErr := build(dir+string(filepath.Separator), pkgs...)
	for i, name := range names {
		if ctx.Err() != nil {
			break
		}
		out := filepath.Join(dir, name)
		if allErr != nil {
			if msg, err := build(out, pkgs[i]); err != nil {
				rep.Functions = append(rep.Functions, bootstrapSize{Name: name, Error: "does not build: " + firstLines(msg, 2)})
				continue
			}
		}
		fi, err := os.Stat(out)
		if err != nil {
			rep.Functions = append(rep.Functions, bootstrapSize{Name: name, Error: err.Error()})
			continue
		}
		rep.Functions = append(rep.Functions, bootstrapSize{Name: name, Bytes: fi.Size()})
	}
	return rep
}

func (r *lambdaReport) print(w io.Writer) {
	fmt.Fprintf(w, "\n== Lambda readiness — bootstrap per functions/*/ (%s)\n", r.Build)
	if r.Note != "" {
		fmt.Fprintf(w, "   %s\n", r.Note)
	}
	if len(r.Functions) > 0 {
		tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
		for _, f := range r.Functions {
			if f.Error != "" {
				fmt.Fprintf(tw, "   %s\t%s\n", f.Name, f.Error)
				continue
			}
			fmt.Fprintf(tw, "   %s\t%.2f MB\n", f.Name, mb(f.Bytes))
		}
		tw.Flush()
	}
	if r.Startup != nil {
		r.Startup.print(w)
	}
}
