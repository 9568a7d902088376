package batches

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"sort"

	"github.com/sluice-gateway/sluice/pkg/api"
	"github.com/sluice-gateway/sluice/pkg/auth"
	"github.com/sluice-gateway/sluice/pkg/batchinput"
	"github.com/sluice-gateway/sluice/pkg/files"
	"github.com/sluice-gateway/sluice/pkg/oai"
	"github.com/sluice-gateway/sluice/pkg/spend"
)

// ObjectEstimate is a dry run's object.
const ObjectEstimate = "batch.estimate"

// Prices prices a deployment's tokens (spend.Pricer).
type Prices interface {
	Lookup(deployment, model string) (spend.Price, bool)
}

// Estimate is what a batch would cost, before it runs (POST /v1/batches
// with "dry_run": true): its input tokens and its output's worst case,
// priced at the normal prices (run by sluice) and the batch prices (run by
// the provider's batch API, when every model of the file can).
type Estimate struct {
	Object string `json:"object"`
	Lines  int    `json:"lines"`
	// InputTokens are counted as the mock and the meters count text without
	// a provider's usage (UTF-8 bytes / 4): no tokenizer ships offline with
	// sluice, so InputTokensEstimated is always true.
	InputTokens          int64 `json:"input_tokens"`
	InputTokensEstimated bool  `json:"input_tokens_estimated"`
	// MaxOutputTokens is the output's worst case: each line's
	// max_completion_tokens, max_tokens or max_output_tokens (× n), else
	// its model's maximum.
	MaxOutputTokens int64           `json:"max_output_tokens"`
	EstimatedCost   EstimatedCost   `json:"estimated_cost"`
	PerModel        []ModelEstimate `json:"per_model"`
}

// EstimatedCost is a worst-case cost in USD: Engine at the normal prices,
// Native at the batch prices (nil when a model cannot run natively).
type EstimatedCost struct {
	Engine float64  `json:"engine"`
	Native *float64 `json:"native"`
}

// ModelEstimate is one model's share of an Estimate.
type ModelEstimate struct {
	Model           string        `json:"model"`
	Lines           int           `json:"lines"`
	InputTokens     int64         `json:"input_tokens"`
	MaxOutputTokens int64         `json:"max_output_tokens"`
	EstimatedCost   EstimatedCost `json:"estimated_cost"`
	// CostUnknown: the model has no price; its lines are counted at 0.
	CostUnknown bool `json:"cost_unknown,omitempty"`
	// OutputUncapped: some lines set no output cap and the model's maximum
	// is not known; their output is counted at 0.
	OutputUncapped bool `json:"output_uncapped,omitempty"`
}

// modelTally is what the dry run keeps per model while the file streams.
type modelTally struct {
	ModelEstimate
	price  spend.Price
	native bool
}

// Estimate is nb's dry run: it checks nb as Create does, streams the input
// file once (memory bounded by a line and the models served, not the file)
// and creates nothing.
func (s *Service) Estimate(ctx context.Context, p auth.Principal, nb NewBatch) (Estimate, error) {
	if _, err := s.check(nb); err != nil {
		return Estimate{}, err
	}
	f, err := s.deps.Files.Get(ctx, p, nb.InputFileID)
	if err != nil {
		var ae *api.Error
		if errors.As(err, &ae) && ae.Status == 404 {
			return Estimate{}, api.NotFound("No such File object: %s (input_file_id).", nb.InputFileID)
		}
		return Estimate{}, err
	}
	if f.Purpose != files.PurposeBatch {
		return Estimate{}, api.InvalidValue("input_file_id", "File %s has purpose '%s'; a batch's input file must have purpose 'batch'.", f.ID, f.Purpose)
	}
	tallies := map[string]*modelTally{}
	est := Estimate{Object: ObjectEstimate, InputTokensEstimated: true, PerModel: []ModelEstimate{}}
	var lineErr error
	v := batchinput.NewValidator(batchinput.Options{MaxLineBytes: s.opts.MaxLineBytes, OnLine: func(l batchinput.Line) error {
		if lineErr = s.estimateLine(p, nb, l, tallies); lineErr != nil {
			return lineErr
		}
		est.Lines++
		return nil
	}})
	rc, err := s.deps.Files.Open(ctx, f, 0, -1)
	if err != nil {
		return Estimate{}, err
	}
	defer rc.Close()
	_, err = io.Copy(v, rc)
	if err == nil {
		err = v.Close()
	}
	switch {
	case lineErr != nil:
		return Estimate{}, lineErr
	case err != nil:
		return Estimate{}, api.InvalidValue("input_file_id", "The input file cannot be read: %v", err)
	case est.Lines == 0:
		return Estimate{}, api.InvalidValue("input_file_id", "The input file has no request line.")
	}
	native := 0.0
	allNative := true
	for _, t := range tallies {
		est.InputTokens += t.InputTokens
		est.MaxOutputTokens += t.MaxOutputTokens
		est.EstimatedCost.Engine += t.EstimatedCost.Engine
		if t.EstimatedCost.Native != nil {
			native += *t.EstimatedCost.Native
		} else {
			allNative = false
		}
		est.PerModel = append(est.PerModel, t.ModelEstimate)
	}
	if allNative {
		est.EstimatedCost.Native = &native
	}
	sort.Slice(est.PerModel, func(i, j int) bool { return est.PerModel[i].Model < est.PerModel[j].Model })
	return est, nil
}

