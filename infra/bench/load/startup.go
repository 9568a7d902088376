package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"text/tabwriter"
)

// startupCases are the functions whose cold start the report gives, each on
// one sample event: the lightest (health), the admin API on a fresh store,
// a model call (to the bench upstream) and a multipart upload.
var startupCases = []struct{ fn, event string }{
	{"health", "events/health/liveliness.json"},
	{"admin", "events/admin/team-list.json"},
	{"embeddings", "events/embeddings/create.json"},
	{"files-upload", "events/files-upload/upload-batch-input.json"},
}

// startupReport is the cold start of a few functions on this machine, as
// infra/invoke measures it: the bootstrap run under aws-lambda-rie, init =
// the init the emulator reports (exec → first /next), first answer = the
// emulator's exec → the first event fully answered.
type startupReport struct {
	Runs      int              `json:"cold_starts_per_function"`
	Note      string           `json:"note,omitempty"`
	Functions []startupFigures `json:"functions,omitempty"`
}

type startupFigures struct {
	Function      string  `json:"function"`
	Event         string  `json:"event"`
	InitMS        float64 `json:"init_ms_median"`
	FirstAnswerMS float64 `json:"first_answer_ms_median"`
	FirstMaxMS    float64 `json:"first_answer_ms_max"`
	Outcome       string  `json:"outcome,omitempty"`
	Error         string  `json:"error,omitempty"`
}

// invokeSummary is the part of `invoke -json` the report reads.
type invokeSummary struct {
	InitMedianMS        float64 `json:"init_ms_median"`
	FirstAnswerMedianMS float64 `json:"first_answer_ms_median"`
	FirstAnswerMaxMS    float64 `json:"first_answer_ms_max"`
	Runs                []struct {
		Invokes []struct {
			Outcome string `json:"outcome"`
			Error   string `json:"error"`
		} `json:"invokes"`
	} `json:"runs"`
}

// measureStartup builds the startupCases functions for this machine with the
// production flags, and infra/invoke, then runs `invoke -json -n runs` on
// each. The embeddings function's model points at the bench upstream.
func measureStartup(ctx context.Context, root, outDir, upstream string, runs int) *startupReport {
	rep := &startupReport{Runs: runs}
	dir, err := filepath.Abs(filepath.Join(outDir, "startup"))
	if err == nil {
		_ = os.RemoveAll(dir)
		err = os.MkdirAll(dir, 0o755)
	}
	if err != nil {
		rep.Note = fmt.Sprintf("startup dir: %v", err)
		return rep
	}
	defer os.RemoveAll(dir)
	conf := filepath.Join(dir, "sluice.yaml")
	if err := os.WriteFile(conf, []byte(sluiceConfig(upstream, "")), 0o644); err != nil {
		rep.Note = fmt.Sprintf("write config: %v", err)
		return rep
	}
	pkgs := []string{"./infra/invoke"}
	for _, c := range startupCases {
		pkgs = append(pkgs, "./functions/"+c.fn)
	}
	args, err := lambdaBuildArgs(root)
	if err != nil {
		rep.Note = err.Error()
		return rep
	}
	build := exec.CommandContext(ctx, "go", append(append(args, "-o", dir+string(filepath.Separator)), pkgs...)...)
	build.Dir = root
	build.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := build.CombinedOutput(); err != nil {
		rep.Note = "build for this machine: " + firstLines(string(out), 3)
		return rep
	}
	for _, c := range startupCases {
		if ctx.Err() != nil {
			break
		}
		rep.Functions = append(rep.Functions, coldStarts(ctx, root, dir, conf, c.fn, c.event, runs))
	}
	return rep
}

// coldStarts runs one function's cold starts through infra/invoke.
func coldStarts(ctx context.Context, root, dir, conf, fn, event string, runs int) startupFigures {
	f := startupFigures{Function: fn, Event: event}
	cmd := exec.CommandContext(ctx, filepath.Join(dir, "invoke"), "-q", "-json", "-n", fmt.Sprint(runs),
		"-fn", fn, "-bin", filepath.Join(dir, fn), "-event", event, "-env", "SLUICE_CONFIG="+conf)
	cmd.Dir = root
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		f.Error = fmt.Sprintf("invoke: %v: %s", err, firstLines(stderr.String(), 3))
		return f
	}
	var sum invokeSummary
	if err := json.Unmarshal(out, &sum); err != nil {
		f.Error = fmt.Sprintf("invoke -json: %v", err)
		return f
	}
	f.InitMS, f.FirstAnswerMS, f.FirstMaxMS = sum.InitMedianMS, sum.FirstAnswerMedianMS, sum.FirstAnswerMaxMS
	if len(sum.Runs) > 0 && len(sum.Runs[0].Invokes) > 0 {
		inv := sum.Runs[0].Invokes[0]
		f.Outcome, f.Error = inv.Outcome, inv.Error
	}
	return f
}

func (r *startupReport) print(w io.Writer) {
	fmt.Fprintf(w, "   cold start on this machine (infra/invoke under the Runtime API harness, host build with the same flags; medians of %d cold starts):\n", r.Runs)
	if r.Note != "" {
		fmt.Fprintf(w, "   %s\n", r.Note)
	}
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	for _, f := range r.Functions {
		if f.Error != "" && f.InitMS == 0 {
			fmt.Fprintf(tw, "   %s\t%s\n", f.Function, f.Error)
			continue
		}
		fmt.Fprintf(tw, "   %s\tinit %.1f ms\tfirst answer %.1f ms (max %.1f)\t%s %s\n", f.Function, f.InitMS, f.FirstAnswerMS, f.FirstMaxMS, f.Outcome, filepath.Base(f.Event))
	}
	tw.Flush()
}
