package gemini

import (
	"encoding/json"
	"fmt"
	"math"
	"net/url"
	"path"
	"strconv"
	"strings"

	"github.com/sluice-gateway/sluice/pkg/api"
	"github.com/sluice-gateway/sluice/pkg/jsonscan"
	"github.com/sluice-gateway/sluice/pkg/oai"
	"github.com/sluice-gateway/sluice/pkg/providers"
)

// Dialect is the API a generateContent body goes to. The Gemini API and
// Vertex AI take the same body; they differ in the file URIs they read.
type Dialect int

const (
	// GeminiAPI (generativelanguage.googleapis.com) fetches https:// URLs
	// itself (its own file URIs, public and signed URLs); a file's MIME
	// type is optional. It cannot read gs:// URIs that were not registered
	// with it first.
	GeminiAPI Dialect = iota
	// VertexAI reads gs:// and https:// URIs, and needs each file's MIME
	// type.
	VertexAI
)

// The generateContent request body (camelCase, as the Google Gen AI SDKs
// send it).
type generateRequest struct {
	Contents          []turn            `json:"contents"`
	SystemInstruction *turn             `json:"systemInstruction,omitempty"`
	Tools             []toolSet         `json:"tools,omitempty"`
	ToolConfig        *toolConfig       `json:"toolConfig,omitempty"`
	SafetySettings    json.RawMessage   `json:"safetySettings,omitempty"`
	GenerationConfig  *generationConfig `json:"generationConfig,omitempty"`
}

// turn is a Content: a role ("user" or "model"; none for the system
// instruction) and its parts.
type turn struct {
	Role  string     `json:"role,omitempty"`
	Parts []chatPart `json:"parts"`
}

// chatPart is a Part; exactly one of its data members is set.
type chatPart struct {
	Text             string            `json:"text,omitempty"`
	InlineData       *blob             `json:"inlineData,omitempty"`
	FileData         *fileData         `json:"fileData,omitempty"`
	FunctionCall     *functionCall     `json:"functionCall,omitempty"`
	FunctionResponse *functionResponse `json:"functionResponse,omitempty"`
	// ThoughtSignature goes back on the function call it came with (see
	// toolCallID).
	ThoughtSignature string `json:"thoughtSignature,omitempty"`
}

type blob struct {
	MimeType string `json:"mimeType"`
	Data     string `json:"data"` // base64
}

type fileData struct {
	MimeType string `json:"mimeType,omitempty"`
	FileURI  string `json:"fileUri"`
}

type functionCall struct {
	Name string          `json:"name"`
	Args json.RawMessage `json:"args"`
}

type functionResponse struct {
	Name     string          `json:"name"`
	Response json.RawMessage `json:"response"`
}

type toolSet struct {
	FunctionDeclarations []functionDeclaration `json:"functionDeclarations"`
}

// functionDeclaration takes the client's JSON Schema as it is
// (parametersJsonSchema), not converted to the OpenAPI subset of
// "parameters".
type functionDeclaration struct {
	Name                 string          `json:"name"`
	Description          string          `json:"description,omitempty"`
	ParametersJSONSchema json.RawMessage `json:"parametersJsonSchema,omitempty"`
}

type toolConfig struct {
	FunctionCallingConfig functionCallingConfig `json:"functionCallingConfig"`
}

type functionCallingConfig struct {
	Mode                 string   `json:"mode"` // AUTO, ANY, NONE
	AllowedFunctionNames []string `json:"allowedFunctionNames,omitempty"`
}

type generationConfig struct {
	MaxOutputTokens  int64    `json:"maxOutputTokens,omitempty"`
	Temperature      *float64 `json:"temperature,omitempty"`
	TopP             *float64 `json:"topP,omitempty"`
	TopK             *int64   `json:"topK,omitempty"`
	StopSequences    []string `json:"stopSequences,omitempty"`
	CandidateCount   int      `json:"candidateCount,omitempty"`
	Seed             *int64   `json:"seed,omitempty"`
	PresencePenalty  *float64 `json:"presencePenalty,omitempty"`
	FrequencyPenalty *float64 `json:"frequencyPenalty,omitempty"`
	ResponseMimeType string   `json:"responseMimeType,omitempty"`
	// ResponseJSONSchema is the json_schema format's schema as the client
	// gave it.
	ResponseJSONSchema json.RawMessage `json:"responseJsonSchema,omitempty"`
	ThinkingConfig     *thinkingConfig `json:"thinkingConfig,omitempty"`
}

