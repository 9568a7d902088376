package bedrock

import (
	"bytes"
	"encoding/json"
	"errors"
	"strconv"
	"strings"

	"github.com/sluice-gateway/sluice/pkg/api"
	"github.com/sluice-gateway/sluice/pkg/jsonscan"
	"github.com/sluice-gateway/sluice/pkg/oai"
)

// ResponseFormatTool is the tool a response_format of json_object or
// json_schema is forced through (LiteLLM's name): Converse has no JSON mode,
// so the model is made to call a tool whose input schema is the format's,
// and the call's input comes back as the message content.
const ResponseFormatTool = "json_tool_call"

// Thinking on Anthropic models: reasoning_effort's budgets (LiteLLM's), and
// the room left for the reply when the client set no max_tokens (Bedrock
// requires maxTokens above the budget; LiteLLM adds its DEFAULT_MAX_TOKENS).
var thinkingBudgets = map[string]int64{"minimal": 1024, "low": 1024, "medium": 2048, "high": 4096}

const thinkingReplyTokens = 4096

// openSchema is the input schema of a tool that declares no parameters, and
// of the response-format tool of json_object: any object.
var openSchema = json.RawMessage(`{"type":"object","properties":{}}`)

// chatFamily is a kind of Bedrock chat model, by what Converse passes to it
// beyond the common fields (additionalModelRequestFields).
type chatFamily int

const (
	chatOther     chatFamily = iota
	chatAnthropic            // thinking, top_k; signed reasoning blocks sent back
	chatNova                 // inferenceConfig.topK
	chatNova2                // Nova 2: also reasoningConfig
	chatGPTOSS               // reasoning_effort as is
)

// crossRegionPrefixes are the geography prefixes of cross-region inference
// profile ids (us.anthropic.claude-…), as LiteLLM lists them.
var crossRegionPrefixes = []string{"global.", "us.", "eu.", "apac.", "jp.", "au.", "us-gov.", "ca."}

// baseModel is a model id without its inference-profile geography, lower
// case: us.anthropic.claude-3-5-haiku-20241022-v1:0 →
// anthropic.claude-3-5-haiku-20241022-v1:0. An ARN gives its last segment.
func baseModel(model string) string {
	m := strings.ToLower(model)
	if strings.HasPrefix(m, "arn:") {
		m = m[strings.LastIndexByte(m, '/')+1:]
	}
	for _, p := range crossRegionPrefixes {
		if rest, ok := strings.CutPrefix(m, p); ok {
			return rest
		}
	}
	return m
}

func chatFamilyOf(model string) chatFamily {
	m := baseModel(model)
	switch {
	case strings.HasPrefix(m, "anthropic.") || strings.Contains(m, "claude"):
		return chatAnthropic
	case strings.HasPrefix(m, "amazon.nova-2"):
		return chatNova2
	case strings.HasPrefix(m, "amazon.nova"):
		return chatNova
	case strings.Contains(m, "gpt-oss"):
		return chatGPTOSS
	}
	return chatOther
}

// converseRequest is the body of Converse and ConverseStream.
type converseRequest struct {
	Messages                     []message                  `json:"messages"`
	System                       []systemBlock              `json:"system,omitempty"`
	InferenceConfig              *inferenceConfig           `json:"inferenceConfig,omitempty"`
	ToolConfig                   *toolConfig                `json:"toolConfig,omitempty"`
	GuardrailConfig              json.RawMessage            `json:"guardrailConfig,omitempty"`
	AdditionalModelRequestFields map[string]json.RawMessage `json:"additionalModelRequestFields,omitempty"`
}

type message struct {
	Role    string  `json:"role"` // "user" or "assistant"
	Content []block `json:"content"`
}

type systemBlock struct {
	Text       string      `json:"text,omitempty"`
	CachePoint *cachePoint `json:"cachePoint,omitempty"`
}

// block is a ContentBlock: exactly one member is set.
type block struct {
	Text             string          `json:"text,omitempty"`
	Image            *mediaBlock     `json:"image,omitempty"`
	Document         *mediaBlock     `json:"document,omitempty"`
	ToolUse          *toolUse        `json:"toolUse,omitempty"`
	ToolResult       *toolResult     `json:"toolResult,omitempty"`
	ReasoningContent *reasoningBlock `json:"reasoningContent,omitempty"`
	CachePoint       *cachePoint     `json:"cachePoint,omitempty"`
}

