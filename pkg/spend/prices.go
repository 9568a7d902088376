// Package spend prices every model call, counts what keys, teams and
// models spend — exactly once per call, from the log events — enforces
// budgets at admission and reports spend per day.
//
// A call's cost is computed once, where its log event is emitted
// (Pricer, the emitter's hook), and lives in the event's response_cost.
// The callback-delivery job hands every event to a Counter, which adds it
// to per-day and per-budget-period counters in few writes (aggregated,
// one transaction a flush) and idempotently (a dedupe record per event
// id in the same transaction). Budgets admits each call against the
// stored spend plus what calls in flight in this process are estimated to
// cost.
package spend

import (
	"context"
	_ "embed"
	"encoding/json"
	"fmt"
	"log/slog"
	"math"
	"strings"
	"sync"

	"github.com/sluice-gateway/sluice/pkg/config"
	"github.com/sluice-gateway/sluice/pkg/logevent"
)

//go:embed prices.json
var pricesJSON []byte

// Price is a model's price in USD per token, under LiteLLM's names. A
// field not set falls back: cached input to input, batch prices to the
// normal ones.
type Price struct {
	Input       *float64 `json:"input_cost_per_token"`
	Output      *float64 `json:"output_cost_per_token"`
	CachedInput *float64 `json:"cache_read_input_token_cost,omitempty"`
	BatchInput  *float64 `json:"input_cost_per_token_batches,omitempty"`
	BatchOutput *float64 `json:"output_cost_per_token_batches,omitempty"`
	// MaxOutput is the most tokens the model answers with (LiteLLM's
	// max_output_tokens): a batch's worst case when a line sets no cap.
	MaxOutput *float64 `json:"max_output_tokens,omitempty"`
}

// priceFields are Price's fields by their LiteLLM name, for overrides.
func (p *Price) fields() map[string]**float64 {
	return map[string]**float64{
		"input_cost_per_token":          &p.Input,
		"output_cost_per_token":         &p.Output,
		"cache_read_input_token_cost":   &p.CachedInput,
		"input_cost_per_token_batches":  &p.BatchInput,
		"output_cost_per_token_batches": &p.BatchOutput,
		"max_output_tokens":             &p.MaxOutput,
	}
}

// Known reports whether p prices a call: it has an input price.
func (p Price) Known() bool { return p.Input != nil }

func or(v *float64, def float64) float64 {
	if v == nil {
		return def
	}
	return *v
}

// Usage is what a call is priced on.
type Usage struct {
	PromptTokens     int64 // cached ones included
	CachedTokens     int64
	CompletionTokens int64
	// Batch prices the call at the batch prices (a native batch's line).
	Batch bool
}

// Cost is what u costs at p, in USD.
func (p Price) Cost(u Usage) float64 {
	in, out := or(p.Input, 0), or(p.Output, 0)
	cached := or(p.CachedInput, in)
	if u.Batch {
		in, out = or(p.BatchInput, in), or(p.BatchOutput, out)
		cached = min(cached, in)
	}
	c := min(max(u.CachedTokens, 0), max(u.PromptTokens, 0))
	return float64(max(u.PromptTokens, 0)-c)*in + float64(c)*cached + float64(max(u.CompletionTokens, 0))*out
}

// Table is the price table shipped with sluice (prices.json).
type Table struct {
	Source     string           `json:"source"`
	SourceDate string           `json:"source_date"`
	Models     map[string]Price `json:"models"`
}

// ShippedTable returns the embedded price table.
func ShippedTable() (*Table, error) {
	var t Table
	if err := json.Unmarshal(pricesJSON, &t); err != nil {
		return nil, fmt.Errorf("spend: price table: %w", err)
	}
	return &t, nil
}

// Lookup finds the price of a provider's model name: as given, without a
// path ("models/gemini-2.0-flash"), without a Bedrock cross-region prefix
// ("us.anthropic...").
func (t *Table) Lookup(model string) (Price, bool) {
	if p, ok := t.Models[model]; ok {
		return p, true
	}
	if i := strings.LastIndexByte(model, '/'); i >= 0 {
		model = model[i+1:]
		if p, ok := t.Models[model]; ok {
			return p, true
		}
	}
	for _, region := range []string{"us.", "eu.", "apac.", "global."} {
		if rest, ok := strings.CutPrefix(model, region); ok {
			p, ok := t.Models[rest]
			return p, ok
		}
	}
	return Price{}, false
}