type thinkingConfig struct {
	IncludeThoughts bool   `json:"includeThoughts"`
	ThinkingBudget  *int   `json:"thinkingBudget,omitempty"` // Gemini 2.5
	ThinkingLevel   string `json:"thinkingLevel,omitempty"`  // Gemini 3
}

// extras are the request members outside OpenAI's that a Gemini request
// honours (LiteLLM's names).
var extras = []string{"top_k", "safety_settings"}

// buildRequest translates a chat request into a generateContent body for
// model (the provider's name, which picks the thinking configuration).
// Parameters Gemini cannot honour are refused by drop (or dropped); content
// it cannot read is a 400 naming the field.
func buildRequest(req *oai.ChatRequest, model string, dialect Dialect, drop providers.DropParams) (*generateRequest, error) {
	var bad []string
	if req.Logprobs {
		bad = append(bad, "logprobs")
	}
	if req.TopLogprobs != nil {
		bad = append(bad, "top_logprobs")
	}
	if req.ParallelToolCalls != nil && !*req.ParallelToolCalls {
		bad = append(bad, "parallel_tool_calls") // Gemini may always call several
	}
	if req.User != "" {
		bad = append(bad, "user")
	}
	for _, t := range req.Tools {
		if t.Type != "function" {
			bad = append(bad, "tools")
			break
		}
	}
	if c := req.ToolChoice; c != nil && c.Mode != oai.ToolChoiceNone && c.Mode != oai.ToolChoiceAuto &&
		c.Mode != oai.ToolChoiceRequired && c.Mode != oai.ToolChoiceFunction {
		bad = append(bad, "tool_choice")
	}
	thinking, known := thinkingFor(req.ReasoningEffort, model)
	if !known {
		bad = append(bad, "reasoning_effort")
	}
	// Gemini 3 models take no penalties (LiteLLM drops them silently).
	penalties := !gemini3(model)
	if !penalties && req.PresencePenalty != nil {
		bad = append(bad, "presence_penalty")
	}
	if !penalties && req.FrequencyPenalty != nil {
		bad = append(bad, "frequency_penalty")
	}
	bad = append(bad, req.OthersExcept(extras...)...)
	if err := drop.Check(req, bad...); err != nil {
		return nil, err
	}

	out := &generateRequest{}
	var err error
	if out.Contents, out.SystemInstruction, err = translateMessages(req.Messages(), dialect); err != nil {
		return nil, err
	}
	out.Tools, out.ToolConfig = translateTools(req.Tools, req.ToolChoice)

	g := generationConfig{
		MaxOutputTokens: req.MaxOutputTokens(), Temperature: req.Temperature, TopP: req.TopP,
		StopSequences: req.Stop, ThinkingConfig: thinking,
	}
	if penalties {
		g.PresencePenalty, g.FrequencyPenalty = req.PresencePenalty, req.FrequencyPenalty
	}
	if req.N > 1 {
		g.CandidateCount = req.N
	}
	if s := req.Seed; s != nil {
		if *s < math.MinInt32 || *s > math.MaxInt32 {
			return nil, api.InvalidValue("seed", "Invalid value for 'seed': %d; Gemini takes a 32-bit seed, in [%d, %d].", *s, math.MinInt32, math.MaxInt32)
		}
		g.Seed = s
	}
	if f := req.ResponseFormat; f != nil {
		switch f.Type {
		case oai.FormatJSONObject:
			g.ResponseMimeType = "application/json"
		case oai.FormatJSONSchema:
			g.ResponseMimeType = "application/json"
			if f.JSONSchema != nil {
				g.ResponseJSONSchema = f.JSONSchema.Schema
			}
		}
	}
	x := req.Extras(extras...)
	if v, ok := x["top_k"]; ok {
		k, ok := jsonscan.Count(v)
		if !ok {
			return nil, api.InvalidValue("top_k", "Invalid value for 'top_k': expected a non-negative integer.")
		}
		g.TopK = &k
	}
	if v, ok := x["safety_settings"]; ok {
		if v[0] != '[' {
			return nil, api.InvalidValue("safety_settings", "Invalid type for 'safety_settings': expected an array of Gemini safety settings.")
		}
		out.SafetySettings = v
	}
	if !g.empty() {
		out.GenerationConfig = &g
	}
	return out, nil
}

