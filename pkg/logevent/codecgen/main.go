// Command codecgen writes pkg/logevent's codec_gen.go — the log event's
// JSON appenders and fast decoders — from the struct declarations in
// event.go, so the event's schema is written once: `go generate
// ./pkg/logevent`. With -check it writes nothing and fails when the file is
// not current (TestGeneratedCodecIsCurrent runs the same check).
package main

import (
	"bytes"
	"flag"
	"fmt"
	"os"
)

func main() {
	src := flag.String("src", "event.go", "the file declaring the event's types")
	out := flag.String("out", "codec_gen.go", "the generated file")
	check := flag.Bool("check", false, "fail when the generated file is not current, writing nothing")
	flag.Parse()
	if err := run(*src, *out, *check); err != nil {
		fmt.Fprintln(os.Stderr, "codecgen:", err)
		os.Exit(1)
	}
}

func run(src, out string, check bool) error {
	text, err := os.ReadFile(src)
	if err != nil {
		return err
	}
	code, err := generate(text, "Event")
	if err != nil {
		return fmt.Errorf("%s: %w", src, err)
	}
	if check {
		current, err := os.ReadFile(out)
		if err != nil {
			return err
		}
		if !bytes.Equal(current, code) {
			return fmt.Errorf("%s is not current: run go generate ./pkg/logevent", out)
		}
		return nil
	}
	return os.WriteFile(out, code, 0o644)
}
