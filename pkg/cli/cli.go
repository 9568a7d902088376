// Package cli is the sluice command: a client of the gateway's HTTP API
// (a local gateway and a deployed stack alike) that runs a batch from a
// terminal with a live progress bar, and administers teams, keys, files,
// callbacks and spend. It never reaches the store (ARCHITECTURE §12).
package cli

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"text/tabwriter"

	"github.com/spf13/cobra"
	"golang.org/x/term"
)

// Exit statuses.
const (
	ExitOK        = 0
	ExitError     = 1 // usage, connection or API errors
	ExitSomeLines = 3 // the batch ended with failed lines
	ExitBatchEnd  = 4 // the batch failed, expired or was cancelled
)

// exitStatus ends the command with a status other than 0 or 1, having
// said what it had to.
type exitStatus int

func (e exitStatus) Error() string { return fmt.Sprintf("exit status %d", int(e)) }

// usageError is a mistake in the command line.
type usageError struct{ error }

// app is one run of the command: its streams and environment.
type app struct {
	stdin          io.Reader
	stdout, stderr io.Writer
	getenv         func(string) string
	stdinBuf       *bufio.Reader
	json           bool
	// interrupts delivers Ctrl-C while a batch is watched.
	interrupts chan os.Signal
}

// Main runs the sluice command with args (without the program name) and
// returns its exit status.
func Main(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer, getenv func(string) string) int {
	a := &app{stdin: stdin, stdout: stdout, stderr: stderr, getenv: getenv, interrupts: make(chan os.Signal, 1)}
	signal.Notify(a.interrupts, os.Interrupt)
	defer signal.Stop(a.interrupts)
	root := a.root()
	root.SetArgs(args)
	root.SetIn(stdin)
	root.SetOut(stdout)
	root.SetErr(stderr)
	err := root.ExecuteContext(ctx)
	var st exitStatus
	switch {
	case err == nil:
		return ExitOK
	case errors.As(err, &st):
		return int(st)
	}
	fmt.Fprintf(stderr, "sluice: %v\n", err)
	var ae *apiError
	var ce *connError
	switch {
	case errors.As(err, &ae) && ae.hint() != "":
		fmt.Fprintf(stderr, "hint: %s\n", ae.hint())
	case errors.As(err, &ce):
		fmt.Fprintln(stderr, "hint: is the gateway running? set SLUICE_BASE_URL or run sluice login --base-url URL")
	}
	return ExitError
}

func (a *app) root() *cobra.Command {
	root := &cobra.Command{
		Use:           "sluice",
		Short:         "Run batches and administer a sluice gateway through its API",
		SilenceUsage:  true,
		SilenceErrors: true,
	}
	root.PersistentFlags().BoolVar(&a.json, "json", false, "print the API's JSON (one document per command) instead of tables")
	root.SetFlagErrorFunc(func(_ *cobra.Command, err error) error { return usageError{err} })
	root.AddCommand(a.loginCmd(), a.batchCmd(), a.teamCmd(), a.keyCmd(), a.filesCmd(), a.callbackCmd(), a.spendCmd())
	return root
}

// client returns a client of the gateway the credentials name.
func (a *app) client() (*client, error) {
	c, err := a.loadCredentials()
	if err != nil {
		return nil, err
	}
	if c.APIKey == "" {
		return nil, errors.New("no API key: run sluice login, or set SLUICE_API_KEY")
	}
	return newClient(c.BaseURL, c.APIKey), nil
}

// terminal reports whether stdout is a terminal (a bar redrawn in place)
// rather than a pipe or a file (one line per change).
func (a *app) terminal() bool {
	f, ok := a.stdout.(*os.File)
	return ok && term.IsTerminal(int(f.Fd()))
}

// printJSON writes the API's answer as one indented document.
func (a *app) printJSON(raw json.RawMessage) error {
	var v any
	if err := json.Unmarshal(raw, &v); err != nil {
		return err
	}
	enc := json.NewEncoder(a.stdout)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}

// table writes rows under a header, aligned.
func (a *app) table(header []string, rows [][]string) {
	tw := tabwriter.NewWriter(a.stdout, 0, 4, 2, ' ', 0)
	write := func(cells []string) {
		for i, c := range cells {
			if i > 0 {
				fmt.Fprint(tw, "\t")
			}
			fmt.Fprint(tw, c)
		}
		fmt.Fprintln(tw)
	}
	write(header)
	for _, r := range rows {
		write(r)
	}
	tw.Flush()
}

// exactArgs is cobra.ExactArgs as a usage error.
func exactArgs(n int) cobra.PositionalArgs {
	return func(cmd *cobra.Command, args []string) error {
		if err := cobra.ExactArgs(n)(cmd, args); err != nil {
			return usageError{err}
		}
		return nil
	}
}

func minArgs(n int) cobra.PositionalArgs {
	return func(cmd *cobra.Command, args []string) error {
		if err := cobra.MinimumNArgs(n)(cmd, args); err != nil {
			return usageError{err}
		}
		return nil
	}
}
