package spend

import (
	"bytes"
	"context"
	"log/slog"
	"math"
	"strings"
	"testing"

	"github.com/sluice-gateway/sluice/pkg/config"
	"github.com/sluice-gateway/sluice/pkg/logevent"
)

func f(v float64) *float64 { return &v }

func TestShippedTableHasASourceAndPricesEveryModel(t *testing.T) {
	tab, err := ShippedTable()
	if err != nil {
		t.Fatal(err)
	}
	if tab.Source == "" || len(tab.SourceDate) != len("2006-01-02") {
		t.Errorf("source %q, source_date %q: the table must say where its prices come from and when", tab.Source, tab.SourceDate)
	}
	if len(tab.Models) < 10 {
		t.Errorf("%d models priced", len(tab.Models))
	}
	for name, p := range tab.Models {
		if !p.Known() || p.Output == nil {
			t.Errorf("%s: input and output prices are required", name)
			continue
		}
		if m := p.MaxOutput; m != nil && (*m < 1000 || *m > 1e6 || *m != float64(int64(*m))) {
			t.Errorf("%s: max_output_tokens = %v is not a plausible token count", name, *m)
		}
		for field, v := range p.fields() {
			if field == "max_output_tokens" {
				continue
			}
			if *v != nil && (**v < 0 || **v > 1e-3) {
				t.Errorf("%s: %s = %v per token is not a plausible price", name, field, **v)
			}
		}
	}
}

func TestCost(t *testing.T) {
	full := Price{Input: f(2e-6), Output: f(8e-6), CachedInput: f(5e-7), BatchInput: f(1e-6), BatchOutput: f(4e-6)}
	plain := Price{Input: f(2e-6), Output: f(8e-6)}
	for _, tc := range []struct {
		name  string
		price Price
		use   Usage
		want  float64
	}{
		{"input and output", full, Usage{PromptTokens: 1000, CompletionTokens: 100}, 1000*2e-6 + 100*8e-6},
		{"cached input at its price", full, Usage{PromptTokens: 1000, CachedTokens: 400, CompletionTokens: 100}, 600*2e-6 + 400*5e-7 + 100*8e-6},
		{"cached input without its price at the input price", plain, Usage{PromptTokens: 1000, CachedTokens: 400}, 1000 * 2e-6},
		{"batch prices", full, Usage{PromptTokens: 1000, CompletionTokens: 100, Batch: true}, 1000*1e-6 + 100*4e-6},
		{"batch without batch prices at the normal ones", plain, Usage{PromptTokens: 1000, CompletionTokens: 100, Batch: true}, 1000*2e-6 + 100*8e-6},
		{"embeddings: input only", Price{Input: f(2e-8)}, Usage{PromptTokens: 5000}, 5000 * 2e-8},
		{"more cached than prompt tokens", full, Usage{PromptTokens: 10, CachedTokens: 50}, 10 * 5e-7},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := tc.price.Cost(tc.use); math.Abs(got-tc.want) > 1e-15 {
				t.Errorf("cost = %v, want %v", got, tc.want)
			}
		})
	}
}

func TestTableLookupNormalizesProviderNames(t *testing.T) {
	tab := &Table{Models: map[string]Price{"gemini-2.0-flash": {Input: f(1)}, "anthropic.claude-x-v1:0": {Input: f(2)}}}
	for _, name := range []string{"gemini-2.0-flash", "models/gemini-2.0-flash", "publishers/google/models/gemini-2.0-flash", "us.anthropic.claude-x-v1:0", "eu.anthropic.claude-x-v1:0"} {
		if _, ok := tab.Lookup(name); !ok {
			t.Errorf("%s: not found", name)
		}
	}
	if _, ok := tab.Lookup("gemini-9"); ok {
		t.Error("an unknown model was found")
	}
}

func parse(t *testing.T, yaml string) *config.Config {
	t.Helper()
	cfg, err := config.Parse([]byte(yaml), func(string) string { return "" })
	if err != nil {
		t.Fatal(err)
	}
	return cfg
}

