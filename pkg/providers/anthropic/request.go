package anthropic

import (
	"bytes"
	"encoding/json"
	"fmt"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"github.com/sluice-gateway/sluice/pkg/api"
	"github.com/sluice-gateway/sluice/pkg/oai"
	"github.com/sluice-gateway/sluice/pkg/providers"
)

// Versions of the Messages API sluice speaks: the anthropic-version header
// of Anthropic's API, and the anthropic_version body member of Claude on
// Vertex AI.
const (
	APIVersion    = "2023-06-01"
	VertexVersion = "vertex-2023-10-16"
)

// JSONToolName is the tool a response_format of json_schema or json_object
// becomes (LiteLLM's name): the model is made to call it, and its input is
// the answer's content.
const JSONToolName = "json_tool_call"

// Thinking budgets of reasoning_effort (LiteLLM's defaults); Anthropic's
// smallest budget is 1,024 tokens, which minimal and low get.
const (
	budgetLow    = 1024
	budgetMedium = 2048
	budgetHigh   = 4096
)

// thinkingBudget maps reasoning_effort to a thinking budget: 0 for none
// (and for no effort given).
func thinkingBudget(effort string) (int64, error) {
	switch effort {
	case "", "none":
		return 0, nil
	case "minimal", "low":
		return budgetLow, nil
	case "medium":
		return budgetMedium, nil
	case "high":
		return budgetHigh, nil
	}
	return 0, api.InvalidValue("reasoning_effort", "Invalid value for 'reasoning_effort': %q. Supported values are: 'none', 'minimal', 'low', 'medium' and 'high'.", clip(effort, 40))
}

// DefaultMaxTokens is the max_tokens sent for model when the client sets
// neither max_tokens nor max_completion_tokens (Anthropic requires one):
// the Claude 3 models' maximum, 4,096; 8,192 for every later model — the
// Claude 3.5 models' maximum, and a long answer for the others. Not their
// 32K–128K maximum: Anthropic counts max_tokens against the output-token
// rate limit when a request starts, so a default that large would spend a
// small account's whole minute on one call. Thinking adds its budget.
func DefaultMaxTokens(model string) int64 {
	m := strings.ToLower(model)
	if i := strings.LastIndexByte(m, '/'); i >= 0 {
		m = m[i+1:] // an inference profile or a publisher path
	}
	m = strings.TrimPrefix(m, "anthropic.")
	if strings.HasPrefix(m, "claude-3-") && !strings.HasPrefix(m, "claude-3-5") && !strings.HasPrefix(m, "claude-3-7") {
		return 4096
	}
	return 8192
}

// Options say how a chat request becomes a Messages API call.
type Options struct {
	// Provider names the provider in errors ("anthropic", "vertex_ai").
	Provider string
	// Model is the provider's model name: the body's model, what the
	// default max_tokens depends on, and the answers' model when the
	// provider's answer names none.
	Model string
	// Version, when set, is the body's anthropic_version, and the model is
	// left out of the body: Claude on Vertex AI, whose URL names it.
	Version string
	// Drop is the deployment's drop_params policy.
	Drop providers.DropParams
}

// Call is one chat request translated to the Messages API: the body to
// send, and what translating its answer back needs.
type Call struct {
	// Body is the Messages API request body.
	Body []byte

	provider string
	model    string
	// jsonMode: the response format became the forced JSONToolName tool,
	// whose input is the answer's content.
	jsonMode bool
}

// NewCall translates req. Every problem is a 400 naming the parameter: a
// parameter Anthropic cannot honour (unless drop_params drops it), a
// content part it cannot take, a tool call whose arguments are not a JSON
// object.
func NewCall(req *oai.ChatRequest, o Options) (*Call, error) {
	if o.Provider == "" {
		o.Provider = Name
	}
	if err := checkParams(req, o.Drop); err != nil {
		return nil, err
	}
	e := encoder{req: req}
	body, err := e.encode(o)
	if err != nil {
		return nil, err
	}
	return &Call{Body: body, provider: o.Provider, model: o.Model, jsonMode: e.jsonMode}, nil
}