// mediaBlock is an ImageBlock ({format, source}) or a DocumentBlock
// ({format, name, source}).
type mediaBlock struct {
	Format string `json:"format"`
	Name   string `json:"name,omitempty"`
	Source struct {
		// Bytes is base64: the JSON protocol carries blobs so, which is
		// what a data: URI holds already.
		Bytes string `json:"bytes"`
	} `json:"source"`
}

type toolUse struct {
	ToolUseID string          `json:"toolUseId"`
	Name      string          `json:"name"`
	Input     json.RawMessage `json:"input"`
}

type toolResult struct {
	ToolUseID string `json:"toolUseId"`
	// Content is one text block, empty or not: Bedrock takes a blank tool
	// result (not a blank message text).
	Content []toolResultText `json:"content"`
}

type toolResultText struct {
	Text string `json:"text"`
}

type reasoningBlock struct {
	ReasoningText   *reasoningText `json:"reasoningText,omitempty"`
	RedactedContent string         `json:"redactedContent,omitempty"` // base64
}

type reasoningText struct {
	Text      string `json:"text"`
	Signature string `json:"signature,omitempty"`
}

type cachePoint struct {
	Type string `json:"type"` // "default"
}

type inferenceConfig struct {
	MaxTokens     int64    `json:"maxTokens,omitempty"`
	Temperature   *float64 `json:"temperature,omitempty"`
	TopP          *float64 `json:"topP,omitempty"`
	StopSequences []string `json:"stopSequences,omitempty"`
}

type toolConfig struct {
	Tools      []tool      `json:"tools"`
	ToolChoice *toolChoice `json:"toolChoice,omitempty"`
}

type tool struct {
	ToolSpec toolSpec `json:"toolSpec"`
}

type toolSpec struct {
	Name        string `json:"name"`
	Description string `json:"description,omitempty"`
	InputSchema struct {
		JSON json.RawMessage `json:"json"`
	} `json:"inputSchema"`
}

// toolChoice is {"auto":{}}, {"any":{}} or {"tool":{"name":…}}.
type toolChoice struct {
	Auto *struct{}     `json:"auto,omitempty"`
	Any  *struct{}     `json:"any,omitempty"`
	Tool *specificTool `json:"tool,omitempty"`
}

type specificTool struct {
	Name string `json:"name"`
}

// translation is one chat request on its way to Converse.
type translation struct {
	e   *endpoint
	req *oai.ChatRequest
	out converseRequest
	// jsonMode: a response_format is forced through ResponseFormatTool,
	// whose input is the answer's content.
	jsonMode bool
	// unsupported names the parameters the model cannot honour, in the
	// order found.
	unsupported []string
	// toolBlocks: the conversation has tool calls or tool results, which
	// Bedrock only takes with a toolConfig.
	toolBlocks bool
	documents  int
}

// translate builds the Converse body of req (the same for Converse and
// ConverseStream). A parameter the model cannot honour is a 400 naming it
// unless drop_params drops it; a message Bedrock cannot take is a 400
// naming where it is.
func (e *endpoint) translate(req *oai.ChatRequest) (*translation, error) {
	t := &translation{e: e, req: req}
	if err := t.messages(); err != nil {
		return nil, err
	}
	x := req.Extras("top_k", "thinking", "guardrailConfig")
	if req.N > 1 {
		t.unsupported = append(t.unsupported, "n")
	}
	if req.Logprobs {
		t.unsupported = append(t.unsupported, "logprobs")
	}
	for _, p := range []struct {
		name  string
		given bool
	}{
		{"top_logprobs", req.TopLogprobs != nil},
		{"frequency_penalty", req.FrequencyPenalty != nil},
		{"presence_penalty", req.PresencePenalty != nil},
		{"seed", req.Seed != nil},
		// Converse always lets the model make several calls at once.
		{"parallel_tool_calls", req.ParallelToolCalls != nil && !*req.ParallelToolCalls},
	} {
		if p.given {
			t.unsupported = append(t.unsupported, p.name)
		}
	}
	// user has nowhere to go in Converse; LiteLLM drops it silently too.
	if err := t.inference(x); err != nil {
		return nil, err
	}
	t.tools()
	if err := t.guardrail(x); err != nil {
		return nil, err
	}
	t.unsupported = append(t.unsupported, req.OthersExcept("top_k", "thinking", "guardrailConfig")...)
	if err := e.drop.Check(req, t.unsupported...); err != nil {
		return nil, err
	}
	if t.toolBlocks && t.out.ToolConfig == nil {
		return nil, api.InvalidValue("tools", "Model '%s' (Bedrock) takes tool calls and tool results in 'messages' only with the 'tools' they used: Bedrock Converse refuses a conversation with tool blocks and no tool configuration. Send 'tools'.", req.Model)
	}
	return t, nil
}