// Pricer prices log events (logevent.Pricer): a deployment's price is the
// table's for its provider model, overridden by its litellm_params and
// model_info; a passthrough call's is the table's for the model it named.
type Pricer struct {
	table       *Table
	deployments map[string]Price // by deployment id
	settle      func(ctx context.Context, cost float64)
	warned      sync.Map // model → struct{}: one warning per model per process
}

// NewPricer builds the pricer of cfg's deployments over table. A price
// override that is not a non-negative number is a config error.
func NewPricer(table *Table, cfg *config.Config) (*Pricer, error) {
	p := &Pricer{table: table, deployments: map[string]Price{}}
	for i, d := range cfg.ModelList {
		price, _ := table.Lookup(d.Params.ProviderModel())
		for _, over := range []map[string]any{d.ModelInfo.Extra, d.Params.Extra} {
			if err := override(&price, over); err != nil {
				return nil, fmt.Errorf("model_list[%d] (%s): %w", i, d.ModelName, err)
			}
		}
		p.deployments[d.ID(i)] = price
	}
	return p, nil
}

func override(p *Price, over map[string]any) error {
	for name, field := range p.fields() {
		unit := "USD per token"
		if name == "max_output_tokens" {
			unit = "tokens"
		}
		v, ok := over[name]
		if !ok || v == nil {
			continue
		}
		var f float64
		switch n := v.(type) {
		case float64:
			f = n
		case int:
			f = float64(n)
		case int64:
			f = float64(n)
		case uint64:
			f = float64(n)
		default:
			return fmt.Errorf("%s must be a number of %s, not %v", name, unit, v)
		}
		if f < 0 || math.IsNaN(f) || math.IsInf(f, 0) {
			return fmt.Errorf("%s must be a non-negative number of %s, not %v", name, unit, v)
		}
		*field = &f
	}
	return nil
}

// Lookup is the price of a call to deployment (its id; "" for a
// passthrough call) of model (the provider's name).
func (p *Pricer) Lookup(deployment, model string) (Price, bool) {
	if price, ok := p.deployments[deployment]; ok && price.Known() {
		return price, true
	}
	return p.table.Lookup(model)
}

// Quote is what ev costs, and whether its model has a price.
func (p *Pricer) Quote(ev *logevent.Event) (float64, bool) {
	price, ok := p.Lookup(ev.ModelID, ev.Model)
	if !ok {
		return 0, false
	}
	return price.Cost(Usage{PromptTokens: ev.PromptTokens, CachedTokens: ev.CachedTokens,
		CompletionTokens: ev.CompletionTokens, Batch: ev.NativeBatch}), true
}

// Price sets ev's ResponseCost from its tokens: 0 with CostUnknown when its
// model has no price (logged once per model per process), CostEstimated
// when its tokens were estimated. The cost is settled against what the
// call reserved of its budgets (Budgets.Admit).
func (p *Pricer) Price(ctx context.Context, ev *logevent.Event) {
	ev.ResponseCost, ev.CostUnknown = 0, false
	cost, ok := p.Quote(ev)
	switch {
	case ok:
		ev.ResponseCost = cost
		ev.CostEstimated = ev.UsageEstimated
	case ev.TotalTokens == 0 && ev.PromptTokens == 0 && ev.CompletionTokens == 0:
		// Nothing used (a refused or failed call): it costs 0 whatever
		// the price.
	default:
		ev.CostUnknown = true
		model := ev.Model
		// Load first: LoadOrStore boxes its key, an allocation on every
		// call of an unpriced model.
		if _, warned := p.warned.Load(model); warned {
			break
		}
		if _, warned := p.warned.LoadOrStore(model, struct{}{}); !warned {
			slog.WarnContext(ctx, "spend: no price for this model; its calls are counted at 0 with cost_unknown (set input_cost_per_token and output_cost_per_token on its deployment)",
				"model", model, "deployment", ev.ModelID)
		}
	}
	if t := tabOf(ctx); t != nil {
		t.settleWith(ev.ResponseCost)
	}
	if ev.Metadata.BatchID != "" { // only a batch line looks for its tally
		if l := batchLineOf(ctx); l != nil {
			l.cost.Add(nanos(ev.ResponseCost))
		}
	}
}
