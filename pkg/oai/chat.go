package oai

import (
	"encoding/json"
	"errors"
	"math"
	"math/bits"
	"strings"
	"sync"

	"github.com/sluice-gateway/sluice/pkg/api"
	"github.com/sluice-gateway/sluice/pkg/jsonscan"
)

// Message roles, as OpenAI names them.
const (
	RoleSystem    = "system"
	RoleDeveloper = "developer"
	RoleUser      = "user"
	RoleAssistant = "assistant"
	RoleTool      = "tool"
	RoleFunction  = "function" // deprecated by OpenAI, still accepted
)

// Content part types.
const (
	PartText       = "text"
	PartImageURL   = "image_url"
	PartInputAudio = "input_audio"
	PartFile       = "file"
	PartRefusal    = "refusal" // assistant messages only
)

// Tool choice modes (ToolChoice.Mode); a named function is ToolChoiceFunction.
const (
	ToolChoiceNone     = "none"
	ToolChoiceAuto     = "auto"
	ToolChoiceRequired = "required"
	ToolChoiceFunction = "function"
)

// Response formats (ResponseFormat.Type).
const (
	FormatText       = "text"
	FormatJSONObject = "json_object"
	FormatJSONSchema = "json_schema"
)

// Bounds OpenAI sets on chat parameters.
const (
	MaxChoices     = 128 // n
	MaxStop        = 4   // stop sequences
	MaxTopLogprobs = 20
)

// ChatRequest is a validated POST /v1/chat/completions body: every member
// sluice models is checked (a 400 naming the field otherwise) and decoded
// into the typed view below, which the translating providers read. The body
// is kept as it came: OpenAI-family providers forward it (Forward) with only
// its model rewritten, members sluice does not model passing untouched.
type ChatRequest struct {
	Model string
	// RawMessages is messages as sent (a slice of the body): what a log
	// event keeps, and what Messages decodes.
	RawMessages json.RawMessage

	Stream bool
	// IncludeUsage is stream_options.include_usage: the client wants the
	// final usage chunk. (The gateway always gets usage from the provider;
	// the chat endpoint drops that chunk for clients that did not ask.)
	IncludeUsage bool

	N                 int // 0: not given (one choice)
	Tools             []Tool
	ToolChoice        *ToolChoice // nil: not given
	ParallelToolCalls *bool
	ResponseFormat    *ResponseFormat

	MaxTokens           int64 // max_tokens; 0: not given
	MaxCompletionTokens int64 // max_completion_tokens; 0: not given
	Stop                []string
	Temperature         *float64
	TopP                *float64
	FrequencyPenalty    *float64
	PresencePenalty     *float64
	Seed                *int64
	Logprobs            bool
	TopLogprobs         *int
	ReasoningEffort     string
	User                string

	// MockResponse is LiteLLM's mock_response: answer with this text
	// without calling a provider. nil: not given.
	MockResponse *string
	// DropParams is LiteLLM's per-request drop_params: parameters the
	// provider cannot honour are dropped instead of refused.
	DropParams bool

	// Others names the members of the body, not null, that ChatRequest does
	// not model (logit_bias, metadata, audio, top_k, thinking, ...), in body
	// order. OpenAI-family providers forward them; a translating provider
	// reads the ones it knows (Extras) and refuses the rest
	// (providers.Params.Unsupported).
	Others []string

	doc
	streamOptions []byte // raw stream_options; nil when absent or null
	litellmOnly   bool   // the body has members only LiteLLM knows (Forward strips them)

	decodeMessages sync.Once
	messages       []Message
}

// Messages is the typed view of messages, decoded on first use: the parse
// checks them without copying their text (a request forwarded to an
// OpenAI-family provider goes as sent and never reads them); a translating
// provider, the mock endpoint and a token estimate do.
func (r *ChatRequest) Messages() []Message {
	r.decodeMessages.Do(func() {
		if r.RawMessages != nil {
			// Cannot fail: the parse checked the same walk (FuzzParseChatRequest).
			r.messages, _ = parseMessages(r.RawMessages, true)
		}
	})
	return r.messages
}

// MaxOutputTokens is the output bound the client set: max_completion_tokens,
// else max_tokens; 0 when neither.
func (r *ChatRequest) MaxOutputTokens() int64 {
	if r.MaxCompletionTokens > 0 {
		return r.MaxCompletionTokens
	}
	return r.MaxTokens
}