// additional sets a member of additionalModelRequestFields.
func (t *translation) additional(name string, v json.RawMessage) {
	if t.out.AdditionalModelRequestFields == nil {
		t.out.AdditionalModelRequestFields = map[string]json.RawMessage{}
	}
	t.out.AdditionalModelRequestFields[name] = v
}

// messages turns the conversation into system blocks and user/assistant
// turns, consecutive turns of the same role merged (user messages and tool
// results alike are the user's), blank texts left out (Bedrock refuses
// them).
func (t *translation) messages() error {
	for i := range t.req.Messages() {
		m := &t.req.Messages()[i]
		at := "messages[" + strconv.Itoa(i) + "]"
		switch m.Role {
		case oai.RoleSystem, oai.RoleDeveloper:
			t.system(m)
		case oai.RoleUser:
			blocks, err := t.userBlocks(m, at)
			if err != nil {
				return err
			}
			t.turn("user", blocks)
		case oai.RoleAssistant:
			blocks, err := t.assistantBlocks(m, at)
			if err != nil {
				return err
			}
			t.turn("assistant", blocks)
		case oai.RoleTool:
			t.toolBlocks = true
			t.turn("user", []block{{ToolResult: &toolResult{ToolUseID: m.ToolCallID, Content: []toolResultText{{Text: m.Text()}}}}})
		default: // oai.RoleFunction, OpenAI's deprecated form
			return api.InvalidValue(at+".role", "Model '%s' (Bedrock) does not take '%s' messages: send a function's result as a 'tool' message answering the assistant's tool call.", t.req.Model, m.Role)
		}
	}
	return nil
}

// turn appends blocks to the conversation as role's, merged into the last
// turn when it is role's too.
func (t *translation) turn(role string, blocks []block) {
	if len(blocks) == 0 {
		return
	}
	if n := len(t.out.Messages); n > 0 && t.out.Messages[n-1].Role == role {
		t.out.Messages[n-1].Content = append(t.out.Messages[n-1].Content, blocks...)
		return
	}
	t.out.Messages = append(t.out.Messages, message{Role: role, Content: blocks})
}

func blank(s string) bool { return strings.TrimSpace(s) == "" }

var cacheDefault = &cachePoint{Type: "default"}

// system adds a system or developer message to the system blocks, each text
// part its own block; Anthropic's cache_control on the message or a part
// becomes a cache point after it (as LiteLLM does).
func (t *translation) system(m *oai.Message) {
	if m.Parts == nil {
		if !blank(m.Content) {
			t.out.System = append(t.out.System, systemBlock{Text: m.Content})
			if cacheControl(m.Raw) {
				t.out.System = append(t.out.System, systemBlock{CachePoint: cacheDefault})
			}
		}
		return
	}
	for _, p := range m.Parts {
		if p.Type == oai.PartText && !blank(p.Text) {
			t.out.System = append(t.out.System, systemBlock{Text: p.Text})
			if cacheControl(p.Raw) {
				t.out.System = append(t.out.System, systemBlock{CachePoint: cacheDefault})
			}
		}
	}
}

// cacheControl reports whether a message or part carries Anthropic's
// cache_control (LiteLLM's way to ask for a prompt-cache point).
func cacheControl(raw []byte) bool {
	if len(raw) == 0 || raw[0] != '{' {
		return false
	}
	found := false
	jsonscan.Members(raw, func(name, v []byte) error { // validated by the parse
		if string(name) == "cache_control" && !jsonscan.Null(v) {
			found = true
		}
		return nil
	})
	return found
}