// checkParams refuses the parameters Anthropic cannot honour, unless they
// are dropped (the encoder then leaves them out).
func checkParams(req *oai.ChatRequest, drop providers.DropParams) error {
	var bad []string
	if req.N > 1 {
		bad = append(bad, "n")
	}
	if req.Logprobs {
		bad = append(bad, "logprobs")
	}
	if req.TopLogprobs != nil {
		bad = append(bad, "top_logprobs")
	}
	if req.FrequencyPenalty != nil {
		bad = append(bad, "frequency_penalty")
	}
	if req.PresencePenalty != nil {
		bad = append(bad, "presence_penalty")
	}
	if req.Seed != nil {
		bad = append(bad, "seed")
	}
	for i := range req.Tools {
		if req.Tools[i].Type != "function" {
			bad = append(bad, "tools["+strconv.Itoa(i)+"]")
		}
	}
	if c := req.ToolChoice; c != nil {
		switch c.Mode {
		case oai.ToolChoiceNone, oai.ToolChoiceAuto, oai.ToolChoiceRequired, oai.ToolChoiceFunction:
		default:
			bad = append(bad, "tool_choice")
		}
	}
	for _, s := range req.Stop {
		if strings.TrimSpace(s) == "" { // Anthropic refuses white-space stop sequences
			bad = append(bad, "stop")
			break
		}
	}
	// metadata is LiteLLM's own (tags, trace ids), not the provider's.
	bad = append(bad, req.OthersExcept("top_k", "thinking", "metadata")...)
	return drop.Check(req, bad...)
}

// request is the Messages API request body.
type request struct {
	Model            string          `json:"model,omitempty"` // left out for Vertex (Options.Version)
	MaxTokens        int64           `json:"max_tokens"`
	System           []requestBlock  `json:"system,omitempty"`
	Messages         []turn          `json:"messages"`
	Stream           bool            `json:"stream,omitempty"`
	Temperature      *float64        `json:"temperature,omitempty"`
	TopP             *float64        `json:"top_p,omitempty"`
	TopK             *int64          `json:"top_k,omitempty"`
	StopSequences    []string        `json:"stop_sequences,omitempty"`
	Metadata         *metadata       `json:"metadata,omitempty"`
	Tools            []tool          `json:"tools,omitempty"`
	ToolChoice       *toolChoice     `json:"tool_choice,omitempty"`
	Thinking         json.RawMessage `json:"thinking,omitempty"`
	AnthropicVersion string          `json:"anthropic_version,omitempty"`
}

// turn is one turn of the conversation: a role's consecutive messages.
type turn struct {
	Role    string         `json:"role"`
	Content []requestBlock `json:"content"`
}

// requestBlock is a content block sent: text, image, document, tool_use,
// tool_result, thinking or redacted_thinking, each with its members.
// Thinking blocks are sent back as the client has them (raw literals).
type requestBlock struct {
	Type      string          `json:"type"`
	Text      *string         `json:"text,omitempty"`
	Source    *source         `json:"source,omitempty"`
	ToolUseID *string         `json:"tool_use_id,omitempty"`
	Content   any             `json:"content,omitempty"` // tool_result: a string or []requestBlock
	ID        *string         `json:"id,omitempty"`
	Name      *string         `json:"name,omitempty"`
	Input     json.RawMessage `json:"input,omitempty"`
	Thinking  json.RawMessage `json:"thinking,omitempty"`
	Signature json.RawMessage `json:"signature,omitempty"`
	Data      json.RawMessage `json:"data,omitempty"`
	// CacheControl is LiteLLM's prompt-caching extension, as the client
	// gave it.
	CacheControl json.RawMessage `json:"cache_control,omitempty"`
}

// source is an image's or a document's source: base64 data with its media
// type, or a URL.
type source struct {
	Type      string `json:"type"`
	MediaType string `json:"media_type,omitempty"`
	Data      string `json:"data,omitempty"`
	URL       string `json:"url,omitempty"`
}

type metadata struct {
	UserID string `json:"user_id"`
}

type tool struct {
	Name         string          `json:"name"`
	Description  string          `json:"description,omitempty"`
	InputSchema  json.RawMessage `json:"input_schema"`
	Strict       bool            `json:"strict,omitempty"`
	CacheControl json.RawMessage `json:"cache_control,omitempty"`
}

