package docs

import (
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/sluice-gateway/sluice/pkg/config"
	"github.com/sluice-gateway/sluice/pkg/providers/anthropic"
	"github.com/sluice-gateway/sluice/pkg/providers/azure"
	"github.com/sluice-gateway/sluice/pkg/providers/bedrock"
	"github.com/sluice-gateway/sluice/pkg/providers/cohere"
	"github.com/sluice-gateway/sluice/pkg/providers/gemini"
	"github.com/sluice-gateway/sluice/pkg/providers/openai"
	"github.com/sluice-gateway/sluice/pkg/providers/vertex"
)

// providers are the provider names the gateway registers (pkg/server's
// registry): a deployment naming another answers 503 on every call.
var providers = append([]string{anthropic.Name, azure.Name, bedrock.Name, cohere.Name, gemini.Name, vertex.Name}, openai.Names()...)

// TestYAMLExamplesLoad loads every yaml block of the README and of every
// page in docs/, and the example config, with the config parser: each must
// parse without an error or a warning (an unknown section is a typo), and
// every deployment must name a provider the gateway has.
func TestYAMLExamplesLoad(t *testing.T) {
	pages, err := filepath.Glob("*.md")
	if err != nil {
		t.Fatal(err)
	}
	sources := map[string]string{}
	for _, page := range append(pages, "../README.md") {
		doc, err := os.ReadFile(page)
		if err != nil {
			t.Fatal(err)
		}
		blocks, err := codeBlocks(string(doc))
		if err != nil {
			t.Fatalf("%s: %v", page, err)
		}
		for _, b := range blocks {
			if b.lang == "yaml" {
				sources[page+":"+strconv.Itoa(b.line)] = b.text
			}
		}
	}
	// A page that documents the config has examples; finding none means
	// the block reader is broken, not that every example is fine.
	for _, page := range []string{"configuration.md:", "models.md:", "deploy-aws.md:"} {
		if !slices.ContainsFunc(slices.Collect(maps.Keys(sources)), func(k string) bool { return strings.HasPrefix(k, page) }) {
			t.Errorf("no yaml example found in %s", strings.TrimSuffix(page, ":"))
		}
	}
	example, err := os.ReadFile("../sluice.example.yaml")
	if err != nil {
		t.Fatal(err)
	}
	sources["../sluice.example.yaml"] = string(example)

	// Every os.environ/ reference resolves, as on a machine with the keys.
	getenv := func(string) string { return "set" }
	for where, src := range sources {
		cfg, err := config.Parse([]byte(src), getenv)
		if err != nil {
			t.Errorf("%s: %v\n%s", where, err, src)
			continue
		}
		if len(cfg.Warnings) > 0 {
			t.Errorf("%s: %q\n%s", where, cfg.Warnings, src)
		}
		for _, d := range cfg.ModelList {
			if p := d.Params.Provider(); !slices.Contains(providers, p) {
				t.Errorf("%s: %s names provider %q, which sluice does not have (it has %q)", where, d.ModelName, p, providers)
			}
		}
	}
}