// estimateLine adds line l to its model's tally.
func (s *Service) estimateLine(p auth.Principal, nb NewBatch, l batchinput.Line, tallies map[string]*modelTally) error {
	if l.URL != nb.Endpoint {
		return lineError(l.Number, "invalid_value", "Line %d's url '%s' is not the batch's endpoint '%s'.", l.Number, l.URL, nb.Endpoint)
	}
	var body lineBody
	if err := json.Unmarshal(l.Body, &body); err != nil || body.Model == "" {
		return lineError(l.Number, "missing_required_parameter", "Line %d has no body.model.", l.Number)
	}
	t := tallies[body.Model]
	if t == nil {
		if !s.deps.Models.Has(body.Model) {
			return lineError(l.Number, "model_not_found", "Line %d: model '%s' is not served by this gateway.", l.Number, body.Model)
		}
		if !p.AllowsModel(body.Model) {
			return api.Forbidden("This key may not use model '%s' (line %d).", body.Model, l.Number)
		}
		t = s.tally(body.Model)
		tallies[body.Model] = t
	}
	in := body.inputTokens()
	out := int64(0)
	if generates(nb.Endpoint) {
		switch {
		case body.outputCap() > 0:
			out = body.outputCap() * max(body.N, 1)
		case t.price.MaxOutput != nil:
			out = int64(*t.price.MaxOutput) * max(body.N, 1)
		default:
			t.OutputUncapped = true
		}
	}
	t.Lines++
	t.InputTokens += in
	t.MaxOutputTokens += out
	u := spend.Usage{PromptTokens: in, CompletionTokens: out}
	t.EstimatedCost.Engine += t.price.Cost(u)
	if t.native {
		u.Batch = true
		*t.EstimatedCost.Native += t.price.Cost(u)
	}
	return nil
}

// tally starts model's tally: the price of its first deployment, and
// whether a deployment of it runs native batches.
func (s *Service) tally(model string) *modelTally {
	t := &modelTally{ModelEstimate: ModelEstimate{Model: model}}
	if s.native == nil || s.deps.Prices == nil {
		t.CostUnknown = true
		return t
	}
	priced := false
	for i, d := range s.native.Deployments.Deployments() {
		if d.ModelName != model {
			continue
		}
		if !priced {
			t.price, priced = s.deps.Prices.Lookup(d.ID(i), d.Params.ProviderModel())
		}
		if d.Params.MockResponse == nil && contains(nativeProviders, d.Params.Provider()) &&
			(d.Params.Provider() != NativeAzure || d.ModelInfo.Mode == "batch") {
			t.native = true
		}
	}
	t.CostUnknown = !priced
	if t.native {
		t.EstimatedCost.Native = new(float64)
	}
	return t
}

// generates reports whether endpoint's answers have output tokens.
func generates(endpoint string) bool {
	return endpoint != "/v1/embeddings" && endpoint != "/v1/moderations"
}

// lineBody is what the dry run reads of a line's body.
type lineBody struct {
	Model               string `json:"model"`
	MaxTokens           int64  `json:"max_tokens"`
	MaxCompletionTokens int64  `json:"max_completion_tokens"`
	MaxOutputTokens     int64  `json:"max_output_tokens"` // responses
	N                   int64  `json:"n"`
	Messages            []struct {
		Content json.RawMessage `json:"content"`
	} `json:"messages"`
	Prompt       json.RawMessage `json:"prompt"`
	Input        json.RawMessage `json:"input"`
	Instructions string          `json:"instructions"`
}

func (b *lineBody) outputCap() int64 {
	switch {
	case b.MaxCompletionTokens > 0:
		return b.MaxCompletionTokens
	case b.MaxTokens > 0:
		return b.MaxTokens
	}
	return b.MaxOutputTokens
}

// inputTokens estimates the body's input as the mock and the meters do: a
// message's (or input's) text, UTF-8 bytes / 4 rounded up; a token array
// counts its tokens.
func (b *lineBody) inputTokens() int64 {
	var n int64
	for _, m := range b.Messages {
		n += oai.EstimateTokens(textOf(m.Content))
	}
	n += rawTokens(b.Prompt) + rawTokens(b.Input)
	if b.Instructions != "" {
		n += oai.EstimateTokens(b.Instructions)
	}
	return n
}

// rawTokens estimates a prompt or input: a text, a list of texts or
// items, or a (list of) token array(s).
func rawTokens(raw json.RawMessage) int64 {
	if len(raw) == 0 {
		return 0
	}
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return oai.EstimateTokens(s)
	}
	var list []json.RawMessage
	if json.Unmarshal(raw, &list) != nil {
		return oai.EstimateTokens(textOf(raw))
	}
	var n int64
	for _, item := range list {
		var f float64
		if json.Unmarshal(item, &f) == nil {
			n++ // a token id
			continue
		}
		n += rawTokens(item)
	}
	return n
}

// textOf is the text a content value carries: a string, or the text
// fields of its parts (images and files are not counted).
func textOf(raw json.RawMessage) string {
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return s
	}
	var parts []struct {
		Text    string          `json:"text"`
		Content json.RawMessage `json:"content"`
	}
	if json.Unmarshal(raw, &parts) != nil {
		var one struct {
			Text    string          `json:"text"`
			Content json.RawMessage `json:"content"`
		}
		if json.Unmarshal(raw, &one) != nil {
			return ""
		}
		parts = append(parts, one)
	}
	var out string
	for _, p := range parts {
		out += p.Text
		if len(p.Content) > 0 {
			out += textOf(p.Content)
		}
	}
	return out
}
