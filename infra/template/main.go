// Command template writes the generated sections of template.yaml (each
// function's resource, log group and alarms, each queue job's concurrency
// parameter) from pkg/server's route and jobs tables: `make template`.
// With -check it writes nothing and fails when the file is not current.
package main

import (
	"bytes"
	"flag"
	"fmt"
	"os"

	"github.com/sluice-gateway/sluice/pkg/deploy"
)

func main() {
	path := flag.String("template", "template.yaml", "the SAM template to rewrite")
	check := flag.Bool("check", false, "fail when the generated sections are not current, writing nothing")
	flag.Parse()
	if err := run(*path, *check); err != nil {
		fmt.Fprintln(os.Stderr, "template:", err)
		os.Exit(1)
	}
}

func run(path string, check bool) error {
	text, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	fns, err := deploy.Functions()
	if err != nil {
		return err
	}
	out, err := deploy.Generate(text, fns)
	if err != nil {
		return err
	}
	if bytes.Equal(out, text) {
		return nil
	}
	if check {
		return fmt.Errorf("%s is not current: run make template; what it writes differs:\n%s", path, deploy.Diff(text, out))
	}
	return os.WriteFile(path, out, 0o644)
}