// Message is one message of the conversation.
type Message struct {
	Role string
	Name string
	// Content is the content given as a string; Parts, the content given
	// as an array of parts (nil otherwise). Both empty: no content (null or
	// absent, as an assistant message with tool calls may have).
	Content string
	Parts   []Part
	// ToolCalls are an assistant message's tool calls.
	ToolCalls []ToolCall
	// ToolCallID is the call a tool message answers.
	ToolCallID string
	// Refusal is an assistant message's refusal.
	Refusal string
	// ReasoningContent is an earlier answer's reasoning, sent back on an
	// assistant message (LiteLLM's extension).
	ReasoningContent string
	// Raw is the message as sent (a slice of the body), for members the
	// typed view does not model (cache_control, thinking_blocks, ...).
	Raw json.RawMessage
}

// Text is the message's text: Content, or its text parts joined.
func (m *Message) Text() string {
	if m.Parts == nil {
		return m.Content
	}
	var b strings.Builder
	for _, p := range m.Parts {
		if p.Type == PartText {
			b.WriteString(p.Text)
		}
	}
	return b.String()
}

// Part is one content part.
type Part struct {
	Type string // PartText, PartImageURL, PartInputAudio, PartFile, PartRefusal
	// Text is a text part's text, or a refusal part's refusal.
	Text string
	// ImageURL is an image_url part's URL (https:// or a data: URI), and
	// ImageDetail its detail ("", auto, low, high).
	ImageURL    string
	ImageDetail string
	// Audio is an input_audio part's audio.
	Audio *InputAudio
	// File is a file part's file.
	File *File
	// Raw is the part as sent (a slice of the body).
	Raw json.RawMessage
}

// InputAudio is base64 audio in a user message.
type InputAudio struct {
	Data   string // base64
	Format string // wav, mp3
}

// File is a file part: an uploaded file's id, or its bytes as base64 (or a
// data: URI) with a filename.
type File struct {
	ID   string
	Data string
	Name string
}

// ToolCall is a tool call of an assistant message (and of an answer).
type ToolCall struct {
	ID       string       `json:"id"`
	Type     string       `json:"type"` // "function"
	Function FunctionCall `json:"function"`
}

// FunctionCall is the function a tool call calls, and its arguments as a
// JSON text (the model's, not necessarily valid).
type FunctionCall struct {
	Name      string `json:"name"`
	Arguments string `json:"arguments"`
}

// Tool is a tool the model may call.
type Tool struct {
	Type string // "function", or another type OpenAI knows ("custom")
	// Function is a function tool's definition.
	Function Function
	// Raw is the tool as sent (a slice of the body).
	Raw json.RawMessage
}

// Function is a function tool's definition.
type Function struct {
	Name        string
	Description string
	// Parameters is the JSON Schema object of the arguments; nil when not
	// given.
	Parameters json.RawMessage
	Strict     *bool
}

// ToolChoice is how the model must use the tools.
type ToolChoice struct {
	// Mode is ToolChoiceNone, ToolChoiceAuto, ToolChoiceRequired, or
	// ToolChoiceFunction (Function names it); another object type OpenAI
	// knows ("allowed_tools", "custom") is kept as its type.
	Mode     string
	Function string
	// Raw is tool_choice as sent.
	Raw json.RawMessage
}

// ResponseFormat is the format the answer must take.
type ResponseFormat struct {
	Type       string // FormatText, FormatJSONObject, FormatJSONSchema
	JSONSchema *JSONSchema
}

// JSONSchema is a json_schema response format.
type JSONSchema struct {
	Name        string
	Description string
	// Schema is the JSON Schema object; nil when not given.
	Schema json.RawMessage
	Strict *bool
}

// chatMember is a member ParseChatRequest models: its index in
// chatMemberNames and in chatFields.
type chatMember uint8

const (
	memberModel chatMember = iota
	memberMessages
	memberStream
	memberStreamOptions
	memberN
	memberTools
	memberToolChoice
	memberParallelToolCalls
	memberResponseFormat
	memberMaxTokens
	memberMaxCompletionTokens
	memberStop
	memberTemperature
	memberTopP
	memberFrequencyPenalty
	memberPresencePenalty
	memberSeed
	memberLogprobs
	memberTopLogprobs
	memberReasoningEffort
	memberUser
	memberMockResponse
	memberDropParams
	chatMemberCount
)