func (g *generationConfig) empty() bool {
	return g.MaxOutputTokens == 0 && g.Temperature == nil && g.TopP == nil && g.TopK == nil &&
		g.StopSequences == nil && g.CandidateCount == 0 && g.Seed == nil && g.PresencePenalty == nil &&
		g.FrequencyPenalty == nil && g.ResponseMimeType == "" && g.ResponseJSONSchema == nil && g.ThinkingConfig == nil
}

// Thinking budgets for reasoning_effort on Gemini 2.5 (LiteLLM's).
const (
	budgetMinimal = 128
	budgetLow     = 1024
	budgetMedium  = 2048
	budgetHigh    = 4096
)

// thinkingFor maps reasoning_effort to a thinking configuration, as LiteLLM
// does: a level for Gemini 3 models, a token budget for the others (Gemini
// 2.5); thoughts are returned (reasoning_content) unless the effort is
// "none". known is false for an effort it does not know.
func thinkingFor(effort, model string) (tc *thinkingConfig, known bool) {
	if effort == "" {
		return nil, true
	}
	m := strings.ToLower(model)
	if gemini3(model) {
		flash := strings.Contains(m, "flash")
		level := ""
		switch effort {
		case "none", "minimal":
			level = "LOW" // Gemini 3 cannot stop thinking; Flash can think least
			if flash {
				level = "MINIMAL"
			}
		case "low":
			level = "LOW"
		case "medium":
			level = "HIGH"
			if flash || strings.Contains(m, "gemini-3.1-pro") {
				level = "MEDIUM"
			}
		case "high":
			level = "HIGH"
		default:
			return nil, false
		}
		return &thinkingConfig{IncludeThoughts: effort != "none", ThinkingLevel: level}, true
	}
	budget := 0
	switch effort {
	case "none":
	case "minimal":
		switch {
		case strings.Contains(m, "gemini-2.5-flash-lite"):
			budget = 512 // its least
		case strings.Contains(m, "gemini-2.5-flash"):
			budget = 1
		default:
			budget = budgetMinimal
		}
	case "low":
		budget = budgetLow
	case "medium":
		budget = budgetMedium
	case "high":
		budget = budgetHigh
	default:
		return nil, false
	}
	return &thinkingConfig{IncludeThoughts: effort != "none", ThinkingBudget: &budget}, true
}

// gemini3 reports whether model is of the Gemini 3 family (or later 3.x).
func gemini3(model string) bool { return strings.Contains(strings.ToLower(model), "gemini-3") }