type toolChoice struct {
	Type                   string `json:"type"`
	Name                   string `json:"name,omitempty"`
	DisableParallelToolUse *bool  `json:"disable_parallel_tool_use,omitempty"`
}

// encode builds the Messages API body of e.req.
func (e *encoder) encode(o Options) ([]byte, error) {
	r, err := e.build(o)
	if err != nil {
		return nil, err
	}
	var buf bytes.Buffer
	buf.Grow(bodySize(e.req))
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false) // the texts as the client wrote them
	if err := enc.Encode(r); err != nil {
		return nil, fmt.Errorf("%s: encode the request: %w", o.Provider, err)
	}
	return bytes.TrimSuffix(buf.Bytes(), []byte{'\n'}), nil
}

// encoder translates a chat request into a Messages API request.
type encoder struct {
	req      *oai.ChatRequest
	jsonMode bool
}

func (e *encoder) build(o Options) (*request, error) {
	req := e.req
	var x oai.Extras // a walk of the whole body: only when there is something to find
	if slices.Contains(req.Others, "top_k") || slices.Contains(req.Others, "thinking") {
		x = req.Extras("top_k", "thinking")
	}
	budget, err := thinkingBudget(req.ReasoningEffort)
	if err != nil {
		return nil, err
	}
	thinkingOn := budget > 0
	thinking := x["thinking"] // the client's own thinking config wins
	if thinking != nil {
		if budget, thinkingOn, err = thinkingConfig(thinking); err != nil {
			return nil, err
		}
	}
	if !thinkingOn {
		budget = 0
	}
	r := &request{MaxTokens: req.MaxOutputTokens(), Stream: req.Stream, Temperature: req.Temperature, TopP: req.TopP, AnthropicVersion: o.Version}
	if r.MaxTokens == 0 {
		r.MaxTokens = DefaultMaxTokens(o.Model) + budget
	} else if budget >= r.MaxTokens {
		param := "max_tokens"
		if req.MaxCompletionTokens > 0 {
			param = "max_completion_tokens"
		}
		return nil, api.InvalidValue(param, "Invalid value for '%s': %d; with thinking on, Anthropic needs more than the thinking budget of %d tokens (it counts the thinking).", param, r.MaxTokens, budget)
	}
	if t := req.Temperature; t != nil && *t > 1 {
		return nil, api.InvalidValue("temperature", "Invalid value for 'temperature': %g; Anthropic's range is 0 to 1.", *t)
	}
	if o.Version == "" {
		r.Model = o.Model
	}
	if r.System, err = e.system(); err != nil {
		return nil, err
	}
	if r.Messages, err = e.messages(); err != nil {
		return nil, err
	}
	if k := x["top_k"]; k != nil {
		if json.Unmarshal(k, &r.TopK) != nil || r.TopK == nil || *r.TopK < 0 {
			return nil, api.InvalidValue("top_k", "Invalid type for 'top_k': expected a non-negative integer.")
		}
	}
	for _, s := range req.Stop {
		if strings.TrimSpace(s) != "" { // refused unless dropped (checkParams)
			r.StopSequences = append(r.StopSequences, s)
		}
	}
	if u := req.User; u != "" && !personal(u) {
		r.Metadata = &metadata{UserID: u}
	}
	r.Tools, r.ToolChoice = e.tools(thinkingOn)
	switch {
	case thinking != nil:
		r.Thinking = thinking
	case budget > 0:
		r.Thinking = json.RawMessage(`{"type":"enabled","budget_tokens":` + strconv.FormatInt(budget, 10) + `}`)
	}
	return r, nil
}

// bodySize guesses the body's size, to allocate it once: the messages as
// sent plus room for the rest.
func bodySize(req *oai.ChatRequest) int {
	n := len(req.RawMessages) + 256
	for i := range req.Tools {
		n += len(req.Tools[i].Raw)
	}
	return n
}

