package deploy_test

import (
	"context"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/sluice-gateway/sluice/pkg/deploy"
	"github.com/sluice-gateway/sluice/pkg/server"
	"github.com/sluice-gateway/sluice/pkg/store"
)

func functions(t *testing.T) []deploy.Function {
	t.Helper()
	fns, err := deploy.Functions()
	if err != nil {
		t.Fatal(err)
	}
	return fns
}

// TestFunctionsMirrorTheTables: one function per function of the route
// table, with exactly its routes and transfer mode, then one per job with
// its trigger.
func TestFunctionsMirrorTheTables(t *testing.T) {
	fns := functions(t)
	var names []string
	for _, f := range fns {
		names = append(names, f.Name)
		if j, ok := server.LookupJob(f.Name); ok {
			if f.Schedule != j.Schedule.Cloud || len(f.Routes) != 0 || f.Stream {
				t.Errorf("job %s: schedule %q, %d routes, stream %v", f.Name, f.Schedule, len(f.Routes), f.Stream)
			}
			continue
		}
		stream, err := server.Streams(f.Name)
		if err != nil || stream != f.Stream {
			t.Errorf("%s: Stream %v, route table %v (%v)", f.Name, f.Stream, stream, err)
		}
		for _, r := range f.Routes {
			if r.Function != f.Name {
				t.Errorf("%s lists %s %s of %s", f.Name, r.Method, r.Pattern, r.Function)
			}
		}
	}
	want := server.Functions()
	for _, j := range server.Jobs() {
		want = append(want, j.Name)
	}
	if !slices.Equal(names, want) {
		t.Errorf("functions %v, want %v", names, want)
	}
	n := 0
	for _, f := range fns {
		n += len(f.Routes)
	}
	if n != len(server.Routes()) {
		t.Errorf("%d routes across the functions, the route table has %d", n, len(server.Routes()))
	}
}

// testJob is a queue job that is in no production table: the mechanism for
// the workers of later issues.
func testJob() server.Job {
	return server.Job{
		Name: "batch-test", Queue: server.WorkQueue, Workers: 4, Timeout: 2 * time.Minute,
		Needs: []server.Capability{server.RecordsWrite, server.RecordsRead},
		Handle: func(*server.Services) server.MessageHandler {
			return func(context.Context, store.Message) error { return nil }
		},
	}
}

// TestFunctionsOfAQueueJob: a job's function has its queue's template
// resource, no routes, and its needs plus what every function needs.
func TestFunctionsOfAQueueJob(t *testing.T) {
	fns, err := deploy.FunctionsOf(server.Routes(), append(server.Jobs(), testJob()))
	if err != nil {
		t.Fatal(err)
	}
	got := fns[len(fns)-1]
	want := deploy.Function{
		Name: "batch-test", Queue: deploy.WorkQueueID, Env: deploy.FunctionEnv(), Workers: 4, Batch: 4, // one invocation takes as many messages as it handles at once
		Capabilities: []server.Capability{server.RecordsRead, server.RecordsWrite, server.ConfigRead},
		Memory:       deploy.DefaultMemory, Timeout: 2 * time.Minute,
	}
	if diff := cmp.Diff(want, got, cmpopts.IgnoreUnexported(server.Route{})); diff != "" {
		t.Errorf("the test job's function (-want +got):\n%s", diff)
	}
	if p := got.ConcurrencyParameter(); p != "BatchTestMaxConcurrency" {
		t.Errorf("ConcurrencyParameter %q", p)
	}
}

// TestFunctionsOfRefusesBadDeclarations: a function mixing transfer modes,
// a job without a trigger or with two, a job taking a route function's name.
func TestFunctionsOfRefusesBadDeclarations(t *testing.T) {
	mixed := []server.Route{
		{Method: "GET", Pattern: "/a", Function: "f", Stream: true},
		{Method: "GET", Pattern: "/b", Function: "f"},
	}
	twoTriggers := testJob()
	twoTriggers.Schedule = server.Schedule{Cloud: "rate(1 hour)", Local: time.Minute}
	noTrigger := testJob()
	noTrigger.Queue = ""
	badSchedule := server.Job{Name: "s", Schedule: server.Schedule{Cloud: "every hour", Local: time.Minute},
		Run: func(*server.Services) server.RunFunc { return func(context.Context) error { return nil } }}
	clash := testJob()
	clash.Name = "admin"
	noWorkers := testJob()
	noWorkers.Workers = 0
	for _, tc := range []struct {
		name   string
		routes []server.Route
		jobs   []server.Job
		want   string
	}{
		{"mixed transfer modes", mixed, nil, `function "f" mixes streaming and buffered routes`},
		{"two triggers", nil, []server.Job{twoTriggers}, "both a schedule and a queue"},
		{"no trigger", nil, []server.Job{noTrigger}, "no trigger"},
		{"a schedule EventBridge cannot read", nil, []server.Job{badSchedule}, `schedule "every hour" is not an EventBridge`},
		{"a route function's name", server.Routes(), []server.Job{clash}, `job "admin" has the name of another function`},
		{"no workers", nil, []server.Job{noWorkers}, "workers = 0"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := deploy.FunctionsOf(tc.routes, tc.jobs)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("error %v, want one saying %q", err, tc.want)
			}
		})
	}
}