// translateMessages turns the conversation into Gemini's contents: system
// and developer messages into the system instruction, user and tool
// messages into "user" turns, assistant messages into "model" turns,
// consecutive turns of one role merged into one.
func translateMessages(msgs []oai.Message, dialect Dialect) ([]turn, *turn, error) {
	var (
		system *turn
		turns  []turn
		calls  map[string]string // tool call id → function name
	)
	add := func(role string, parts []chatPart) {
		if len(parts) == 0 {
			return
		}
		if n := len(turns); n > 0 && turns[n-1].Role == role {
			turns[n-1].Parts = append(turns[n-1].Parts, parts...)
			return
		}
		turns = append(turns, turn{Role: role, Parts: parts})
	}
	for i := range msgs {
		m := &msgs[i]
		at := "messages[" + strconv.Itoa(i) + "]"
		switch m.Role {
		case oai.RoleSystem, oai.RoleDeveloper:
			if text := m.Text(); text != "" {
				if system == nil {
					system = &turn{}
				}
				system.Parts = append(system.Parts, chatPart{Text: text})
			}
		case oai.RoleUser:
			parts, err := userParts(m, at, dialect)
			if err != nil {
				return nil, nil, err
			}
			add("user", parts)
		case oai.RoleAssistant:
			parts, err := modelParts(m, at)
			if err != nil {
				return nil, nil, err
			}
			for _, c := range m.ToolCalls {
				if calls == nil {
					calls = map[string]string{}
				}
				calls[c.ID] = c.Function.Name
			}
			add("model", parts)
		case oai.RoleTool:
			name, ok := calls[m.ToolCallID]
			if !ok {
				return nil, nil, api.InvalidValue(at+".tool_call_id", "'%s.tool_call_id' %q answers no tool call of an earlier assistant message; Gemini needs the function's name.", at, truncate(m.ToolCallID, 80))
			}
			add("user", []chatPart{{FunctionResponse: &functionResponse{Name: name, Response: toolResult(m.Text())}}})
		case oai.RoleFunction:
			add("user", []chatPart{{FunctionResponse: &functionResponse{Name: m.Name, Response: toolResult(m.Text())}}})
		}
	}
	if len(turns) == 0 {
		return nil, nil, api.InvalidValue("messages", "'messages' has no user or assistant message with content; Gemini needs at least one.")
	}
	return turns, system, nil
}

// toolResult is a tool's output as a functionResponse.response, which must
// be a JSON object: the output itself when it is one, else {"output": text}
// (the key Gemini reads as the function's output).
func toolResult(text string) json.RawMessage {
	trimmed := strings.TrimSpace(text)
	if strings.HasPrefix(trimmed, "{") && json.Valid([]byte(trimmed)) {
		return json.RawMessage(trimmed)
	}
	b, _ := json.Marshal(struct {
		Output string `json:"output"`
	}{text})
	return b
}

// userParts translates a user message's content.
func userParts(m *oai.Message, at string, dialect Dialect) ([]chatPart, error) {
	if m.Parts == nil {
		if m.Content == "" {
			return nil, nil
		}
		return []chatPart{{Text: m.Content}}, nil
	}
	parts := make([]chatPart, 0, len(m.Parts))
	for j, p := range m.Parts {
		if p.Type == oai.PartText {
			if p.Text != "" {
				parts = append(parts, chatPart{Text: p.Text})
			}
			continue
		}
		pat := fmt.Sprintf("%s.content[%d]", at, j) // names a media part's problems
		switch p.Type {
		case oai.PartImageURL:
			part, err := uriPart(p.ImageURL, "", pat+".image_url.url", dialect)
			if err != nil {
				return nil, err
			}
			parts = append(parts, part)
		case oai.PartInputAudio:
			mime, ok := audioTypes[strings.ToLower(p.Audio.Format)]
			if !ok {
				return nil, api.InvalidValue(pat+".input_audio.format", "Invalid value for '%s.input_audio.format': %q. Gemini takes 'wav', 'mp3', 'aiff', 'aac', 'ogg' and 'flac'.", pat, truncate(p.Audio.Format, 40))
			}
			parts = append(parts, chatPart{InlineData: &blob{MimeType: mime, Data: p.Audio.Data}})
		case oai.PartFile:
			part, err := filePart(p.File, pat+".file", dialect)
			if err != nil {
				return nil, err
			}
			parts = append(parts, part)
		}
	}
	return parts, nil
}

