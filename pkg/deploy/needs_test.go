package deploy_test

import (
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/sluice-gateway/sluice/pkg/deploy"
	"github.com/sluice-gateway/sluice/pkg/server"
)

func functions(t *testing.T) []deploy.Function {
	t.Helper()
	fns, err := deploy.Functions()
	if err != nil {
		t.Fatal(err)
	}
	return fns
}

// TestEveryRouteDeclaresItsNeeds: every route of the route table says what
// its handler touches, so a new route cannot go unnoticed.
func TestEveryRouteDeclaresItsNeeds(t *testing.T) {
	for _, r := range server.Routes() {
		if _, err := deploy.RouteCapabilities(r); err != nil {
			t.Error(err)
		}
	}
	_, err := deploy.RouteCapabilities(server.Route{Method: "POST", Pattern: "/v1/chat/completions", Function: "chat-completions"})
	if err == nil || !strings.Contains(err.Error(), "declares no needs") {
		t.Errorf("an undeclared route: %v", err)
	}
}

// TestFunctionsMirrorTheRouteTable: one function per function of the route
// table, with exactly its routes and transfer mode, plus files-sweep.
func TestFunctionsMirrorTheRouteTable(t *testing.T) {
	fns := functions(t)
	var names []string
	for _, f := range fns {
		names = append(names, f.Name)
		if f.Name == deploy.FilesSweep {
			if f.Schedule != deploy.SweepSchedule || len(f.Routes) != 0 {
				t.Errorf("files-sweep: schedule %q, %d routes", f.Schedule, len(f.Routes))
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
	if want := append(server.Functions(), deploy.FilesSweep); !slices.Equal(names, want) {
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

// TestLeastPrivilege spells out ARCHITECTURE §2's rules: functions that
// never call models have no Bedrock or provider-secret access; the
// passthrough functions cannot touch file bytes; only the Bedrock
// passthrough reaches the agent runtime; every function reads its config
// and the master key.
func TestLeastPrivilege(t *testing.T) {
	callsModels := map[string]bool{
		"embeddings": true, "moderations": true,
		"passthrough-vertex-ai": true, "passthrough-bedrock": true, "passthrough-anthropic": true, "passthrough-gemini": true,
	}
	bedrock := map[string]bool{"embeddings": true, "moderations": true, "passthrough-bedrock": true}
	for _, f := range functions(t) {
		if got := f.Has(deploy.ProviderSecrets); got != callsModels[f.Name] {
			t.Errorf("%s: provider secrets %v, want %v", f.Name, got, callsModels[f.Name])
		}
		if got := f.Has(deploy.BedrockInvoke); got != bedrock[f.Name] {
			t.Errorf("%s: Bedrock %v, want %v", f.Name, got, bedrock[f.Name])
		}
		if got := f.Has(deploy.BedrockAgents); got != (f.Name == "passthrough-bedrock") {
			t.Errorf("%s: Bedrock agents %v", f.Name, got)
		}
		if strings.HasPrefix(f.Name, "passthrough-") && (f.Has(deploy.FilesRead) || f.Has(deploy.FilesWrite) || f.Has(deploy.FilesDelete)) {
			t.Errorf("%s touches file bytes: %v", f.Name, f.Capabilities)
		}
		if !f.Has(deploy.ConfigRead) {
			t.Errorf("%s cannot start: %v", f.Name, f.Capabilities)
		}
		// The master key is read only where a route takes a key.
		if got, want := f.Has(deploy.MasterKey), f.Name != "health" && f.Name != deploy.FilesSweep; got != want {
			t.Errorf("%s: master key %v, want %v", f.Name, got, want)
		}
		// Nothing enqueues batch work or seals secrets yet.
		if f.Has(deploy.WorkSend) || f.Has(deploy.Seal) {
			t.Errorf("%s: %v", f.Name, f.Capabilities)
		}
	}
	for name, want := range map[string][]deploy.Capability{
		"health":       {deploy.RecordsRead, deploy.ConfigRead},
		"files-list":   {deploy.RecordsRead, deploy.Limits, deploy.ConfigRead, deploy.MasterKey},
		"file-content": {deploy.RecordsRead, deploy.Limits, deploy.FilesRead, deploy.ConfigRead, deploy.MasterKey},
		"files-upload": {deploy.RecordsRead, deploy.RecordsWrite, deploy.Limits, deploy.FilesWrite, deploy.FilesDelete, deploy.ConfigRead, deploy.MasterKey},
		"passthrough-anthropic": {deploy.RecordsRead, deploy.Limits, deploy.ClaimCheckWrite, deploy.EventsPublish,
			deploy.ConfigRead, deploy.MasterKey, deploy.ProviderSecrets},
		deploy.FilesSweep: {deploy.RecordsRead, deploy.RecordsWrite, deploy.FilesDelete, deploy.ConfigRead},
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
	for _, c := range deploy.Capabilities() {
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
		"passthrough-vertex-ai": "PassthroughVertexAiFunction", deploy.FilesSweep: "FilesSweepFunction",
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