// TestLeastPrivilege spells out ARCHITECTURE §2's rules: functions that
// never call models have no Bedrock or provider-secret access (but the
// callback delivery, for the gateway-wide callbacks' credentials); the
// passthrough functions cannot touch file bytes; only the Bedrock
// passthrough reaches the agent runtime; only adding a team callback and
// delivering to one use the sealing key; every function reads its config,
// and the master key where a route takes a key.
func TestLeastPrivilege(t *testing.T) {
	callsModels := map[string]bool{
		"embeddings": true, "moderations": true, "chat-completions": true, "completions": true, "responses": true, "messages": true, "batch-worker": true,
		// Native batches: the provider's batch API, the mirrored lines' events.
		"batches-create": true, "batch-get": true, "batch-cancel": true, "batch-native-poll": true,
		"passthrough-vertex-ai": true, "passthrough-bedrock": true, "passthrough-anthropic": true, "passthrough-gemini": true,
	}
	providerSecrets := maps.Clone(callsModels)
	providerSecrets["callback-delivery"] = true
	seals := map[string]bool{"team-callback-add": true, "callback-delivery": true}
	// /v1/completions and /v1/responses go to OpenAI-family providers only.
	bedrock := map[string]bool{"embeddings": true, "moderations": true, "chat-completions": true, "messages": true, "passthrough-bedrock": true, "batch-worker": true}
	// Who queues batch work, and who keeps its messages hidden.
	sends := map[string]bool{"batches-create": true, "batch-cancel": true, "batch-worker": true, "batch-sweeper": true}
	for _, f := range functions(t) {
		if got := f.Has(server.ProviderSecrets); got != providerSecrets[f.Name] {
			t.Errorf("%s: provider secrets %v, want %v", f.Name, got, providerSecrets[f.Name])
		}
		if got := f.Has(server.BedrockInvoke); got != bedrock[f.Name] {
			t.Errorf("%s: Bedrock %v, want %v", f.Name, got, bedrock[f.Name])
		}
		if got := f.Has(server.BedrockAgents); got != (f.Name == "passthrough-bedrock") {
			t.Errorf("%s: Bedrock agents %v", f.Name, got)
		}
		if strings.HasPrefix(f.Name, "passthrough-") && (f.Has(server.FilesRead) || f.Has(server.FilesWrite) || f.Has(server.FilesDelete)) {
			t.Errorf("%s touches file bytes: %v", f.Name, f.Capabilities)
		}
		if !f.Has(server.ConfigRead) {
			t.Errorf("%s cannot start: %v", f.Name, f.Capabilities)
		}
		// The master key is read only where a route takes a key (health and
		// the admin page's assets are public).
		if got, want := f.Has(server.MasterKey), len(f.Routes) > 0 && f.Name != "health" && f.Name != "ui"; got != want {
			t.Errorf("%s: master key %v, want %v", f.Name, got, want)
		}
		if got := f.Has(server.Seal); got != seals[f.Name] {
			t.Errorf("%s: seal %v, want %v", f.Name, got, seals[f.Name])
		}
		if f.Has(server.WorkSend) != sends[f.Name] || f.Has(server.WorkExtend) != (f.Name == "batch-worker") {
			t.Errorf("%s: %v", f.Name, f.Capabilities)
		}
	}
	for name, want := range map[string][]server.Capability{
		"health":       {server.RecordsRead, server.ConfigRead},
		"files-list":   {server.RecordsRead, server.Limits, server.ConfigRead, server.MasterKey},
		"file-content": {server.RecordsRead, server.Limits, server.FilesRead, server.ConfigRead, server.MasterKey},
		"files-upload": {server.RecordsRead, server.RecordsWrite, server.Limits, server.FilesWrite, server.FilesDelete, server.ConfigRead, server.MasterKey},
		"passthrough-anthropic": {server.RecordsRead, server.Limits, server.ClaimCheckWrite, server.EventsPublish,
			server.ConfigRead, server.MasterKey, server.ProviderSecrets},
		"files-sweep": {server.RecordsRead, server.RecordsWrite, server.FilesDelete, server.ConfigRead},
		"batches-create": {server.RecordsRead, server.RecordsWrite, server.Limits, server.FilesRead, server.FilesWrite, server.FilesDelete,
			server.ClaimCheckWrite, server.WorkSend, server.EventsPublish, server.ConfigRead, server.MasterKey, server.ProviderSecrets, server.BedrockBatch},
		"batch-native-poll": {server.RecordsRead, server.RecordsWrite, server.FilesRead, server.FilesWrite, server.FilesDelete,
			server.ClaimCheckWrite, server.EventsPublish, server.ConfigRead, server.ProviderSecrets, server.BedrockBatch},
		"batch-sweeper": {server.RecordsRead, server.WorkSend, server.ConfigRead},
		"batch-worker": {server.RecordsRead, server.RecordsWrite, server.Limits, server.FilesRead, server.FilesWrite, server.FilesDelete,
			server.ClaimCheckWrite, server.WorkSend, server.WorkExtend, server.EventsPublish, server.ConfigRead, server.ProviderSecrets, server.BedrockInvoke},
		"callback-delivery": {server.RecordsRead, server.RecordsWrite, server.ClaimCheckRead, server.DeliveryDeadLetter,
			server.Seal, server.ConfigRead, server.ProviderSecrets},
		"team-callback-get": {server.RecordsRead, server.Limits, server.ConfigRead, server.MasterKey},
	} {
		f, err := deploy.Lookup(name)
		if err != nil {
			t.Fatal(err)
		}
		if !slices.Equal(f.Capabilities, want) {
			t.Errorf("%s: %v, want %v", name, f.Capabilities, want)
		}
	}
}