func (t *translation) userBlocks(m *oai.Message, at string) ([]block, error) {
	if m.Parts == nil {
		if blank(m.Content) {
			return nil, nil
		}
		blocks := []block{{Text: m.Content}}
		if cacheControl(m.Raw) {
			blocks = append(blocks, block{CachePoint: cacheDefault})
		}
		return blocks, nil
	}
	blocks := make([]block, 0, len(m.Parts))
	for j := range m.Parts {
		p := &m.Parts[j]
		pat := at + ".content[" + strconv.Itoa(j) + "]"
		switch p.Type {
		case oai.PartText:
			if blank(p.Text) {
				continue
			}
			blocks = append(blocks, block{Text: p.Text})
		case oai.PartImageURL:
			img, err := t.image(p.ImageURL, pat+".image_url.url")
			if err != nil {
				return nil, err
			}
			blocks = append(blocks, block{Image: img})
		case oai.PartFile:
			b, err := t.file(p.File, pat+".file")
			if err != nil {
				return nil, err
			}
			blocks = append(blocks, b)
		default: // oai.PartInputAudio
			return nil, api.InvalidValue(pat+".type", "Model '%s' (Bedrock Converse) does not take '%s' content; it takes text, images and documents.", t.req.Model, p.Type)
		}
		if cacheControl(p.Raw) {
			blocks = append(blocks, block{CachePoint: cacheDefault})
		}
	}
	return blocks, nil
}

// imageFormats are the image types Converse takes, by media type.
var imageFormats = map[string]string{
	"image/png": "png", "image/jpeg": "jpeg", "image/jpg": "jpeg", "image/gif": "gif", "image/webp": "webp",
}

// documentFormats are the document types Converse takes, by media type and
// by file extension.
var (
	documentFormats = map[string]string{
		"application/pdf": "pdf", "text/csv": "csv", "application/msword": "doc",
		"application/vnd.openxmlformats-officedocument.wordprocessingml.document": "docx",
		"application/vnd.ms-excel": "xls",
		"application/vnd.openxmlformats-officedocument.spreadsheetml.sheet": "xlsx",
		"text/html": "html", "text/plain": "txt", "text/markdown": "md",
	}
	documentExtensions = map[string]string{
		"pdf": "pdf", "csv": "csv", "doc": "doc", "docx": "docx", "xls": "xls", "xlsx": "xlsx",
		"html": "html", "htm": "html", "txt": "txt", "md": "md",
	}
)

// dataURI splits data:<media type>[;params];base64,<data>. ok is false
// for anything else (a URL, a data URI that is not base64).
func dataURI(s string) (mediaType, data string, ok bool) {
	rest, found := strings.CutPrefix(s, "data:")
	if !found {
		return "", "", false
	}
	meta, data, found := strings.Cut(rest, ",")
	if !found || !strings.HasSuffix(strings.ToLower(meta), ";base64") || data == "" {
		return "", "", false
	}
	mediaType, _, _ = strings.Cut(meta, ";")
	return strings.ToLower(strings.TrimSpace(mediaType)), data, true
}

// image turns an image_url into an image block. Converse takes image bytes
// only, and the gateway fetches no URL a client names (it would reach
// whatever the gateway can reach): a URL is refused, naming the field.
func (t *translation) image(url, at string) (*mediaBlock, error) {
	mt, data, ok := dataURI(url)
	if !ok {
		return nil, api.InvalidValue(at, "Model '%s' (Bedrock Converse) takes images as their bytes, and the gateway does not fetch image URLs: send the image as a base64 data: URI (data:image/png;base64,…).", t.req.Model)
	}
	format, ok := imageFormats[mt]
	if !ok {
		return nil, api.InvalidValue(at, "Model '%s' (Bedrock Converse) takes PNG, JPEG, GIF and WebP images, not %q.", t.req.Model, truncate(mt, 60))
	}
	img := &mediaBlock{Format: format}
	img.Source.Bytes = data
	return img, nil
}

