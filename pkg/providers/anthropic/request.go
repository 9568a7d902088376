package anthropic

import (
	"bytes"
	"encoding/json"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"github.com/sluice-gateway/sluice/pkg/api"
	"github.com/sluice-gateway/sluice/pkg/jsonscan"
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
	if err := e.encode(o); err != nil {
		return nil, err
	}
	return &Call{Body: e.b, provider: o.Provider, model: o.Model, jsonMode: e.jsonMode}, nil
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

// encoder appends the Messages API body.
type encoder struct {
	req *oai.ChatRequest
	b   []byte

	jsonMode bool
	// The open turn of messages: its role ("" before the first) and how
	// many content blocks it has.
	turn   string
	blocks int
}

func (e *encoder) encode(o Options) error {
	req := e.req
	var x oai.Extras // a walk of the whole body: only when there is something to find
	if slices.Contains(req.Others, "top_k") || slices.Contains(req.Others, "thinking") {
		x = req.Extras("top_k", "thinking")
	}
	budget, err := thinkingBudget(req.ReasoningEffort)
	if err != nil {
		return err
	}
	thinkingOn := budget > 0
	thinking := x["thinking"] // the client's own thinking config wins
	if thinking != nil {
		if budget, thinkingOn, err = thinkingConfig(thinking); err != nil {
			return err
		}
	}
	if !thinkingOn {
		budget = 0
	}
	maxTokens := req.MaxOutputTokens()
	if maxTokens == 0 {
		maxTokens = DefaultMaxTokens(o.Model) + budget
	} else if budget >= maxTokens {
		param := "max_tokens"
		if req.MaxCompletionTokens > 0 {
			param = "max_completion_tokens"
		}
		return api.InvalidValue(param, "Invalid value for '%s': %d; with thinking on, Anthropic needs more than the thinking budget of %d tokens (it counts the thinking).", param, maxTokens, budget)
	}
	if t := req.Temperature; t != nil && *t > 1 {
		return api.InvalidValue("temperature", "Invalid value for 'temperature': %g; Anthropic's range is 0 to 1.", *t)
	}

	e.b = make([]byte, 0, bodySize(req))
	e.b = append(e.b, '{')
	if o.Version == "" {
		e.b = append(e.b, `"model":`...)
		e.b = jsonscan.AppendString(e.b, o.Model)
		e.b = append(e.b, ',')
	}
	e.b = append(e.b, `"max_tokens":`...)
	e.b = strconv.AppendInt(e.b, maxTokens, 10)
	if err := e.system(); err != nil {
		return err
	}
	if err := e.messages(); err != nil {
		return err
	}
	if req.Stream {
		e.b = append(e.b, `,"stream":true`...)
	}
	if t := req.Temperature; t != nil {
		e.b = append(e.b, `,"temperature":`...)
		e.b = strconv.AppendFloat(e.b, *t, 'g', -1, 64)
	}
	if p := req.TopP; p != nil {
		e.b = append(e.b, `,"top_p":`...)
		e.b = strconv.AppendFloat(e.b, *p, 'g', -1, 64)
	}
	if k := x["top_k"]; k != nil {
		if _, ok := jsonscan.Count(k); !ok {
			return api.InvalidValue("top_k", "Invalid type for 'top_k': expected a non-negative integer.")
		}
		e.b = append(e.b, `,"top_k":`...)
		e.b = append(e.b, k...)
	}
	e.stop()
	if u := req.User; u != "" && !personal(u) {
		e.b = append(e.b, `,"metadata":{"user_id":`...)
		e.b = jsonscan.AppendString(e.b, u)
		e.b = append(e.b, '}')
	}
	e.tools(thinkingOn)
	switch {
	case thinking != nil:
		e.b = append(e.b, `,"thinking":`...)
		e.b = append(e.b, thinking...)
	case budget > 0:
		e.b = append(e.b, `,"thinking":{"type":"enabled","budget_tokens":`...)
		e.b = strconv.AppendInt(e.b, budget, 10)
		e.b = append(e.b, '}')
	}
	if o.Version != "" {
		e.b = append(e.b, `,"anthropic_version":`...)
		e.b = jsonscan.AppendString(e.b, o.Version)
	}
	e.b = append(e.b, '}')
	return nil
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
	on = true
	err = jsonscan.Members(v, func(name, v []byte) error {
		switch string(name) {
		case "type":
			on = string(v) != `"disabled"`
		case "budget_tokens":
			if jsonscan.Null(v) {
				return nil
			}
			n, ok := jsonscan.Count(v)
			if !ok {
				return api.InvalidValue("thinking.budget_tokens", "Invalid type for 'thinking.budget_tokens': expected a non-negative integer.")
			}
			budget = n
		}
		return nil
	})
	return budget, on, err
}

// personal matches a user that looks like an e-mail address or a phone
// number: Anthropic refuses those as metadata.user_id (an opaque id is
// wanted), so it is not sent (as in LiteLLM).
var personal = regexp.MustCompile(`^[a-zA-Z0-9._%+-]+@[a-zA-Z0-9.-]+\.[a-zA-Z]{2,}$|^\+?[\d\s()-]{7,}$`).MatchString

func (e *encoder) stop() {
	first := true
	for _, s := range e.req.Stop {
		if strings.TrimSpace(s) == "" {
			continue // refused unless dropped (checkParams)
		}
		if first {
			e.b = append(e.b, `,"stop_sequences":[`...)
			first = false
		} else {
			e.b = append(e.b, ',')
		}
		e.b = jsonscan.AppendString(e.b, s)
	}
	if !first {
		e.b = append(e.b, ']')
	}
}

// system gathers the system and developer messages, wherever they are, into
// the system blocks.
func (e *encoder) system() error {
	mark := len(e.b)
	e.b = append(e.b, `,"system":[`...)
	e.blocks = 0
	for i := range e.req.Messages {
		m := &e.req.Messages[i]
		if m.Role != oai.RoleSystem && m.Role != oai.RoleDeveloper {
			continue
		}
		n, err := e.textBlocks(i, m, false)
		if err != nil {
			return err
		}
		if n == 0 {
			continue
		}
		if err := e.messageCache(i, m); err != nil {
			return err
		}
	}
	if e.blocks == 0 {
		e.b = e.b[:mark]
	} else {
		e.b = append(e.b, ']')
	}
	e.blocks = 0
	return nil
}

// messages appends the conversation: user and tool messages become user
// turns (a tool message a tool_result block), assistant messages assistant
// turns; consecutive messages of one role are merged into one turn, as
// Anthropic wants turns to alternate. A message with nothing to send (an
// empty text) is left out.
func (e *encoder) messages() error {
	e.b = append(e.b, `,"messages":[`...)
	for i := range e.req.Messages {
		m := &e.req.Messages[i]
		role := oai.RoleUser
		switch m.Role {
		case oai.RoleSystem, oai.RoleDeveloper:
			continue
		case oai.RoleAssistant:
			role = oai.RoleAssistant
		case oai.RoleFunction:
			return api.InvalidValue(path(i, "role"), "Invalid value for '%s': 'function' messages (deprecated by OpenAI) have no tool call id Anthropic could answer; send 'tool' messages.", path(i, "role"))
		}
		mark, turn, blocks := len(e.b), e.turn, e.blocks
		if role != e.turn {
			if e.turn != "" {
				e.b = append(e.b, "]},"...)
			}
			e.b = append(e.b, `{"role":"`...)
			e.b = append(e.b, role...)
			e.b = append(e.b, `","content":[`...)
			e.turn, e.blocks = role, 0
		}
		var (
			n   int
			err error
		)
		switch m.Role {
		case oai.RoleTool:
			n, err = e.toolResult(i, m)
		case oai.RoleAssistant:
			n, err = e.assistant(i, m)
		default:
			n, err = e.textBlocks(i, m, true)
		}
		if err != nil {
			return err
		}
		if n == 0 {
			e.b, e.turn, e.blocks = e.b[:mark], turn, blocks
			continue
		}
		if err := e.messageCache(i, m); err != nil {
			return err
		}
	}
	if e.turn != "" {
		e.b = append(e.b, "]}"...)
	}
	e.b = append(e.b, ']')
	return nil
}

// block starts a content block of the open turn.
func (e *encoder) block() {
	if e.blocks > 0 {
		e.b = append(e.b, ',')
	}
	e.blocks++
}

// textBlocks appends a message's content as blocks: text (empty texts left
// out: Anthropic refuses them), and, where media is allowed (user
// messages), images and PDF files. It returns how many it appended.
func (e *encoder) textBlocks(i int, m *oai.Message, media bool) (int, error) {
	if m.Parts == nil {
		if m.Content == "" {
			return 0, nil
		}
		e.block()
		e.text(m.Content)
		e.b = append(e.b, '}')
		return 1, nil
	}
	n := 0
	for j := range m.Parts {
		p := &m.Parts[j]
		at := path(i, "content["+strconv.Itoa(j)+"]")
		switch p.Type {
		case oai.PartText, oai.PartRefusal:
			if p.Text == "" {
				continue
			}
			e.block()
			e.text(p.Text)
		case oai.PartImageURL:
			if !media {
				return 0, api.InvalidValue(at, "Anthropic takes images in user messages only.")
			}
			e.block()
			if err := e.image(p.ImageURL, at+".image_url.url"); err != nil {
				return 0, err
			}
		case oai.PartFile:
			if !media {
				return 0, api.InvalidValue(at, "Anthropic takes files in user messages only.")
			}
			e.block()
			if err := e.document(p.File, at+".file"); err != nil {
				return 0, err
			}
		default:
			return 0, api.InvalidValue(at+".type", "Anthropic cannot take a '%s' content part.", p.Type)
		}
		if err := e.partCache(p, at); err != nil {
			return 0, err
		}
		e.b = append(e.b, '}')
		n++
	}
	return n, nil
}

// text appends an open text block (the caller closes it).
func (e *encoder) text(s string) {
	e.b = append(e.b, `{"type":"text","text":`...)
	e.b = jsonscan.AppendString(e.b, s)
}

// Media types Anthropic takes images in.
var imageTypes = []string{"image/jpeg", "image/png", "image/gif", "image/webp"}

// image appends an open image block: a data: URI as base64 data with its
// media type, any other URL as a url source.
func (e *encoder) image(u, at string) error {
	if !strings.HasPrefix(u, "data:") {
		e.b = append(e.b, `{"type":"image","source":{"type":"url","url":`...)
		e.b = jsonscan.AppendString(e.b, u)
		e.b = append(e.b, '}')
		return nil
	}
	mediaType, data, ok := dataURI(u)
	if !ok {
		return api.InvalidValue(at, "Invalid '%s': a data: URI must be base64 (data:image/png;base64,…).", at)
	}
	found := false
	for _, t := range imageTypes {
		found = found || t == mediaType
	}
	if !found {
		return api.InvalidValue(at, "Invalid '%s': Anthropic takes JPEG, PNG, GIF and WebP images, not %q.", at, clip(mediaType, 40))
	}
	e.b = append(e.b, `{"type":"image","source":{"type":"base64","media_type":`...)
	e.b = jsonscan.AppendString(e.b, mediaType)
	e.b = append(e.b, `,"data":`...)
	e.b = jsonscan.AppendString(e.b, data)
	e.b = append(e.b, '}')
	return nil
}

// document appends an open document block for a file part: a PDF given as
// base64 (a data: URI, or bare base64 with a .pdf filename).
func (e *encoder) document(f *oai.File, at string) error {
	if f.Data == "" {
		return api.InvalidValue(at+".file_id", "Anthropic cannot read uploaded files by id; send the file's bytes as file_data.")
	}
	mediaType, data := "", f.Data
	if strings.HasPrefix(f.Data, "data:") {
		var ok bool
		if mediaType, data, ok = dataURI(f.Data); !ok {
			return api.InvalidValue(at+".file_data", "Invalid '%s.file_data': a data: URI must be base64 (data:application/pdf;base64,…).", at)
		}
	} else if strings.HasSuffix(strings.ToLower(f.Name), ".pdf") {
		mediaType = "application/pdf"
	}
	if mediaType != "application/pdf" {
		return api.InvalidValue(at+".file_data", "Invalid '%s.file_data': Anthropic takes PDF files (application/pdf).", at)
	}
	e.b = append(e.b, `{"type":"document","source":{"type":"base64","media_type":"application/pdf","data":`...)
	e.b = jsonscan.AppendString(e.b, data)
	e.b = append(e.b, '}')
	return nil
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

// toolResult appends a tool message as a tool_result block.
func (e *encoder) toolResult(i int, m *oai.Message) (int, error) {
	e.block()
	e.b = append(e.b, `{"type":"tool_result","tool_use_id":`...)
	e.b = jsonscan.AppendString(e.b, m.ToolCallID)
	e.b = append(e.b, `,"content":`...)
	if m.Parts == nil {
		e.b = jsonscan.AppendString(e.b, m.Content)
		e.b = append(e.b, '}')
		return 1, nil
	}
	e.b = append(e.b, '[')
	turnBlocks := e.blocks
	e.blocks = 0
	if _, err := e.textBlocks(i, m, false); err != nil {
		return 0, err
	}
	e.blocks = turnBlocks
	e.b = append(e.b, "]}"...)
	return 1, nil
}

// assistant appends an assistant message: its thinking blocks (sent back,
// first, as Anthropic wants them), its text, and its tool calls as
// tool_use blocks.
func (e *encoder) assistant(i int, m *oai.Message) (int, error) {
	n, err := e.thinkingBlocks(i, m)
	if err != nil {
		return 0, err
	}
	t, err := e.textBlocks(i, m, false)
	if err != nil {
		return 0, err
	}
	n += t
	if m.Parts == nil && m.Content == "" && m.Refusal != "" {
		e.block()
		e.text(m.Refusal)
		e.b = append(e.b, '}')
		n++
	}
	for j := range m.ToolCalls {
		c := &m.ToolCalls[j]
		args := strings.TrimSpace(c.Function.Arguments)
		if args == "" {
			args = "{}"
		}
		if args[0] != '{' || !json.Valid([]byte(args)) {
			at := path(i, "tool_calls["+strconv.Itoa(j)+"].function.arguments")
			return 0, api.InvalidValue(at, "Invalid '%s': Anthropic needs a tool call's arguments as a JSON object.", at)
		}
		e.block()
		e.b = append(e.b, `{"type":"tool_use","id":`...)
		e.b = jsonscan.AppendString(e.b, c.ID)
		e.b = append(e.b, `,"name":`...)
		e.b = jsonscan.AppendString(e.b, c.Function.Name)
		e.b = append(e.b, `,"input":`...)
		e.b = append(e.b, args...)
		e.b = append(e.b, '}')
		n++
	}
	return n, nil
}

// thinkingBlocks appends the thinking_blocks of an assistant message (an
// earlier answer's, as sluice returned them): thinking blocks with their
// signatures, and redacted ones. A reasoning_content alone cannot be sent
// back (Anthropic checks the signature) and is left out.
func (e *encoder) thinkingBlocks(i int, m *oai.Message) (int, error) {
	if !bytes.Contains(m.Raw, []byte(`"thinking_blocks"`)) {
		return 0, nil
	}
	blocks := member(m.Raw, "thinking_blocks")
	if jsonscan.Null(blocks) {
		return 0, nil
	}
	at := path(i, "thinking_blocks")
	if blocks[0] != '[' {
		return 0, api.InvalidValue(at, "Invalid type for '%s': expected an array of thinking blocks.", at)
	}
	n := 0
	err := jsonscan.Elements(blocks, func(el []byte) error {
		bat := at + "[" + strconv.Itoa(n) + "]"
		var typ, thinking, signature, data []byte
		if len(el) == 0 || el[0] != '{' {
			return api.InvalidValue(bat, "Invalid type for '%s': expected a thinking block object.", bat)
		}
		if err := jsonscan.Members(el, func(name, v []byte) error {
			switch string(name) {
			case "type":
				typ = v
			case "thinking":
				thinking = v
			case "signature":
				signature = v
			case "data":
				data = v
			}
			return nil
		}); err != nil {
			return api.InvalidValue(bat, "'%s' is not a valid JSON object.", bat)
		}
		str := func(v []byte) bool { return len(v) > 0 && v[0] == '"' }
		e.block()
		switch string(typ) {
		case `"thinking"`:
			if !str(thinking) || !str(signature) {
				return api.InvalidValue(bat, "Invalid '%s': a thinking block needs its 'thinking' and 'signature' strings.", bat)
			}
			e.b = append(e.b, `{"type":"thinking","thinking":`...)
			e.b = append(e.b, thinking...)
			e.b = append(e.b, `,"signature":`...)
			e.b = append(e.b, signature...)
		case `"redacted_thinking"`:
			if !str(data) {
				return api.InvalidValue(bat, "Invalid '%s': a redacted_thinking block needs its 'data' string.", bat)
			}
			e.b = append(e.b, `{"type":"redacted_thinking","data":`...)
			e.b = append(e.b, data...)
		default:
			return api.InvalidValue(bat+".type", "Invalid value for '%s.type': expected 'thinking' or 'redacted_thinking'.", bat)
		}
		e.b = append(e.b, '}')
		n++
		return nil
	})
	return n, err
}

// messageCache puts a message's cache_control (LiteLLM's prompt-caching
// extension) on its last block.
func (e *encoder) messageCache(i int, m *oai.Message) error {
	if !bytes.Contains(m.Raw, []byte(`"cache_control"`)) {
		return nil
	}
	return e.cacheControl(member(m.Raw, "cache_control"), path(i, "cache_control"))
}

// partCache puts a content part's cache_control on its (open) block.
func (e *encoder) partCache(p *oai.Part, at string) error {
	if !bytes.Contains(p.Raw, []byte(`"cache_control"`)) {
		return nil
	}
	cc := member(p.Raw, "cache_control")
	if jsonscan.Null(cc) {
		return nil
	}
	if cc[0] != '{' {
		return api.InvalidValue(at+".cache_control", "Invalid type for '%s.cache_control': expected an object such as {\"type\": \"ephemeral\"}.", at)
	}
	e.b = append(e.b, `,"cache_control":`...)
	e.b = append(e.b, cc...)
	return nil
}

// cacheControl adds cc to the last (closed) block appended.
func (e *encoder) cacheControl(cc []byte, at string) error {
	if jsonscan.Null(cc) {
		return nil
	}
	if cc[0] != '{' {
		return api.InvalidValue(at, "Invalid type for '%s': expected an object such as {\"type\": \"ephemeral\"}.", at)
	}
	e.b = append(e.b[:len(e.b)-1], `,"cache_control":`...)
	e.b = append(e.b, cc...)
	e.b = append(e.b, '}')
	return nil
}

// tools appends the function tools, the response format's tool, and the
// tool choice. Without tools no tool_choice is sent (Anthropic refuses
// one).
func (e *encoder) tools(thinkingOn bool) {
	req := e.req
	rf := req.ResponseFormat
	e.jsonMode = rf != nil && (rf.Type == oai.FormatJSONSchema || rf.Type == oai.FormatJSONObject)
	n := 0
	for i := range req.Tools {
		t := &req.Tools[i]
		if t.Type != "function" {
			continue // refused unless dropped (checkParams)
		}
		if n == 0 {
			e.b = append(e.b, `,"tools":[`...)
		} else {
			e.b = append(e.b, ',')
		}
		n++
		e.b = append(e.b, `{"name":`...)
		e.b = jsonscan.AppendString(e.b, t.Function.Name)
		if t.Function.Description != "" {
			e.b = append(e.b, `,"description":`...)
			e.b = jsonscan.AppendString(e.b, t.Function.Description)
		}
		e.b = append(e.b, `,"input_schema":`...)
		if t.Function.Parameters != nil {
			e.b = append(e.b, t.Function.Parameters...)
		} else {
			e.b = append(e.b, `{"type":"object","properties":{}}`...)
		}
		if s := t.Function.Strict; s != nil && *s {
			e.b = append(e.b, `,"strict":true`...)
		}
		if bytes.Contains(t.Raw, []byte(`"cache_control"`)) {
			cc := member(t.Raw, "cache_control")
			if cc == nil {
				cc = member(member(t.Raw, "function"), "cache_control")
			}
			if !jsonscan.Null(cc) && cc[0] == '{' {
				e.b = append(e.b, `,"cache_control":`...)
				e.b = append(e.b, cc...)
			}
		}
		e.b = append(e.b, '}')
	}
	if e.jsonMode {
		if n == 0 {
			e.b = append(e.b, `,"tools":[`...)
		} else {
			e.b = append(e.b, ',')
		}
		n++
		e.b = append(e.b, `{"name":"`+JSONToolName+`"`...)
		schema := json.RawMessage(nil)
		if s := rf.JSONSchema; s != nil {
			if s.Description != "" {
				e.b = append(e.b, `,"description":`...)
				e.b = jsonscan.AppendString(e.b, s.Description)
			}
			schema = s.Schema
		}
		e.b = append(e.b, `,"input_schema":`...)
		if schema != nil {
			e.b = append(e.b, schema...)
		} else {
			e.b = append(e.b, `{"type":"object","additionalProperties":true,"properties":{}}`...)
		}
		e.b = append(e.b, '}')
	}
	if n == 0 {
		return
	}
	e.b = append(e.b, ']')
	// A forced tool cannot be combined with thinking: the model then
	// chooses to call the format's tool (it is told to in its schema's
	// name), as in LiteLLM.
	if e.jsonMode && !thinkingOn {
		e.b = append(e.b, `,"tool_choice":{"type":"tool","name":"`+JSONToolName+`"}`...)
		return
	}
	c, parallel := req.ToolChoice, req.ParallelToolCalls
	mode := oai.ToolChoiceAuto
	if c != nil {
		mode = c.Mode
	} else if parallel == nil {
		return
	}
	switch mode {
	case oai.ToolChoiceNone:
		e.b = append(e.b, `,"tool_choice":{"type":"none"}`...)
		return
	case oai.ToolChoiceAuto:
		e.b = append(e.b, `,"tool_choice":{"type":"auto"`...)
	case oai.ToolChoiceRequired:
		e.b = append(e.b, `,"tool_choice":{"type":"any"`...)
	case oai.ToolChoiceFunction:
		e.b = append(e.b, `,"tool_choice":{"type":"tool","name":`...)
		e.b = jsonscan.AppendString(e.b, c.Function)
	default:
		return // refused unless dropped (checkParams)
	}
	if parallel != nil {
		e.b = append(e.b, `,"disable_parallel_tool_use":`...)
		e.b = strconv.AppendBool(e.b, !*parallel)
	}
	e.b = append(e.b, '}')
}

// member returns the raw value of an object's member; nil when absent (or
// obj is not an object).
func member(obj []byte, name string) []byte {
	var out []byte
	jsonscan.Members(obj, func(k, v []byte) error {
		if string(k) == name {
			out = v
		}
		return nil
	})
	return out
}

func path(i int, rest string) string { return "messages[" + strconv.Itoa(i) + "]." + rest }

func clip(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "…"
}