// thinkingConfig checks the client's own thinking parameter (Anthropic's
// shape, which LiteLLM passes on) and returns its budget, and whether it
// turns thinking on (any type but "disabled").
func thinkingConfig(v []byte) (budget int64, on bool, err error) {
	if v[0] != '{' {
		return 0, false, api.InvalidValue("thinking", "Invalid type for 'thinking': expected an object such as {\"type\": \"enabled\", \"budget_tokens\": 2048}.")
	}
	var cfg struct {
		Type         json.RawMessage `json:"type"`
		BudgetTokens *int64          `json:"budget_tokens"`
	}
	if err := json.Unmarshal(v, &cfg); err != nil || (cfg.BudgetTokens != nil && *cfg.BudgetTokens < 0) {
		return 0, false, api.InvalidValue("thinking.budget_tokens", "Invalid type for 'thinking.budget_tokens': expected a non-negative integer.")
	}
	if cfg.BudgetTokens != nil {
		budget = *cfg.BudgetTokens
	}
	return budget, string(cfg.Type) != `"disabled"`, nil
}

// personal matches a user that looks like an e-mail address or a phone
// number: Anthropic refuses those as metadata.user_id (an opaque id is
// wanted), so it is not sent (as in LiteLLM).
var personal = regexp.MustCompile(`^[a-zA-Z0-9._%+-]+@[a-zA-Z0-9.-]+\.[a-zA-Z]{2,}$|^\+?[\d\s()-]{7,}$`).MatchString

// system gathers the system and developer messages, wherever they are, into
// the system blocks.
func (e *encoder) system() ([]requestBlock, error) {
	var out []requestBlock
	for i := range e.req.Messages() {
		m := &e.req.Messages()[i]
		if m.Role != oai.RoleSystem && m.Role != oai.RoleDeveloper {
			continue
		}
		blocks, err := textBlocks(i, m, false)
		if blocks, err = messageCache(i, m, blocks, err); err != nil {
			return nil, err
		}
		out = append(out, blocks...)
	}
	return out, nil
}

// messages builds the conversation: user and tool messages become user
// turns (a tool message a tool_result block), assistant messages assistant
// turns; consecutive messages of one role are merged into one turn, as
// Anthropic wants turns to alternate. A message with nothing to send (an
// empty text) is left out.
func (e *encoder) messages() ([]turn, error) {
	turns := []turn{}
	for i := range e.req.Messages() {
		m := &e.req.Messages()[i]
		var (
			blocks []requestBlock
			err    error
		)
		role := oai.RoleUser
		switch m.Role {
		case oai.RoleSystem, oai.RoleDeveloper:
			continue
		case oai.RoleFunction:
			return nil, api.InvalidValue(path(i, "role"), "Invalid value for '%s': 'function' messages (deprecated by OpenAI) have no tool call id Anthropic could answer; send 'tool' messages.", path(i, "role"))
		case oai.RoleTool:
			blocks, err = toolResult(i, m)
		case oai.RoleAssistant:
			role = oai.RoleAssistant
			blocks, err = assistant(i, m)
		default:
			blocks, err = textBlocks(i, m, true)
		}
		if blocks, err = messageCache(i, m, blocks, err); err != nil {
			return nil, err
		}
		if len(blocks) == 0 {
			continue
		}
		if n := len(turns); n > 0 && turns[n-1].Role == role {
			turns[n-1].Content = append(turns[n-1].Content, blocks...)
		} else {
			turns = append(turns, turn{Role: role, Content: blocks})
		}
	}
	return turns, nil
}

// textBlocks is a message's content as blocks: text (empty texts left out:
// Anthropic refuses them), and, where media is allowed (user messages),
// images and PDF files.
func textBlocks(i int, m *oai.Message, media bool) ([]requestBlock, error) {
	if m.Parts == nil {
		if m.Content == "" {
			return nil, nil
		}
		return []requestBlock{textBlock(m.Content)}, nil
	}
	blocks := make([]requestBlock, 0, len(m.Parts))
	for j := range m.Parts {
		p := &m.Parts[j]
		at := path(i, "content["+strconv.Itoa(j)+"]")
		var (
			b   requestBlock
			err error
		)
		switch p.Type {
		case oai.PartText, oai.PartRefusal:
			if p.Text == "" {
				continue
			}
			b = textBlock(p.Text)
		case oai.PartImageURL:
			if !media {
				return nil, api.InvalidValue(at, "Anthropic takes images in user messages only.")
			}
			b, err = image(p.ImageURL, at+".image_url.url")
		case oai.PartFile:
			if !media {
				return nil, api.InvalidValue(at, "Anthropic takes files in user messages only.")
			}
			b, err = document(p.File, at+".file")
		default:
			return nil, api.InvalidValue(at+".type", "Anthropic cannot take a '%s' content part.", p.Type)
		}
		if err != nil {
			return nil, err
		}
		if b.CacheControl, err = cacheControl(p.Raw, at+".cache_control"); err != nil {
			return nil, err
		}
		blocks = append(blocks, b)
	}
	return blocks, nil
}