// file turns a file part into a document block (or an image block, for an
// image file). Its bytes must be in the request: file ids are OpenAI's.
func (t *translation) file(f *oai.File, at string) (block, error) {
	if f.Data == "" {
		return block{}, api.InvalidValue(at+".file_id", "Model '%s' (Bedrock Converse) takes files by their bytes ('file_data', a base64 data: URI), not by an OpenAI file id.", t.req.Model)
	}
	name, ext := f.Name, ""
	if i := strings.LastIndexByte(name, '.'); i >= 0 {
		name, ext = name[:i], strings.ToLower(name[i+1:])
	}
	mt, data, ok := dataURI(f.Data)
	if !ok {
		mt, data = "", f.Data // bare base64: the file name says what it is
	}
	if format, ok := imageFormats[mt]; ok {
		img := &mediaBlock{Format: format}
		img.Source.Bytes = data
		return block{Image: img}, nil
	}
	format, ok := documentFormats[mt]
	if !ok {
		format, ok = documentExtensions[ext]
	}
	if !ok {
		return block{}, api.InvalidValue(at+".file_data", "Model '%s' (Bedrock Converse) takes PDF, CSV, Word, Excel, HTML, text and Markdown documents and PNG, JPEG, GIF and WebP images; give file_data as a data: URI with the file's media type, or a filename with its extension.", t.req.Model)
	}
	t.documents++
	doc := &mediaBlock{Format: format, Name: documentName(name, t.documents)}
	doc.Source.Bytes = data
	return block{Document: doc}, nil
}

// documentName makes a file name what Converse accepts as a document's
// name: letters, digits, single spaces, hyphens, parentheses and square
// brackets, at most 200 characters; n numbers a document without one.
func documentName(name string, n int) string {
	var b strings.Builder
	space := false
	for _, r := range name {
		switch {
		case r == ' ' || r == '\t' || r == '\n' || r == '\r':
			if !space && b.Len() > 0 {
				b.WriteByte(' ')
			}
			space = true
			continue
		case r >= 'a' && r <= 'z', r >= 'A' && r <= 'Z', r >= '0' && r <= '9',
			r == '-', r == '(', r == ')', r == '[', r == ']':
			b.WriteRune(r)
		default:
			b.WriteByte('-')
		}
		space = false
		if b.Len() >= 200 {
			break
		}
	}
	s := strings.TrimSpace(b.String())
	if s == "" {
		return "document " + strconv.Itoa(n)
	}
	return s
}

// assistantBlocks are an assistant message's blocks: the thinking blocks it
// carries back (Anthropic's, signed: LiteLLM's thinking_blocks), its text,
// and its tool calls.
func (t *translation) assistantBlocks(m *oai.Message, at string) ([]block, error) {
	var blocks []block
	if t.e.chat == chatAnthropic {
		var err error
		if blocks, err = thinkingBlocks(m.Raw, at); err != nil {
			return nil, err
		}
	}
	if m.Parts == nil {
		if !blank(m.Content) {
			blocks = append(blocks, block{Text: m.Content})
		}
	}
	for _, p := range m.Parts { // text and refusal parts
		if !blank(p.Text) {
			blocks = append(blocks, block{Text: p.Text})
		}
	}
	for j, c := range m.ToolCalls {
		input, err := toolInput(c.Function.Arguments)
		if err != nil {
			return nil, api.InvalidValue(at+".tool_calls["+strconv.Itoa(j)+"].function.arguments", "Model '%s' (Bedrock) needs a tool call's arguments as a JSON object: %v.", t.req.Model, err)
		}
		t.toolBlocks = true
		blocks = append(blocks, block{ToolUse: &toolUse{ToolUseID: c.ID, Name: c.Function.Name, Input: input}})
	}
	return blocks, nil
}

// toolInput reads a tool call's arguments (a JSON text) as the toolUse
// input object; none is an empty object.
func toolInput(args string) (json.RawMessage, error) {
	a := bytes.TrimSpace([]byte(args))
	if len(a) == 0 {
		return json.RawMessage(`{}`), nil
	}
	if a[0] != '{' || !json.Valid(a) {
		return nil, errNotObject
	}
	return a, nil
}

var errNotObject = errors.New("not a JSON object")