// chatMemberNames are the modelled members' names, by chatMember.
var chatMemberNames = [chatMemberCount]string{
	memberModel: "model", memberMessages: "messages", memberStream: "stream",
	memberStreamOptions: "stream_options", memberN: "n", memberTools: "tools",
	memberToolChoice: "tool_choice", memberParallelToolCalls: "parallel_tool_calls",
	memberResponseFormat: "response_format", memberMaxTokens: "max_tokens",
	memberMaxCompletionTokens: "max_completion_tokens", memberStop: "stop",
	memberTemperature: "temperature", memberTopP: "top_p",
	memberFrequencyPenalty: "frequency_penalty", memberPresencePenalty: "presence_penalty",
	memberSeed: "seed", memberLogprobs: "logprobs", memberTopLogprobs: "top_logprobs",
	memberReasoningEffort: "reasoning_effort", memberUser: "user",
	memberMockResponse: "mock_response", memberDropParams: "drop_params",
}

// chatMemberOf finds a modelled member by name (chatMemberNames read
// backwards; TestChatMemberOf holds the two together): the body's walk asks
// it for every member, and a switch costs ~40 instructions a name where a
// scan of the names or a map cost ~160.
func chatMemberOf(name []byte) (chatMember, bool) {
	switch string(name) {
	case "model":
		return memberModel, true
	case "messages":
		return memberMessages, true
	case "stream":
		return memberStream, true
	case "stream_options":
		return memberStreamOptions, true
	case "n":
		return memberN, true
	case "tools":
		return memberTools, true
	case "tool_choice":
		return memberToolChoice, true
	case "parallel_tool_calls":
		return memberParallelToolCalls, true
	case "response_format":
		return memberResponseFormat, true
	case "max_tokens":
		return memberMaxTokens, true
	case "max_completion_tokens":
		return memberMaxCompletionTokens, true
	case "stop":
		return memberStop, true
	case "temperature":
		return memberTemperature, true
	case "top_p":
		return memberTopP, true
	case "frequency_penalty":
		return memberFrequencyPenalty, true
	case "presence_penalty":
		return memberPresencePenalty, true
	case "seed":
		return memberSeed, true
	case "logprobs":
		return memberLogprobs, true
	case "top_logprobs":
		return memberTopLogprobs, true
	case "reasoning_effort":
		return memberReasoningEffort, true
	case "user":
		return memberUser, true
	case "mock_response":
		return memberMockResponse, true
	case "drop_params":
		return memberDropParams, true
	}
	return 0, false
}

// litellmMembers are request members only LiteLLM knows; Forward removes
// them (an OpenAI-family server would refuse them).
var litellmMembers = []string{chatMemberNames[memberMockResponse], chatMemberNames[memberDropParams]}

// chatFields are the modelled members the body gives.
type chatFields struct {
	values [chatMemberCount][]byte // by chatMember; nil when absent
	given  uint32                  // bit m set: member m is given
}

// given has a bit a member: this fails to compile past 32 members.
const _ = uint32(1 << (chatMemberCount - 1))

// member returns m with its value.
func (f *chatFields) member(m chatMember) field { return field{chatMemberNames[m], f.values[m]} }

// ParseChatRequest validates a chat completions request body (see
// ChatRequest). Every problem is a 400 naming the field as OpenAI does
// ("messages[1].content[0].image_url.url"). The returned request keeps body.
func ParseChatRequest(body []byte) (*ChatRequest, error) {
	var f chatFields // on the stack
	d, others, msgsErr, err := parseChatTop(body, &f)
	if err != nil {
		return nil, err
	}
	r := &ChatRequest{doc: d, Others: others}
	if r.Model, err = modelField(f.member(memberModel), true); err != nil {
		return nil, err
	}
	msgs := f.values[memberMessages]
	if jsonscan.Null(msgs) {
		return nil, api.MissingParam("messages")
	}
	if msgsErr != nil { // the walk's check of the messages, reported in its turn
		return nil, chatTopError(msgsErr)
	}
	r.RawMessages = msgs
	// The other members given, in chatMember order: the first problem in
	// it is the one reported, and a member is read after those it depends
	// on (stream_options after stream, tool_choice after tools). The
	// members not given (most) cost nothing.
	for rest := f.given &^ (1<<memberModel | 1<<memberMessages); rest != 0; rest &= rest - 1 {
		m := chatMember(bits.TrailingZeros32(rest))
		if err := r.parseMember(m, f.values[m]); err != nil {
			return nil, err
		}
	}
	// LiteLLM's own members, null or not, are stripped by Forward.
	r.litellmOnly = f.given&(1<<memberMockResponse|1<<memberDropParams) != 0
	return r, nil
}