func textBlock(s string) requestBlock { return requestBlock{Type: "text", Text: &s} }

// Media types Anthropic takes images in.
var imageTypes = []string{"image/jpeg", "image/png", "image/gif", "image/webp"}

// image is an image block: a data: URI as base64 data with its media type,
// any other URL as a url source.
func image(u, at string) (requestBlock, error) {
	if !strings.HasPrefix(u, "data:") {
		return requestBlock{Type: "image", Source: &source{Type: "url", URL: u}}, nil
	}
	mediaType, data, ok := dataURI(u)
	if !ok {
		return requestBlock{}, api.InvalidValue(at, "Invalid '%s': a data: URI must be base64 (data:image/png;base64,…).", at)
	}
	if !slices.Contains(imageTypes, mediaType) {
		return requestBlock{}, api.InvalidValue(at, "Invalid '%s': Anthropic takes JPEG, PNG, GIF and WebP images, not %q.", at, clip(mediaType, 40))
	}
	return requestBlock{Type: "image", Source: &source{Type: "base64", MediaType: mediaType, Data: data}}, nil
}

// document is the document block of a file part: a PDF given as base64 (a
// data: URI, or bare base64 with a .pdf filename).
func document(f *oai.File, at string) (requestBlock, error) {
	if f.Data == "" {
		return requestBlock{}, api.InvalidValue(at+".file_id", "Anthropic cannot read uploaded files by id; send the file's bytes as file_data.")
	}
	mediaType, data := "", f.Data
	if strings.HasPrefix(f.Data, "data:") {
		var ok bool
		if mediaType, data, ok = dataURI(f.Data); !ok {
			return requestBlock{}, api.InvalidValue(at+".file_data", "Invalid '%s.file_data': a data: URI must be base64 (data:application/pdf;base64,…).", at)
		}
	} else if strings.HasSuffix(strings.ToLower(f.Name), ".pdf") {
		mediaType = "application/pdf"
	}
	if mediaType != "application/pdf" {
		return requestBlock{}, api.InvalidValue(at+".file_data", "Invalid '%s.file_data': Anthropic takes PDF files (application/pdf).", at)
	}
	return requestBlock{Type: "document", Source: &source{Type: "base64", MediaType: mediaType, Data: data}}, nil
}

// dataURI splits a base64 data: URI into its media type and data.
func dataURI(u string) (mediaType, data string, ok bool) {
	meta, data, ok := strings.Cut(strings.TrimPrefix(u, "data:"), ",")
	if !ok {
		return "", "", false
	}
	meta, ok = strings.CutSuffix(meta, ";base64")
	if !ok {
		return "", "", false
	}
	mediaType, _, _ = strings.Cut(meta, ";")
	return strings.ToLower(strings.TrimSpace(mediaType)), data, true
}

// toolResult is a tool message as a tool_result block: its content a
// string, or its parts as text blocks.
func toolResult(i int, m *oai.Message) ([]requestBlock, error) {
	b := requestBlock{Type: "tool_result", ToolUseID: &m.ToolCallID, Content: m.Content}
	if m.Parts != nil {
		parts, err := textBlocks(i, m, false)
		if err != nil {
			return nil, err
		}
		if parts == nil {
			parts = []requestBlock{}
		}
		b.Content = parts
	}
	return []requestBlock{b}, nil
}