// thinkingBlocks reads an assistant message's thinking_blocks (LiteLLM's
// extension: {"type":"thinking","thinking","signature"} and
// {"type":"redacted_thinking","data"}) as reasoning blocks. Claude needs
// them back, signed, before the tool calls of a turn it thought about.
func thinkingBlocks(raw []byte, at string) ([]block, error) {
	var list []byte
	jsonscan.Members(raw, func(name, v []byte) error { // validated by the parse
		if string(name) == "thinking_blocks" {
			list = v
		}
		return nil
	})
	if jsonscan.Null(list) {
		return nil, nil
	}
	at += ".thinking_blocks"
	if list[0] != '[' {
		return nil, api.InvalidValue(at, "Invalid type for '%s': expected an array.", at)
	}
	var blocks []block
	err := jsonscan.Elements(list, func(el []byte) error {
		var tb struct {
			Type      string `json:"type"`
			Thinking  string `json:"thinking"`
			Signature string `json:"signature"`
			Data      string `json:"data"`
		}
		if err := json.Unmarshal(el, &tb); err != nil {
			return api.InvalidValue(at, "Invalid '%s[%d]': expected a thinking block object.", at, len(blocks))
		}
		switch tb.Type {
		case "thinking":
			blocks = append(blocks, block{ReasoningContent: &reasoningBlock{ReasoningText: &reasoningText{Text: tb.Thinking, Signature: tb.Signature}}})
		case "redacted_thinking":
			blocks = append(blocks, block{ReasoningContent: &reasoningBlock{RedactedContent: tb.Data}})
		default:
			return api.InvalidValue(at, "Invalid '%s[%d].type': %q; expected 'thinking' or 'redacted_thinking'.", at, len(blocks), truncate(tb.Type, 40))
		}
		return nil
	})
	return blocks, err
}

// inference maps the sampling parameters, the output bound, stop sequences
// and reasoning.
func (t *translation) inference(x oai.Extras) error {
	req := t.req
	cfg := inferenceConfig{MaxTokens: req.MaxOutputTokens(), Temperature: req.Temperature, TopP: req.TopP}
	for _, s := range req.Stop {
		if s != "" { // Converse refuses empty sequences; LiteLLM drops them
			cfg.StopSequences = append(cfg.StopSequences, s)
		}
	}
	budget, err := t.reasoning(x)
	if err != nil {
		return err
	}
	if budget > 0 && cfg.MaxTokens == 0 {
		cfg.MaxTokens = budget + thinkingReplyTokens
	}
	if v, ok := x["top_k"]; ok {
		if !jsonscan.ValidNumber(v) {
			return api.InvalidValue("top_k", "Invalid type for 'top_k': expected a number.")
		}
		switch t.e.chat {
		case chatAnthropic:
			t.additional("top_k", json.RawMessage(v))
		case chatNova, chatNova2:
			t.additional("inferenceConfig", json.RawMessage(`{"topK":`+string(v)+`}`))
		default:
			t.unsupported = append(t.unsupported, "top_k")
		}
	}
	if cfg.MaxTokens != 0 || cfg.Temperature != nil || cfg.TopP != nil || cfg.StopSequences != nil {
		t.out.InferenceConfig = &cfg
	}
	return nil
}

// reasoning maps reasoning_effort (and Anthropic's own thinking parameter)
// to the model family's field. It returns the thinking budget when thinking
// is on (0 otherwise).
func (t *translation) reasoning(x oai.Extras) (int64, error) {
	effort := t.req.ReasoningEffort
	thinking, hasThinking := x["thinking"]
	if t.e.chat != chatAnthropic && hasThinking {
		t.unsupported = append(t.unsupported, "thinking")
	}
	switch t.e.chat {
	case chatAnthropic:
		if hasThinking {
			// Anthropic's parameter as LiteLLM passes it: it wins over
			// reasoning_effort.
			var th struct {
				Type         string `json:"type"`
				BudgetTokens int64  `json:"budget_tokens"`
			}
			if thinking[0] != '{' || json.Unmarshal(thinking, &th) != nil {
				return 0, api.InvalidValue("thinking", "Invalid 'thinking': expected an object such as {\"type\": \"enabled\", \"budget_tokens\": 2048}.")
			}
			t.additional("thinking", json.RawMessage(thinking))
			if th.Type == "enabled" {
				return th.BudgetTokens, nil
			}
			return 0, nil
		}
		if effort == "" || effort == "none" {
			return 0, nil
		}
		budget, ok := thinkingBudgets[effort]
		if !ok {
			return 0, api.InvalidValue("reasoning_effort", "Invalid value for 'reasoning_effort': %q. Model '%s' (Bedrock, Anthropic) takes 'none', 'minimal', 'low', 'medium' and 'high'.", truncate(effort, 40), t.req.Model)
		}
		t.additional("thinking", json.RawMessage(`{"type":"enabled","budget_tokens":`+strconv.FormatInt(budget, 10)+`}`))
		return budget, nil
	case chatNova2, chatGPTOSS:
		switch effort {
		case "", "none":
			return 0, nil
		case "low", "medium", "high":
		default:
			return 0, api.InvalidValue("reasoning_effort", "Invalid value for 'reasoning_effort': %q. Model '%s' (Bedrock) takes 'low', 'medium' and 'high'.", truncate(effort, 40), t.req.Model)
		}
		if t.e.chat == chatNova2 {
			t.additional("reasoningConfig", json.RawMessage(`{"type":"enabled","maxReasoningEffort":"`+effort+`"}`))
		} else {
			t.additional("reasoning_effort", json.RawMessage(`"`+effort+`"`))
		}
		return 0, nil
	}
	if effort != "" && effort != "none" {
		t.unsupported = append(t.unsupported, "reasoning_effort")
	}
	return 0, nil
}