// parseMember reads the modelled member m (not model or messages), of
// value v, into r.
func (r *ChatRequest) parseMember(m chatMember, v []byte) (err error) {
	f := field{chatMemberNames[m], v}
	if jsonscan.Null(v) {
		return nil // null is not given: the typed view keeps its zero
	}
	switch m {
	case memberStream:
		r.Stream, _, err = boolField(f)
	case memberStreamOptions:
		if !r.Stream {
			return api.InvalidValue("stream_options", "The 'stream_options' parameter is only allowed when 'stream' is enabled.")
		}
		r.IncludeUsage, err = streamOptions(v)
		r.streamOptions = v
	case memberN:
		var n int64
		n, _, err = intField(f, 1, MaxChoices)
		r.N = int(n)
	case memberTools:
		r.Tools, err = parseTools(v)
	case memberToolChoice:
		r.ToolChoice, err = parseToolChoice(v, r.Tools)
	case memberParallelToolCalls:
		var b bool
		if b, _, err = boolField(f); err == nil {
			r.ParallelToolCalls = &b
		}
	case memberResponseFormat:
		r.ResponseFormat, err = parseResponseFormat(v)
	case memberMaxTokens:
		r.MaxTokens, _, err = intField(f, 1, math.MaxInt32)
	case memberMaxCompletionTokens:
		r.MaxCompletionTokens, _, err = intField(f, 1, math.MaxInt32)
	case memberStop:
		r.Stop, err = parseStop(v)
	case memberTemperature:
		r.Temperature, err = floatField(f, 0, 2)
	case memberTopP:
		r.TopP, err = floatField(f, 0, 1)
	case memberFrequencyPenalty:
		r.FrequencyPenalty, err = floatField(f, -2, 2)
	case memberPresencePenalty:
		r.PresencePenalty, err = floatField(f, -2, 2)
	case memberSeed:
		var seed int64
		if seed, _, err = intField(f, math.MinInt64, math.MaxInt64); err == nil {
			r.Seed = &seed
		}
	case memberLogprobs:
		r.Logprobs, _, err = boolField(f)
	case memberTopLogprobs:
		var n int64
		if n, _, err = intField(f, 0, MaxTopLogprobs); err == nil {
			k := int(n)
			r.TopLogprobs = &k
		}
	case memberReasoningEffort:
		r.ReasoningEffort, _, err = stringField(f)
	case memberUser:
		r.User, _, err = stringField(f)
	case memberMockResponse:
		var s string
		if s, _, err = stringField(f); err == nil {
			r.MockResponse = &s
		}
	case memberDropParams:
		r.DropParams, _, err = boolField(f)
	}
	return err
}