// assistant is an assistant message's blocks: its thinking blocks (sent
// back, first, as Anthropic wants them), its text, and its tool calls as
// tool_use blocks.
func assistant(i int, m *oai.Message) ([]requestBlock, error) {
	blocks, err := thinkingBlocks(i, m)
	if err != nil {
		return nil, err
	}
	text, err := textBlocks(i, m, false)
	if err != nil {
		return nil, err
	}
	blocks = append(blocks, text...)
	if m.Parts == nil && m.Content == "" && m.Refusal != "" {
		blocks = append(blocks, textBlock(m.Refusal))
	}
	for j := range m.ToolCalls {
		c := &m.ToolCalls[j]
		args := strings.TrimSpace(c.Function.Arguments)
		if args == "" {
			args = "{}"
		}
		if args[0] != '{' || !json.Valid([]byte(args)) {
			at := path(i, "tool_calls["+strconv.Itoa(j)+"].function.arguments")
			return nil, api.InvalidValue(at, "Invalid '%s': Anthropic needs a tool call's arguments as a JSON object.", at)
		}
		blocks = append(blocks, requestBlock{Type: "tool_use", ID: &c.ID, Name: &c.Function.Name, Input: json.RawMessage(args)})
	}
	return blocks, nil
}

// thinkingBlocks are the thinking_blocks of an assistant message (an
// earlier answer's, as sluice returned them): thinking blocks with their
// signatures, and redacted ones. A reasoning_content alone cannot be sent
// back (Anthropic checks the signature) and is left out.
func thinkingBlocks(i int, m *oai.Message) ([]requestBlock, error) {
	if !bytes.Contains(m.Raw, []byte(`"thinking_blocks"`)) {
		return nil, nil
	}
	var members struct {
		ThinkingBlocks json.RawMessage `json:"thinking_blocks"`
	}
	json.Unmarshal(m.Raw, &members) // a message the parser took: a JSON object
	raw := members.ThinkingBlocks
	if len(raw) == 0 || string(raw) == "null" {
		return nil, nil
	}
	at := path(i, "thinking_blocks")
	var els []json.RawMessage
	if json.Unmarshal(raw, &els) != nil {
		return nil, api.InvalidValue(at, "Invalid type for '%s': expected an array of thinking blocks.", at)
	}
	blocks := make([]requestBlock, 0, len(els))
	for j, el := range els {
		bat := at + "[" + strconv.Itoa(j) + "]"
		if el[0] != '{' {
			return nil, api.InvalidValue(bat, "Invalid type for '%s': expected a thinking requestBlock object.", bat)
		}
		var t struct {
			Type                      json.RawMessage
			Thinking, Signature, Data json.RawMessage
		}
		if json.Unmarshal(el, &t) != nil {
			return nil, api.InvalidValue(bat, "'%s' is not a valid JSON object.", bat)
		}
		str := func(v json.RawMessage) bool { return len(v) > 0 && v[0] == '"' }
		var b requestBlock
		switch string(t.Type) {
		case `"thinking"`:
			if !str(t.Thinking) || !str(t.Signature) {
				return nil, api.InvalidValue(bat, "Invalid '%s': a thinking block needs its 'thinking' and 'signature' strings.", bat)
			}
			b = requestBlock{Type: "thinking", Thinking: t.Thinking, Signature: t.Signature}
		case `"redacted_thinking"`:
			if !str(t.Data) {
				return nil, api.InvalidValue(bat, "Invalid '%s': a redacted_thinking block needs its 'data' string.", bat)
			}
			b = requestBlock{Type: "redacted_thinking", Data: t.Data}
		default:
			return nil, api.InvalidValue(bat+".type", "Invalid value for '%s.type': expected 'thinking' or 'redacted_thinking'.", bat)
		}
		blocks = append(blocks, b)
	}
	return blocks, nil
}

// messageCache puts a message's cache_control (LiteLLM's prompt-caching
// extension) on the last of its blocks, the blocks' builder's answer.
func messageCache(i int, m *oai.Message, blocks []requestBlock, err error) ([]requestBlock, error) {
	if err != nil || len(blocks) == 0 {
		return nil, err
	}
	cc, err := cacheControl(m.Raw, path(i, "cache_control"))
	if err != nil {
		return nil, err
	}
	if cc != nil {
		blocks[len(blocks)-1].CacheControl = cc
	}
	return blocks, nil
}