// thinkingOn reports whether the request turns Anthropic's thinking on: a
// forced tool choice would then be refused, so the response-format tool is
// left to the model's choice (as LiteLLM does).
func (t *translation) thinkingOn() bool {
	th, ok := t.out.AdditionalModelRequestFields["thinking"]
	return ok && bytes.Contains(th, []byte(`"enabled"`))
}

// tools maps tools, tool_choice and response_format onto toolConfig.
func (t *translation) tools() {
	req := t.req
	var cfg toolConfig
	for i, tl := range req.Tools {
		if tl.Type != "function" {
			t.unsupported = append(t.unsupported, "tools["+strconv.Itoa(i)+"]")
			continue
		}
		var spec toolSpec
		spec.Name, spec.Description = tl.Function.Name, tl.Function.Description
		spec.InputSchema.JSON = tl.Function.Parameters
		if spec.InputSchema.JSON == nil {
			spec.InputSchema.JSON = openSchema
		}
		cfg.Tools = append(cfg.Tools, tool{ToolSpec: spec})
	}
	if c := req.ToolChoice; c != nil {
		switch c.Mode {
		case oai.ToolChoiceAuto:
			cfg.ToolChoice = &toolChoice{Auto: &struct{}{}}
		case oai.ToolChoiceRequired:
			cfg.ToolChoice = &toolChoice{Any: &struct{}{}}
		case oai.ToolChoiceFunction:
			cfg.ToolChoice = &toolChoice{Tool: &specificTool{Name: c.Function}}
		case oai.ToolChoiceNone:
			// Converse has no "none": the tools are left out, unless the
			// conversation's tool blocks need them (then "none" cannot be
			// honoured; dropped, the model may call them).
			if t.toolBlocks {
				t.unsupported = append(t.unsupported, "tool_choice")
			} else {
				cfg.Tools = nil
			}
		default: // allowed_tools, custom
			t.unsupported = append(t.unsupported, "tool_choice")
		}
	}
	if rf := req.ResponseFormat; rf != nil && rf.Type != oai.FormatText {
		var spec toolSpec
		spec.Name, spec.InputSchema.JSON = ResponseFormatTool, openSchema
		if s := rf.JSONSchema; s != nil {
			spec.Description = s.Description
			if s.Schema != nil {
				spec.InputSchema.JSON = s.Schema
			}
		}
		cfg.Tools = append(cfg.Tools, tool{ToolSpec: spec})
		if !t.thinkingOn() {
			cfg.ToolChoice = &toolChoice{Tool: &specificTool{Name: ResponseFormatTool}}
		}
		t.jsonMode = true
	}
	if len(cfg.Tools) > 0 {
		t.out.ToolConfig = &cfg
	}
}

// guardrail sets guardrailConfig: the request's own (LiteLLM passes it as
// a parameter), else the deployment's litellm_params.guardrailConfig.
func (t *translation) guardrail(x oai.Extras) error {
	g, ok := x["guardrailConfig"]
	if !ok {
		t.out.GuardrailConfig = t.e.guardrail
		return nil
	}
	if g[0] != '{' {
		return api.InvalidValue("guardrailConfig", "Invalid type for 'guardrailConfig': expected an object ({\"guardrailIdentifier\", \"guardrailVersion\"}).")
	}
	t.out.GuardrailConfig = json.RawMessage(g)
	return nil
}

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "…"
}