// modelParts translates an assistant message: its text (and refusal), then
// its tool calls as function calls, each with the thought signature its id
// carries.
func modelParts(m *oai.Message, at string) ([]chatPart, error) {
	var parts []chatPart
	if text := m.Text(); text != "" {
		parts = append(parts, chatPart{Text: text})
	}
	for _, p := range m.Parts {
		if p.Type == oai.PartRefusal && p.Text != "" {
			parts = append(parts, chatPart{Text: p.Text})
		}
	}
	if m.Refusal != "" {
		parts = append(parts, chatPart{Text: m.Refusal})
	}
	for k, c := range m.ToolCalls {
		args, err := callArgs(c.Function.Arguments)
		if err != nil {
			f := fmt.Sprintf("%s.tool_calls[%d].function.arguments", at, k)
			return nil, api.InvalidValue(f, "Invalid '%s': %v.", f, err)
		}
		_, sig := splitToolCallID(c.ID)
		parts = append(parts, chatPart{FunctionCall: &functionCall{Name: c.Function.Name, Args: args}, ThoughtSignature: sig})
	}
	return parts, nil
}

// callArgs is a tool call's arguments as a function call's args: a JSON
// object ("" is no arguments).
func callArgs(s string) (json.RawMessage, error) {
	s = strings.TrimSpace(s)
	if s == "" {
		return json.RawMessage("{}"), nil
	}
	if !json.Valid([]byte(s)) {
		return nil, fmt.Errorf("not JSON")
	}
	if s[0] != '{' {
		return nil, fmt.Errorf("expected a JSON object")
	}
	return json.RawMessage(s), nil
}

// uriPart is the part for a URL: a data: URI inline, a gs:// or https://
// URI by reference where the dialect reads it. mime is the type the client
// gave, if any.
func uriPart(uri, mime, field string, dialect Dialect) (chatPart, error) {
	if rest, ok := cutPrefixFold(uri, "data:"); ok {
		b, err := dataURI(rest)
		if err != nil {
			return chatPart{}, api.InvalidValue(field, "Invalid '%s': %v.", field, err)
		}
		return chatPart{InlineData: b}, nil
	}
	u, err := url.Parse(uri)
	if err != nil || u.Host == "" {
		return chatPart{}, api.InvalidValue(field, "Invalid '%s': expected an https:// URL, a gs:// URI or a data: URI.", field)
	}
	switch u.Scheme {
	case "https":
	case "gs":
		if dialect == GeminiAPI {
			return chatPart{}, api.InvalidValue(field, "Invalid '%s': the Gemini API does not read gs:// URIs; use Vertex AI, an https:// URL or a data: URI.", field)
		}
	default:
		return chatPart{}, api.InvalidValue(field, "Invalid '%s': expected an https:// URL, a gs:// URI or a data: URI.", field)
	}
	if mime == "" {
		mime = fileTypes[strings.ToLower(path.Ext(u.Path))]
	}
	if mime == "" && dialect == VertexAI {
		return chatPart{}, api.InvalidValue(field, "Invalid '%s': Vertex AI needs the file's type, and its name has no extension Gemini reads (.png, .jpg, .webp, .pdf, .mp3, .wav, .mp4, …); send it as a data: URI.", field)
	}
	return chatPart{FileData: &fileData{MimeType: mime, FileURI: uri}}, nil
}

// filePart is the part for a file: its data inline (a data: URI, or base64
// typed by its filename), or its id by reference when that is a URI.
func filePart(f *oai.File, at string, dialect Dialect) (chatPart, error) {
	if f.Data != "" {
		if rest, ok := cutPrefixFold(f.Data, "data:"); ok {
			b, err := dataURI(rest)
			if err != nil {
				return chatPart{}, api.InvalidValue(at+".file_data", "Invalid '%s.file_data': %v.", at, err)
			}
			return chatPart{InlineData: b}, nil
		}
		mime := fileTypes[strings.ToLower(path.Ext(f.Name))]
		if mime == "" {
			return chatPart{}, api.InvalidValue(at+".filename", "Gemini needs the type of the file in '%s': give 'file_data' as a data: URI, or a 'filename' with an extension it reads (.pdf, .png, .jpg, .mp3, .wav, .mp4, .txt, …).", at)
		}
		return chatPart{InlineData: &blob{MimeType: mime, Data: f.Data}}, nil
	}
	if strings.HasPrefix(f.ID, "https://") || strings.HasPrefix(f.ID, "gs://") {
		return uriPart(f.ID, "", at+".file_id", dialect)
	}
	return chatPart{}, api.InvalidValue(at+".file_id", "Invalid '%s.file_id': Gemini reads files by URI (https://, or gs:// on Vertex AI) or inline (file_data), not by an uploaded file's id.", at)
}