func TestEveryCapabilityGrantsSomething(t *testing.T) {
	for _, c := range server.Capabilities() {
		gs := deploy.Grants(c)
		if len(gs) == 0 {
			t.Errorf("%s grants nothing", c)
		}
		for _, g := range gs {
			if len(g.Actions) == 0 || len(g.Resources) == 0 {
				t.Errorf("%s: empty grant %+v", c, g)
			}
			for _, r := range g.Resources {
				if r == "*" || strings.HasSuffix(r, ":*") {
					t.Errorf("%s: grant on %q is not scoped to a resource", c, r)
				}
			}
		}
	}
}

func TestLogicalID(t *testing.T) {
	for name, want := range map[string]string{
		"health": "HealthFunction", "files-upload": "FilesUploadFunction",
		"passthrough-vertex-ai": "PassthroughVertexAiFunction", "files-sweep": "FilesSweepFunction",
	} {
		if got := deploy.LogicalID(name); got != want {
			t.Errorf("LogicalID(%q) = %q, want %q", name, got, want)
		}
	}
}

func TestAPIPath(t *testing.T) {
	for _, tc := range []struct{ pattern, want, err string }{
		{"/v1/files", "/v1/files", ""},
		{"/v1/files/{file_id}/content", "/v1/files/{file_id}/content", ""},
		{"/anthropic/{endpoint...}", "/anthropic/{endpoint+}", ""},
		{"/a/{rest...}/b", "", "last segment"},
		{"/a/{$}", "", "no {$}"},
		{"/a/x{id}", "", "whole {name}"},
		{"/a/{}", "", "whole {name}"},
		{"GET /a", "", "starting with /"},
		{"example.com/a", "", "starting with /"},
	} {
		got, err := deploy.APIPath(tc.pattern)
		switch {
		case tc.err == "" && (err != nil || got != tc.want):
			t.Errorf("APIPath(%q) = %q, %v; want %q", tc.pattern, got, err, tc.want)
		case tc.err != "" && (err == nil || !strings.Contains(err.Error(), tc.err)):
			t.Errorf("APIPath(%q) = %q, %v; want an error saying %q", tc.pattern, got, err, tc.err)
		}
	}
}

// TestEveryMainIsDeployed: every functions/<fn>/main.go (but the local
// process) is a function of Functions, so none is left out of the template.
func TestEveryMainIsDeployed(t *testing.T) {
	mains, err := filepath.Glob("../../functions/*/main.go")
	if err != nil || len(mains) == 0 {
		t.Fatalf("no functions/*/main.go: %v", err)
	}
	var names []string
	for _, f := range functions(t) {
		names = append(names, f.Name)
	}
	for _, m := range mains {
		fn := filepath.Base(filepath.Dir(m))
		if fn != "local" && !slices.Contains(names, fn) {
			t.Errorf("functions/%s is not declared in pkg/deploy (Functions): the template would not deploy it", fn)
		}
	}
}