// parseChatTop is parseTop for chat: the modelled members (into f), and
// the names of the others (not null). It checks the messages too, in the
// same walk (checkMessages): msgsErr is what is wrong with them, for the
// caller to report after the members before them in its order.
func parseChatTop(body []byte, f *chatFields) (_ doc, _ []string, msgsErr error, _ error) {
	d := doc{body: body, modelStart: -1, modelEnd: -1}
	i := jsonscan.SkipSpace(body, 0)
	if i == len(body) {
		return d, nil, nil, api.InvalidJSON("Request body is empty; expected a JSON object.")
	}
	if body[i] != '{' {
		if !jsonscan.Valid(body) {
			return d, nil, nil, invalidJSON(body)
		}
		return d, nil, nil, api.InvalidJSON("Request body must be a JSON object.")
	}
	var others []string
	// The messages (the body's bulk) are checked by their own walk as the
	// body's walk reaches them; on a problem the body's walk delimits them
	// instead, and the problem waits for the body to be known JSON.
	msgsSeen := false
	messages := func(name, rest []byte) (int, bool) {
		if msgsSeen || string(name) != "messages" {
			return 0, false
		}
		msgsSeen = true
		n, valid, err := checkMessages(rest)
		if err != nil {
			msgsErr = err
			return 0, false
		}
		return n, valid
	}
	// One walk delimits the members and checks the body is JSON; only when
	// it cannot say (a refused member, a malformed body) does Valid cross
	// the body again, so that invalid JSON is reported before a member.
	valid, err := jsonscan.MembersCheckedBy(body, func(name, v []byte) error {
		if m, known := chatMemberOf(name); known {
			if f.given&(1<<m) != 0 {
				w := chatMemberNames[m]
				return api.InvalidValue(w, "'%s' is given more than once.", w)
			}
			f.values[m] = v
			f.given |= 1 << m
			if m == memberModel {
				d.modelStart, d.modelEnd = jsonscan.Span(body, v)
			}
			return nil
		}
		if !jsonscan.Null(v) {
			for _, o := range others {
				if o == string(name) {
					return api.InvalidValue(o, "'%s' is given more than once.", o)
				}
			}
			others = append(others, string(name))
		}
		return nil
	}, messages)
	if !valid && !jsonscan.Valid(body) {
		return d, nil, nil, invalidJSON(body)
	}
	if err != nil {
		return d, nil, nil, chatTopError(err)
	}
	return d, others, msgsErr, nil
}

func chatTopError(err error) error {
	var ae *api.Error
	if errors.As(err, &ae) {
		return err
	}
	return api.InvalidJSON("Request body is not valid JSON: %v.", err)
}

// OthersExcept returns the members of Others not among known: what a
// translating provider that reads known cannot honour.
func (r *ChatRequest) OthersExcept(known ...string) []string {
	var out []string
	for _, o := range r.Others {
		found := false
		for _, k := range known {
			found = found || k == o
		}
		if !found {
			out = append(out, o)
		}
	}
	return out
}

// Extras returns the raw values of the named members that the request does
// not model (see ChatRequest.Others): the provider-specific parameters a
// translating provider reads (top_k, thinking, ...). Absent and null
// members are left out.
func (r *ChatRequest) Extras(names ...string) Extras {
	var x Extras
	jsonscan.Members(r.body, func(name, v []byte) error { // the body was validated by the parse
		for _, want := range names {
			if string(name) == want && !jsonscan.Null(v) {
				if x == nil {
					x = Extras{}
				}
				x[want] = v
			}
		}
		return nil
	})
	return x
}

// Forward returns the body for an OpenAI-family provider: the client's
// bytes with model set to model and LiteLLM's own members (mock_response,
// drop_params) removed. With includeUsage, a streaming request also asks for
// the final usage chunk (stream_options.include_usage: true), which the
// gateway needs whether or not the client asked. When nothing changes the
// body itself is returned, without a copy.
func (r *ChatRequest) Forward(model string, includeUsage bool) []byte {
	addUsage := includeUsage && r.Stream && !r.IncludeUsage
	if !addUsage && !r.litellmOnly {
		return r.doc.Body(model)
	}
	var strip []string
	if r.litellmOnly {
		strip = litellmMembers
	}
	return rebuild(r.doc, model, addUsage, r.streamOptions, strip)
}

// withIncludeUsage returns the stream_options object opts with include_usage
// true and its other members as they were.
func withIncludeUsage(opts []byte) []byte {
	out := []byte(`{"include_usage":true`)
	jsonscan.Members(opts, func(name, v []byte) error {
		if string(name) != "include_usage" {
			out = append(out, ',')
			out = append(out, jsonscan.AppendString(nil, string(name))...)
			out = append(out, ':')
			out = append(out, v...)
		}
		return nil
	})
	return append(out, '}')
}

func streamOptions(v []byte) (bool, error) {
	if v[0] != '{' {
		return false, api.InvalidValue("stream_options", "Invalid type for 'stream_options': expected an object.")
	}
	var include bool
	err := jsonscan.Members(v, func(name, v []byte) error {
		if string(name) != "include_usage" || jsonscan.Null(v) {
			return nil
		}
		b, ok := jsonBool(v)
		if !ok {
			return api.InvalidValue("stream_options.include_usage", "Invalid type for 'stream_options.include_usage': expected a boolean.")
		}
		include = b
		return nil
	})
	return include, err
}