// dataURI reads the rest of a data: URI (after "data:"): a base64 payload
// and its media type.
func dataURI(rest string) (*blob, error) {
	meta, data, ok := strings.Cut(rest, ",")
	if !ok {
		return nil, fmt.Errorf("a data: URI needs a comma before its data")
	}
	mediatype, ok := cutSuffixFold(meta, ";base64")
	if !ok {
		return nil, fmt.Errorf("Gemini takes base64 data: URIs only (data:<type>;base64,…)")
	}
	mime, _, _ := strings.Cut(mediatype, ";")
	if mime == "" || !strings.Contains(mime, "/") {
		return nil, fmt.Errorf("the data: URI names no media type")
	}
	if data == "" {
		return nil, fmt.Errorf("the data: URI has no data")
	}
	return &blob{MimeType: strings.ToLower(mime), Data: data}, nil
}

// audioTypes are the input_audio formats Gemini reads.
var audioTypes = map[string]string{
	"wav": "audio/wav", "mp3": "audio/mp3", "aiff": "audio/aiff", "aac": "audio/aac", "ogg": "audio/ogg", "flac": "audio/flac",
}

// fileTypes are the MIME types of the file extensions Gemini reads (its
// documented image, audio, video and document types).
var fileTypes = map[string]string{
	".png": "image/png", ".jpg": "image/jpeg", ".jpeg": "image/jpeg", ".webp": "image/webp",
	".heic": "image/heic", ".heif": "image/heif",
	".wav": "audio/wav", ".mp3": "audio/mp3", ".aiff": "audio/aiff", ".aac": "audio/aac",
	".ogg": "audio/ogg", ".flac": "audio/flac",
	".mp4": "video/mp4", ".mpeg": "video/mpeg", ".mpg": "video/mpg", ".mov": "video/mov",
	".avi": "video/avi", ".flv": "video/x-flv", ".webm": "video/webm", ".wmv": "video/wmv", ".3gp": "video/3gpp",
	".pdf": "application/pdf", ".txt": "text/plain", ".csv": "text/csv", ".html": "text/html",
	".md": "text/md", ".xml": "text/xml",
}

// translateTools turns function tools into one tool of function
// declarations, and tool_choice into the function calling mode: none →
// NONE, auto → AUTO, required → ANY, a named function → ANY allowing only
// it. Other tools and choices were refused or dropped before.
func translateTools(tools []oai.Tool, choice *oai.ToolChoice) ([]toolSet, *toolConfig) {
	var decls []functionDeclaration
	for _, t := range tools {
		if t.Type != "function" {
			continue
		}
		decls = append(decls, functionDeclaration{Name: t.Function.Name, Description: t.Function.Description, ParametersJSONSchema: t.Function.Parameters})
	}
	if decls == nil {
		return nil, nil
	}
	sets := []toolSet{{FunctionDeclarations: decls}}
	if choice == nil {
		return sets, nil
	}
	var c functionCallingConfig
	switch choice.Mode {
	case oai.ToolChoiceNone:
		c.Mode = "NONE"
	case oai.ToolChoiceAuto:
		c.Mode = "AUTO"
	case oai.ToolChoiceRequired:
		c.Mode = "ANY"
	case oai.ToolChoiceFunction:
		c.Mode, c.AllowedFunctionNames = "ANY", []string{choice.Function}
	default:
		return sets, nil
	}
	return sets, &toolConfig{FunctionCallingConfig: c}
}

func cutPrefixFold(s, prefix string) (string, bool) {
	if len(s) >= len(prefix) && strings.EqualFold(s[:len(prefix)], prefix) {
		return s[len(prefix):], true
	}
	return s, false
}

func cutSuffixFold(s, suffix string) (string, bool) {
	if len(s) >= len(suffix) && strings.EqualFold(s[len(s)-len(suffix):], suffix) {
		return s[:len(s)-len(suffix)], true
	}
	return s, false
}

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "…"
}