// TestBuildTargets: `sam build` runs make build-<LogicalId> for each
// function; infra/deploy.mk must map every logical ID to its function.
func TestBuildTargets(t *testing.T) {
	if _, err := exec.LookPath("make"); err != nil {
		t.Skip("make is not installed")
	}
	fns := functions(t)
	args := []string{"-n", "-C", "../..", "ARTIFACTS_DIR=/artifacts"}
	for _, f := range fns {
		args = append(args, "build-"+f.LogicalID())
	}
	out, err := exec.Command("make", args...).CombinedOutput()
	if err != nil {
		t.Fatalf("make %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	lines := strings.Split(strings.TrimSpace(string(out)), "\n")
	var builds []string
	for _, l := range lines {
		if strings.HasPrefix(l, "GOOS=") {
			builds = append(builds, l)
		}
	}
	if len(builds) != len(fns) {
		t.Fatalf("%d build commands for %d functions:\n%s", len(builds), len(fns), out)
	}
	for i, f := range fns {
		for _, want := range []string{"GOOS=linux GOARCH=arm64 CGO_ENABLED=0", "-tags lambda.norpc", "-trimpath", `-o "/artifacts/bootstrap"`, " ./functions/" + f.Name} {
			if !strings.Contains(builds[i], want) {
				t.Errorf("build-%s: %q lacks %q", f.LogicalID(), builds[i], want)
			}
		}
		if !strings.HasSuffix(builds[i], "./functions/"+f.Name) {
			t.Errorf("build-%s builds %q", f.LogicalID(), builds[i])
		}
	}
}

// TestDeployScriptPlan: make deploy's script (infra/deploy.sh, dry run)
// creates a stack with the records table unprotected and then protects it,
// deletes a stack a failed first create left in ROLLBACK_COMPLETE before
// creating it again (the retry is the same command), keeps the protection on
// every later deploy, and keeps samconfig.toml's parameter overrides.
func TestDeployScriptPlan(t *testing.T) {
	if _, err := exec.LookPath("python3"); err != nil {
		t.Skip("python3 is not installed")
	}
	deploy := "sam deploy --config-env default --parameter-overrides Stage=dev ConfigParameterName=/sluice/dev/config MasterKeySecretName=sluice/dev/master-key ProviderSecretName=sluice/dev/providers EnableBedrock=false ProtectRecords="
	for _, tc := range []struct {
		status string
		want   []string
	}{
		{"NONE", []string{deploy + "false", deploy + "true --no-confirm-changeset --no-fail-on-empty-changeset"}},
		{"ROLLBACK_COMPLETE", []string{
			"aws cloudformation delete-stack --stack-name sluice-dev",
			"aws cloudformation wait stack-delete-complete --stack-name sluice-dev",
			deploy + "false", deploy + "true --no-confirm-changeset --no-fail-on-empty-changeset",
		}},
		{"UPDATE_COMPLETE", []string{deploy + "true"}},
		{"CREATE_COMPLETE", []string{deploy + "true"}},
	} {
		cmd := exec.Command("infra/deploy.sh")
		cmd.Dir = "../.."
		cmd.Env = append(os.Environ(), "SLUICE_DEPLOY_DRY_RUN=1", "SLUICE_STACK_STATUS="+tc.status, "SAM_CONFIG_ENV=default", "SAM_DEPLOY_FLAGS=", "SAM=sam", "AWS=aws")
		out, err := cmd.Output()
		if err != nil {
			t.Errorf("%s: %v", tc.status, err)
			continue
		}
		if diff := cmp.Diff(tc.want, strings.Split(strings.TrimSpace(string(out)), "\n")); diff != "" {
			t.Errorf("%s: the plan (-want +got):\n%s", tc.status, diff)
		}
	}
	cmd := exec.Command("infra/deploy.sh")
	cmd.Dir = "../.."
	cmd.Env = append(os.Environ(), "SLUICE_DEPLOY_DRY_RUN=1", "SLUICE_STACK_STATUS=UPDATE_IN_PROGRESS")
	if out, err := cmd.CombinedOutput(); err == nil || !strings.Contains(string(out), "wait for it to end") {
		t.Errorf("a stack in progress: %v, %s", err, out)
	}
}

// TestMissingObjectIs404: whatever reads objects may list the bucket with no
// s3:prefix condition — S3 answers a missing key with 404 only to a caller
// allowed s3:ListBucket, and a GetObject or HeadObject request carries no
// s3:prefix, so a conditioned grant would leave it a 403 (a 500 to the
// client).
func TestMissingObjectIs404(t *testing.T) {
	for _, c := range []server.Capability{server.FilesRead, server.ClaimCheckRead} {
		listed := false
		for _, g := range deploy.Grants(c) {
			if slices.Contains(g.Actions, "s3:ListBucket") {
				listed = slices.Equal(g.Resources, []string{"${" + deploy.BucketID + ".Arn}"}) && len(g.Condition) == 0 && g.When == ""
			}
		}
		if !listed {
			t.Errorf("%s: no unconditioned s3:ListBucket on the bucket: a missing object would be S3's 403", c)
		}
	}
}