func TestPricerOverridesTheTableWithLiteLLMNames(t *testing.T) {
	tab := &Table{Models: map[string]Price{"gpt-x": {Input: f(1e-6), Output: f(2e-6), BatchInput: f(5e-7)}}}
	cfg := parse(t, `
model_list:
  - model_name: table
    litellm_params: {model: openai/gpt-x}
  - model_name: params
    litellm_params:
      model: openai/gpt-x
      input_cost_per_token: 3e-6
      output_cost_per_token_batches: 1.5e-6
      cache_read_input_token_cost: 1e-7
  - model_name: info
    litellm_params: {model: openai/gpt-x, output_cost_per_token: 9e-6}
    model_info: {id: info-1, output_cost_per_token: 7e-6, input_cost_per_token_batches: 4e-7, max_output_tokens: 4096}
  - model_name: own
    litellm_params: {model: hosted_vllm/llama, input_cost_per_token: 0, output_cost_per_token: 0}
`)
	p, err := NewPricer(tab, cfg)
	if err != nil {
		t.Fatal(err)
	}
	check := func(id string, want Price) {
		t.Helper()
		got, ok := p.Lookup(id, "")
		if !ok {
			t.Fatalf("%s: no price", id)
		}
		for name, g := range got.fields() {
			w := want.fields()[name]
			if (*g == nil) != (*w == nil) || *g != nil && **g != **w {
				t.Errorf("%s: %s = %v, want %v", id, name, deref(*g), deref(*w))
			}
		}
	}
	check("table#0", Price{Input: f(1e-6), Output: f(2e-6), BatchInput: f(5e-7)})
	check("params#1", Price{Input: f(3e-6), Output: f(2e-6), CachedInput: f(1e-7), BatchInput: f(5e-7), BatchOutput: f(1.5e-6)})
	// litellm_params wins over model_info.
	check("info-1", Price{Input: f(1e-6), Output: f(9e-6), BatchInput: f(4e-7), MaxOutput: f(4096)})
	check("own#3", Price{Input: f(0), Output: f(0)})
}

func deref(v *float64) any {
	if v == nil {
		return nil
	}
	return *v
}

func TestPricerRefusesAPriceThatIsNotANumber(t *testing.T) {
	for _, v := range []string{`"cheap"`, `-1e-6`, `[1]`} {
		cfg := parse(t, "model_list:\n  - model_name: m\n    litellm_params: {model: openai/gpt-x, input_cost_per_token: "+v+"}\n")
		if _, err := NewPricer(&Table{}, cfg); err == nil || !strings.Contains(err.Error(), "input_cost_per_token") {
			t.Errorf("%s: err = %v, want one naming input_cost_per_token", v, err)
		}
	}
}

func TestPriceOfAnUnknownModelIsZeroAndSaysSoOncePerModel(t *testing.T) {
	var logs bytes.Buffer
	prev := slog.Default()
	slog.SetDefault(slog.New(slog.NewTextHandler(&logs, nil)))
	t.Cleanup(func() { slog.SetDefault(prev) })
	p, err := NewPricer(&Table{Models: map[string]Price{}}, &config.Config{})
	if err != nil {
		t.Fatal(err)
	}
	for range 3 {
		ev := &logevent.Event{Model: "mystery", PromptTokens: 10, CompletionTokens: 5, TotalTokens: 15, ResponseCost: 1}
		p.Price(context.Background(), ev)
		if ev.ResponseCost != 0 || !ev.CostUnknown {
			t.Errorf("cost %v, cost_unknown %v; want 0 and true", ev.ResponseCost, ev.CostUnknown)
		}
	}
	if n := strings.Count(logs.String(), "no price for this model"); n != 1 {
		t.Errorf("%d warnings for one model, want 1:\n%s", n, logs.String())
	}
	// A call that used nothing costs 0 whatever its model: not unknown.
	ev := &logevent.Event{Model: "mystery2"}
	p.Price(context.Background(), ev)
	if ev.CostUnknown {
		t.Error("a call with no tokens was marked cost_unknown")
	}
}

func TestPriceMarksACostFromEstimatedTokens(t *testing.T) {
	p, _ := NewPricer(&Table{Models: map[string]Price{"m": {Input: f(1e-6), Output: f(2e-6)}}}, &config.Config{})
	ev := &logevent.Event{Model: "m", PromptTokens: 10, CompletionTokens: 3, TotalTokens: 13, UsageEstimated: true}
	p.Price(context.Background(), ev)
	if want := 10*1e-6 + 3*2e-6; math.Abs(ev.ResponseCost-want) > 1e-15 || !ev.CostEstimated {
		t.Errorf("cost %v estimated %v, want %v true", ev.ResponseCost, ev.CostEstimated, want)
	}
	native := &logevent.Event{Model: "m", PromptTokens: 10, TotalTokens: 10, NativeBatch: true}
	p.Price(context.Background(), native)
	if math.Abs(native.ResponseCost-10*1e-6) > 1e-15 {
		t.Errorf("a native batch line without batch prices costs %v, want the normal price", native.ResponseCost)
	}
}