// cacheControl is the cache_control member of raw (a message, a part),
// which must be an object or null; nil when absent or null.
func cacheControl(raw json.RawMessage, at string) (json.RawMessage, error) {
	if !bytes.Contains(raw, []byte(`"cache_control"`)) {
		return nil, nil
	}
	var members struct {
		CacheControl json.RawMessage `json:"cache_control"`
	}
	json.Unmarshal(raw, &members) // raw is a slice of the parsed body: a JSON object
	cc := members.CacheControl
	if len(cc) == 0 || string(cc) == "null" {
		return nil, nil
	}
	if cc[0] != '{' {
		return nil, api.InvalidValue(at, "Invalid type for '%s': expected an object such as {\"type\": \"ephemeral\"}.", at)
	}
	return cc, nil
}

// tools are the function tools and the response format's tool, and the
// tool choice. Without tools no tool_choice is sent (Anthropic refuses
// one).
func (e *encoder) tools(thinkingOn bool) ([]tool, *toolChoice) {
	req := e.req
	var tools []tool
	for i := range req.Tools {
		if t := &req.Tools[i]; t.Type == "function" { // others are refused unless dropped (checkParams)
			tools = append(tools, functionTool(t))
		}
	}
	rf := req.ResponseFormat
	e.jsonMode = rf != nil && (rf.Type == oai.FormatJSONSchema || rf.Type == oai.FormatJSONObject)
	if e.jsonMode {
		t := tool{Name: JSONToolName, InputSchema: json.RawMessage(`{"type":"object","additionalProperties":true,"properties":{}}`)}
		if s := rf.JSONSchema; s != nil {
			t.Description = s.Description
			if s.Schema != nil {
				t.InputSchema = s.Schema
			}
		}
		tools = append(tools, t)
	}
	if len(tools) == 0 {
		return nil, nil
	}
	// A forced tool cannot be combined with thinking: the model then
	// chooses to call the format's tool (it is told to in its schema's
	// name), as in LiteLLM.
	if e.jsonMode && !thinkingOn {
		return tools, &toolChoice{Type: "tool", Name: JSONToolName}
	}
	return tools, choice(req.ToolChoice, req.ParallelToolCalls)
}

// functionTool is a function tool, with the cache_control LiteLLM allows
// on it or on its function.
func functionTool(t *oai.Tool) tool {
	out := tool{Name: t.Function.Name, Description: t.Function.Description, InputSchema: t.Function.Parameters}
	if out.InputSchema == nil {
		out.InputSchema = json.RawMessage(`{"type":"object","properties":{}}`)
	}
	out.Strict = t.Function.Strict != nil && *t.Function.Strict
	if bytes.Contains(t.Raw, []byte(`"cache_control"`)) {
		var members struct {
			CacheControl json.RawMessage `json:"cache_control"`
			Function     struct {
				CacheControl json.RawMessage `json:"cache_control"`
			} `json:"function"`
		}
		json.Unmarshal(t.Raw, &members) // a tool the parser took: a JSON object
		cc := members.CacheControl
		if cc == nil {
			cc = members.Function.CacheControl
		}
		if len(cc) > 0 && cc[0] == '{' {
			out.CacheControl = cc
		}
	}
	return out
}

// choice is the tool_choice of the client's tool choice and
// parallel_tool_calls: nil when neither is given.
func choice(c *oai.ToolChoice, parallel *bool) *toolChoice {
	mode := oai.ToolChoiceAuto
	if c != nil {
		mode = c.Mode
	} else if parallel == nil {
		return nil
	}
	var tc toolChoice
	switch mode {
	case oai.ToolChoiceNone:
		return &toolChoice{Type: "none"}
	case oai.ToolChoiceAuto:
		tc.Type = "auto"
	case oai.ToolChoiceRequired:
		tc.Type = "any"
	case oai.ToolChoiceFunction:
		tc.Type, tc.Name = "tool", c.Function
	default:
		return nil // refused unless dropped (checkParams)
	}
	if parallel != nil {
		tc.DisableParallelToolUse = new(!*parallel)
	}
	return &tc
}

func path(i int, rest string) string { return "messages[" + strconv.Itoa(i) + "]." + rest }

func clip(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "…"
}
