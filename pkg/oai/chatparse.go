package oai

import (
	"errors"
	"math"
	"strconv"
	"strings"

	"github.com/sluice-gateway/sluice/pkg/api"
	"github.com/sluice-gateway/sluice/pkg/jsonscan"
)

// The parsing of a chat request's nested members: messages and their
// content parts, tool calls, tools, tool_choice, response_format, stop,
// and the typed scalar fields. Each problem is a 400 naming the member by
// its path ("messages[1].content[0].image_url.url").

// parseMessages checks messages, a non-empty array of message objects, and
// with decode also decodes them. Without, it is the same walk with the
// same verdict and errors, but long strings (content, text, URLs, data,
// arguments) are only checked, not copied, and no Message is kept: what
// ParseChatRequest runs on every call, since a forwarded request never reads
// the typed view (ChatRequest.Messages decodes it on first use). The body
// must have passed jsonscan.Valid.
func parseMessages(v []byte, decode bool) ([]Message, error) {
	msgs, _, _, err := walkMessages(v, decode, false)
	return msgs, err
}

// checkMessages is the check-only parseMessages of the array that starts
// rest (what follows it unread) as the body's one checked walk crosses it
// (parseChatTop): it returns the array's length and whether it is JSON as
// jsonscan.Valid would say (false: not known), so that the messages'
// strings are crossed once, not checked by the walk and then read again.
// Its error is parseMessages' only once the body is known to be JSON.
func checkMessages(rest []byte) (size int, valid bool, err error) {
	_, size, valid, err = walkMessages(rest, false, true)
	return size, valid, err
}

// walkMessages is parseMessages, or with check checkMessages.
func walkMessages(v []byte, decode, check bool) (msgs []Message, size int, valid bool, err error) {
	if v[0] != '[' {
		return nil, 0, false, api.InvalidValue("messages", "Invalid type for 'messages': expected an array of message objects.")
	}
	if decode {
		msgs = make([]Message, 0, 4)
	}
	n := 0
	valid = check
	// Each message is delimited by its own walk (parseMessage), not by
	// Elements first: its content is crossed once here, not twice.
	each := func(rest []byte) (int, error) {
		var m Message
		size, ok, err := parseMessage(&m, rest, n, decode, check)
		if err != nil {
			return 0, err
		}
		valid = valid && ok
		n++
		if decode {
			msgs = append(msgs, m)
		}
		return size, nil
	}
	if check {
		size, err = jsonscan.ElementsPrefixEnd(v, each)
	} else {
		size, err = len(v), jsonscan.ElementsPrefix(v, each)
	}
	if err != nil {
		return nil, 0, false, err
	}
	if n == 0 {
		return nil, 0, false, api.InvalidValue("messages", "'messages' must not be an empty array.")
	}
	return msgs, size, valid, nil
}

// The members of a message object, by their index in messageMembers:
// message reads them by index, not name (it runs for every message of
// every request).
const (
	msgRole = iota
	msgContent
	msgName
	msgToolCalls
	msgToolCallID
	msgRefusal
	msgReasoningContent
)

var messageMembers = []string{
	msgRole: "role", msgContent: "content", msgName: "name", msgToolCalls: "tool_calls",
	msgToolCallID: "tool_call_id", msgRefusal: "refusal", msgReasoningContent: "reasoning_content",
}

// parseMessage reads message i, at the start of rest (what follows it is
// not read), and returns its size; with check, also whether it is JSON as
// jsonscan.Valid would say (false: not known).
func parseMessage(m *Message, rest []byte, i int, decode, check bool) (size int, valid bool, err error) {
	var o object // set in place: a composite literal is built aside and copied
	o.at.steps[0], o.at.n = step{name: "messages", element: true, index: i}, 1
	o.names = messageMembers
	size, valid, err = o.walk(rest, "a message object", true, check)
	if err != nil {
		return 0, false, err
	}
	m.Raw = rest[:size]
	return size, valid, o.message(m, decode)
}

// message reads the message object o into m.
func (o *object) message(m *Message, decode bool) (err error) {
	o.decode = decode
	if m.Role, _, err = o.strAt(msgRole); err != nil {
		return err
	}
	switch m.Role {
	case RoleSystem, RoleDeveloper, RoleUser, RoleAssistant, RoleTool, RoleFunction:
	case "":
		return api.MissingParam(o.pathAt(msgRole))
	default:
		return api.InvalidValue(o.pathAt(msgRole), "Invalid value for '%s': %q. Supported values are: 'system', 'developer', 'user', 'assistant', 'tool' and 'function'.", o.pathAt(msgRole), truncate(m.Role, 40))
	}
	if m.Name, _, err = o.strAt(msgName); err != nil {
		return err
	}
	content := o.value(msgContent)
	if content != nil {
		switch content[0] {
		case '"':
			if m.Content, _, err = o.textAt(msgContent); err != nil {
				return err
			}
		case '[':
			if m.Parts, err = parseParts(content, o.member(messageMembers[msgContent]), m.Role, decode); err != nil {
				return err
			}
		default:
			return api.InvalidValue(o.pathAt(msgContent), "Invalid type for '%s': expected a string or an array of content parts.", o.pathAt(msgContent))
		}
	}
	switch m.Role {
	case RoleAssistant:
		if v := o.value(msgToolCalls); v != nil {
			if m.ToolCalls, err = parseToolCalls(v, o.member(messageMembers[msgToolCalls]), decode); err != nil {
				return err
			}
		}
		if m.Refusal, _, err = o.textAt(msgRefusal); err != nil {
			return err
		}
		if m.ReasoningContent, _, err = o.textAt(msgReasoningContent); err != nil {
			return err
		}
	case RoleTool:
		if m.ToolCallID, _, err = o.strAt(msgToolCallID); err != nil {
			return err
		}
		if m.ToolCallID == "" {
			return api.MissingParam(o.pathAt(msgToolCallID))
		}
		if content == nil {
			return api.MissingParam(o.pathAt(msgContent))
		}
	case RoleFunction:
		if m.Name == "" {
			return api.MissingParam(o.pathAt(msgName))
		}
	default: // system, developer, user
		if content == nil {
			return api.MissingParam(o.pathAt(msgContent))
		}
	}
	return nil
}

// object holds the wanted members of one JSON object of the request, found
// in one pass. at is where it is ("messages[0]"), put into words only for
// an error.
type object struct {
	at    place
	names []string
	vals  [maxWanted][]byte // an array, not a slice: no allocation per object
	// decode: text copies its strings; else it only checks them (see
	// parseMessages).
	decode bool
}

// maxWanted bounds the members an object type models (messageMembers has 7).
const maxWanted = 8

// newObject reads the members names of the object el; what is the kind
// of object expected, for the error when el is not one. A wanted member
// given twice is refused: a provider could read either copy.
func newObject(el []byte, at place, what string, names []string) (o object, err error) {
	o.at, o.names = at, names // in place, as parseMessage's
	_, _, err = o.walk(el, what, false, false)
	return o, err
}

// walk reads o's members (o.names) of el, as newObject; with prefix, over
// the object that starts el, what follows it unread
// (jsonscan.MembersPrefix), size being the object's length; with check
// (and prefix) valid says whether the object is JSON as jsonscan.Valid
// would (false: not known). It fills o in place: an object is a few
// hundred bytes, not copied on its way back.
func (o *object) walk(el []byte, what string, prefix, check bool) (size int, valid bool, err error) {
	if len(o.names) > maxWanted {
		panic("oai: newObject wants more members than maxWanted") // the lists are constants
	}
	if len(el) == 0 || el[0] != '{' {
		at := o.at.String()
		return 0, false, api.InvalidValue(at, "Invalid type for '%s': expected %s.", at, what)
	}
	member := func(name, v []byte) error {
		for i, w := range o.names {
			if string(name) == w {
				if o.vals[i] != nil {
					return api.InvalidValue(o.path(w), "'%s' is given more than once.", o.path(w))
				}
				o.vals[i] = v
				return nil
			}
		}
		return nil
	}
	switch {
	case check:
		size, valid, err = jsonscan.MembersPrefixChecked(el, member)
	case prefix:
		size, err = jsonscan.MembersPrefix(el, member)
	default:
		size, err = len(el), jsonscan.Members(el, member)
	}
	if err != nil {
		var ae *api.Error
		if errors.As(err, &ae) {
			return 0, false, err
		}
		at := o.at.String()
		return 0, false, api.InvalidValue(at, "'%s' is not a valid JSON object.", at)
	}
	return size, valid, nil
}

// pathAt is member i's path, for an error.
func (o *object) pathAt(i int) string { return o.path(o.names[i]) }

func (o *object) path(name string) string {
	at := o.at.String()
	if at == "" {
		return name
	}
	return at + "." + name
}

// place is where an object is in the request ("messages[0].content[1]"):
// the steps that lead to it, put into words (String) only for an error —
// every content part's and tool call's path, built as it was read, cost an
// allocation or two. (Steps, not a pointer to the enclosing object: that
// would move the objects, kept on the stack, to the heap.)
type place struct {
	steps [maxDepth]step
	n     int
}

// maxDepth bounds the steps to an object (messages[0].tool_calls[1].function).
const maxDepth = 3

// step is a member's name, and with element its index in that member's
// array.
type step struct {
	name    string
	element bool
	index   int
}

func rootPlace(path string) place { return place{steps: [maxDepth]step{{name: path}}, n: 1} }

// member is the place of o's member name.
func (o *object) member(name string) place {
	p := o.at
	p.steps[p.n] = step{name: name} // panics past maxDepth: the parsers' depth is fixed
	p.n++
	return p
}

// elem is the place of element i of the array at p.
func (p place) elem(i int) place {
	p.steps[p.n-1].element, p.steps[p.n-1].index = true, i
	return p
}

func (p place) String() string {
	var b strings.Builder
	for i, s := range p.steps[:p.n] {
		if i > 0 {
			b.WriteByte('.')
		}
		b.WriteString(s.name)
		if s.element {
			b.WriteString("[" + strconv.Itoa(s.index) + "]")
		}
	}
	return b.String()
}

// index is the index of member name in o.names (a constant of the caller's).
func (o *object) index(name string) int {
	for i, w := range o.names {
		if w == name {
			return i
		}
	}
	panic("oai: " + name + " is not a member the object reads")
}

// get returns member name's raw value; nil when absent or null.
func (o *object) get(name string) []byte { return o.value(o.index(name)) }

// value is get of member i (o.names[i]).
func (o *object) value(i int) []byte {
	if jsonscan.Null(o.vals[i]) {
		return nil
	}
	return o.vals[i]
}

// str decodes an optional string member; absent and null give "".
func (o *object) str(name string) (string, bool, error) { return o.strAt(o.index(name)) }

// strAt is str of member i.
func (o *object) strAt(i int) (string, bool, error) {
	v := o.value(i)
	if v == nil {
		return "", false, nil
	}
	if v[0] != '"' {
		return "", false, api.InvalidValue(o.pathAt(i), "Invalid type for '%s': expected a string.", o.pathAt(i))
	}
	if s, ok := interned(v); ok {
		return s, true, nil
	}
	s, err := jsonscan.String(v)
	if err != nil {
		return "", false, api.InvalidValue(o.pathAt(i), "Invalid string for '%s'.", o.pathAt(i))
	}
	return s, true, nil
}

// text is str for a member that may be long (a message's content, a part's
// text, an image URL, audio or file data, a tool call's arguments). Without
// o.decode it checks the member without copying it: the string returned is
// then only empty or not (notCopied), as the value is — all the checks read
// of these members.
func (o *object) text(name string) (string, bool, error) { return o.textAt(o.index(name)) }

// textAt is text of member i.
func (o *object) textAt(i int) (string, bool, error) {
	if o.decode {
		return o.strAt(i)
	}
	v := o.value(i)
	if v == nil {
		return "", false, nil
	}
	if v[0] != '"' {
		return "", false, api.InvalidValue(o.pathAt(i), "Invalid type for '%s': expected a string.", o.pathAt(i))
	}
	// The body passed jsonscan.Valid, so v is a well-formed string literal,
	// and one with anything between its quotes decodes to a non-empty string.
	if len(v) > 2 {
		return notCopied, true, nil
	}
	return "", true, nil
}

// notCopied stands for a non-empty string a check-only parse did not copy.
const notCopied = "\x00"

// internedValues are the short values the request's enumerated members
// take (roles, part types, image detail, a tool call's type): str returns
// these constants instead of allocating a copy.
var internedValues = [...]string{
	RoleSystem, RoleDeveloper, RoleUser, RoleAssistant, RoleTool, RoleFunction,
	PartText, PartImageURL, PartInputAudio, PartFile, PartRefusal,
	"auto", "low", "high",
}

// interned returns the constant for a string literal among internedValues.
func interned(lit []byte) (string, bool) {
	if len(lit) < 2 || len(lit) > 13 {
		return "", false
	}
	inner := lit[1 : len(lit)-1]
	for _, s := range &internedValues { // &: ranging over the array would copy it
		if string(inner) == s {
			return s, true
		}
	}
	return "", false
}

// boolean decodes an optional boolean member; absent and null give false.
func (o *object) boolean(name string) (value, given bool, err error) {
	v := o.get(name)
	if v == nil {
		return false, false, nil
	}
	b, ok := jsonBool(v)
	if !ok {
		return false, false, api.InvalidValue(o.path(name), "Invalid type for '%s': expected a boolean.", o.path(name))
	}
	return b, true, nil
}

// Content parts each role's messages may have.
var (
	textParts      = []string{PartText}
	userParts      = []string{PartText, PartImageURL, PartInputAudio, PartFile}
	assistantParts = []string{PartText, PartRefusal}
)

// parseParts checks and decodes a content array. System, developer and tool
// messages take text parts only; assistant messages text and refusal parts;
// user messages text, image_url, input_audio and file parts.
func parseParts(v []byte, at place, role string, decode bool) ([]Part, error) {
	allowed := textParts
	switch role {
	case RoleUser:
		allowed = userParts
	case RoleAssistant:
		allowed = assistantParts
	}
	var parts []Part
	if decode {
		parts = make([]Part, 0, 2)
	}
	n := 0
	err := jsonscan.Elements(v, func(el []byte) error {
		p, err := parsePart(el, at.elem(n), role, allowed, decode)
		if err != nil {
			return err
		}
		n++
		if decode {
			parts = append(parts, p)
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	if n == 0 && role != RoleAssistant {
		return nil, api.InvalidValue(at.String(), "'%s' must not be an empty array.", at.String())
	}
	return parts, nil
}

var (
	partMembers  = []string{"type", "text", "image_url", "input_audio", "file", "refusal"}
	imageMembers = []string{"url", "detail"}
	audioMembers = []string{"data", "format"}
	fileMembers  = []string{"file_id", "file_data", "filename"}
)

func parsePart(el []byte, at place, role string, allowed []string, decode bool) (Part, error) {
	p := Part{Raw: el}
	o, err := newObject(el, at, "a content part object", partMembers)
	if err != nil {
		return p, err
	}
	o.decode = decode
	if p.Type, _, err = o.str("type"); err != nil {
		return p, err
	}
	if p.Type == "" {
		return p, api.MissingParam(o.path("type"))
	}
	ok := false
	for _, a := range allowed {
		ok = ok || a == p.Type
	}
	if !ok {
		return p, api.InvalidValue(o.path("type"), "Invalid value for '%s': %q; the content parts of a %s message may be of type '%s'.", o.path("type"), truncate(p.Type, 40), role, strings.Join(allowed, "', '"))
	}
	switch p.Type {
	case PartText, PartRefusal:
		var given bool
		if p.Text, given, err = o.text(p.Type); err != nil {
			return p, err
		}
		if !given {
			return p, api.MissingParam(o.path(p.Type))
		}
	case PartImageURL:
		if o.get("image_url") == nil {
			return p, api.MissingParam(o.path("image_url"))
		}
		img, err := newObject(o.get("image_url"), o.member("image_url"), "an object with a 'url'", imageMembers)
		if err != nil {
			return p, err
		}
		img.decode = decode
		if p.ImageURL, _, err = img.text("url"); err != nil {
			return p, err
		}
		if p.ImageURL == "" {
			return p, api.MissingParam(img.path("url"))
		}
		if p.ImageDetail, _, err = img.str("detail"); err != nil {
			return p, err
		}
		switch p.ImageDetail {
		case "", "auto", "low", "high":
		default:
			return p, api.InvalidValue(img.path("detail"), "Invalid value for '%s': %q. Supported values are: 'auto', 'low' and 'high'.", img.path("detail"), truncate(p.ImageDetail, 40))
		}
	case PartInputAudio:
		if o.get("input_audio") == nil {
			return p, api.MissingParam(o.path("input_audio"))
		}
		a, err := newObject(o.get("input_audio"), o.member("input_audio"), "an object with 'data' and 'format'", audioMembers)
		if err != nil {
			return p, err
		}
		a.decode = decode
		p.Audio = &InputAudio{}
		if p.Audio.Data, _, err = a.text("data"); err != nil {
			return p, err
		}
		if p.Audio.Format, _, err = a.str("format"); err != nil {
			return p, err
		}
		if p.Audio.Data == "" {
			return p, api.MissingParam(a.path("data"))
		}
		if p.Audio.Format == "" {
			return p, api.MissingParam(a.path("format"))
		}
	case PartFile:
		if o.get("file") == nil {
			return p, api.MissingParam(o.path("file"))
		}
		file, err := newObject(o.get("file"), o.member("file"), "an object with a 'file_id' or 'file_data'", fileMembers)
		if err != nil {
			return p, err
		}
		file.decode = decode
		p.File = &File{}
		if p.File.ID, _, err = file.str("file_id"); err != nil {
			return p, err
		}
		if p.File.Data, _, err = file.text("file_data"); err != nil {
			return p, err
		}
		if p.File.Name, _, err = file.str("filename"); err != nil {
			return p, err
		}
		if p.File.ID == "" && p.File.Data == "" {
			return p, api.InvalidValue(file.at.String(), "'%s' must have a 'file_id' or 'file_data'.", file.at.String())
		}
	}
	return p, nil
}

var (
	toolCallMembers     = []string{"id", "type", "function"}
	functionCallMembers = []string{"name", "arguments"}
)

func parseToolCalls(v []byte, at place, decode bool) ([]ToolCall, error) {
	if v[0] != '[' {
		return nil, api.InvalidValue(at.String(), "Invalid type for '%s': expected an array of tool calls.", at.String())
	}
	var calls []ToolCall
	n := 0
	err := jsonscan.Elements(v, func(el []byte) error {
		o, err := newObject(el, at.elem(n), "a tool call object", toolCallMembers)
		if err != nil {
			return err
		}
		var c ToolCall
		if c.ID, _, err = o.str("id"); err != nil {
			return err
		}
		if c.ID == "" {
			return api.MissingParam(o.path("id"))
		}
		if c.Type, _, err = o.str("type"); err != nil {
			return err
		}
		if c.Type != "function" {
			return api.InvalidValue(o.path("type"), "Invalid value for '%s': expected 'function'.", o.path("type"))
		}
		if o.get("function") == nil {
			return api.MissingParam(o.path("function"))
		}
		fn, err := newObject(o.get("function"), o.member("function"), "an object with 'name' and 'arguments'", functionCallMembers)
		if err != nil {
			return err
		}
		if c.Function.Name, _, err = fn.str("name"); err != nil {
			return err
		}
		if c.Function.Name == "" {
			return api.MissingParam(fn.path("name"))
		}
		fn.decode = decode
		if c.Function.Arguments, _, err = fn.text("arguments"); err != nil {
			return err
		}
		n++
		if decode {
			calls = append(calls, c)
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return calls, nil
}

// validFunctionName reports whether s is what OpenAI accepts as a
// function's (and a JSON schema format's) name: ^[a-zA-Z0-9_-]{1,64}$ (a
// loop over the bytes: the regexp cost ~1,200 instructions a tool).
func validFunctionName(s string) bool {
	if len(s) == 0 || len(s) > 64 {
		return false
	}
	for i := 0; i < len(s); i++ {
		switch c := s[i]; {
		case 'a' <= c && c <= 'z', 'A' <= c && c <= 'Z', '0' <= c && c <= '9', c == '_', c == '-':
		default:
			return false
		}
	}
	return true
}

var (
	toolMembers     = []string{"type", "function"}
	functionMembers = []string{"name", "description", "parameters", "strict"}
)

func parseTools(v []byte) ([]Tool, error) {
	if v[0] != '[' {
		return nil, api.InvalidValue("tools", "Invalid type for 'tools': expected an array of tools.")
	}
	var tools []Tool
	err := jsonscan.Elements(v, func(el []byte) error {
		t := Tool{Raw: el}
		o, err := newObject(el, rootPlace("tools").elem(len(tools)), "a tool object", toolMembers)
		if err != nil {
			return err
		}
		if t.Type, _, err = o.str("type"); err != nil {
			return err
		}
		switch t.Type {
		case "function":
		case "custom":
			tools = append(tools, t)
			return nil
		case "":
			return api.MissingParam(o.path("type"))
		default:
			return api.InvalidValue(o.path("type"), "Invalid value for '%s': %q. Supported values are: 'function' and 'custom'.", o.path("type"), truncate(t.Type, 40))
		}
		if o.get("function") == nil {
			return api.MissingParam(o.path("function"))
		}
		fn, err := newObject(o.get("function"), o.member("function"), "an object", functionMembers)
		if err != nil {
			return err
		}
		if t.Function.Name, _, err = fn.str("name"); err != nil {
			return err
		}
		if t.Function.Name == "" {
			return api.MissingParam(fn.path("name"))
		}
		if !validFunctionName(t.Function.Name) {
			return api.InvalidValue(fn.path("name"), "Invalid '%s': %q. Expected a string that matches the pattern '^[a-zA-Z0-9_-]{1,64}$'.", fn.path("name"), truncate(t.Function.Name, 80))
		}
		if t.Function.Description, _, err = fn.str("description"); err != nil {
			return err
		}
		if p := fn.get("parameters"); p != nil {
			if p[0] != '{' {
				return api.InvalidValue(fn.path("parameters"), "Invalid type for '%s': expected a JSON Schema object.", fn.path("parameters"))
			}
			t.Function.Parameters = p
		}
		if b, given, err := fn.boolean("strict"); err != nil {
			return err
		} else if given {
			t.Function.Strict = &b
		}
		tools = append(tools, t)
		return nil
	})
	if err != nil {
		return nil, err
	}
	return tools, nil
}

var (
	toolChoiceMembers = []string{"type", "function"}
	nameMember        = []string{"name"}
)

func parseToolChoice(v []byte, tools []Tool) (*ToolChoice, error) {
	c := &ToolChoice{Raw: v}
	if v[0] == '"' {
		s, _ := jsonscan.String(v)
		switch s {
		case ToolChoiceNone, ToolChoiceAuto, ToolChoiceRequired:
			c.Mode = s
		default:
			return nil, api.InvalidValue("tool_choice", "Invalid value for 'tool_choice': %q. Supported values are: 'none', 'auto' and 'required', or an object naming a function.", truncate(s, 40))
		}
		if s == ToolChoiceRequired && len(tools) == 0 {
			return nil, api.InvalidValue("tool_choice", "'tool_choice' is 'required' but no 'tools' are given.")
		}
		return c, nil
	}
	o, err := newObject(v, rootPlace("tool_choice"), "a string or an object", toolChoiceMembers)
	if err != nil {
		return nil, err
	}
	typ, _, err := o.str("type")
	if err != nil {
		return nil, err
	}
	switch typ {
	case "function":
	case "allowed_tools", "custom":
		c.Mode = typ
		return c, nil
	case "":
		return nil, api.MissingParam("tool_choice.type")
	default:
		return nil, api.InvalidValue("tool_choice.type", "Invalid value for 'tool_choice.type': %q. Supported values are: 'function', 'allowed_tools' and 'custom'.", truncate(typ, 40))
	}
	if o.get("function") == nil {
		return nil, api.MissingParam("tool_choice.function")
	}
	fn, err := newObject(o.get("function"), rootPlace("tool_choice.function"), "an object with a 'name'", nameMember)
	if err != nil {
		return nil, err
	}
	if c.Function, _, err = fn.str("name"); err != nil {
		return nil, err
	}
	if c.Function == "" {
		return nil, api.MissingParam("tool_choice.function.name")
	}
	found := false
	for _, t := range tools {
		found = found || (t.Type == "function" && t.Function.Name == c.Function)
	}
	if !found {
		return nil, api.InvalidValue("tool_choice.function.name", "'tool_choice' names function %q, which is not among 'tools'.", truncate(c.Function, 80))
	}
	c.Mode = ToolChoiceFunction
	return c, nil
}

var (
	responseFormatMembers = []string{"type", "json_schema"}
	jsonSchemaMembers     = []string{"name", "description", "schema", "strict"}
)

func parseResponseFormat(v []byte) (*ResponseFormat, error) {
	o, err := newObject(v, rootPlace("response_format"), "an object", responseFormatMembers)
	if err != nil {
		return nil, err
	}
	rf := &ResponseFormat{}
	if rf.Type, _, err = o.str("type"); err != nil {
		return nil, err
	}
	switch rf.Type {
	case FormatText, FormatJSONObject:
		return rf, nil
	case FormatJSONSchema:
	case "":
		return nil, api.MissingParam("response_format.type")
	default:
		return nil, api.InvalidValue("response_format.type", "Invalid value for 'response_format.type': %q. Supported values are: 'text', 'json_object' and 'json_schema'.", truncate(rf.Type, 40))
	}
	if o.get("json_schema") == nil {
		return nil, api.MissingParam("response_format.json_schema")
	}
	js, err := newObject(o.get("json_schema"), rootPlace("response_format.json_schema"), "an object", jsonSchemaMembers)
	if err != nil {
		return nil, err
	}
	s := &JSONSchema{}
	if s.Name, _, err = js.str("name"); err != nil {
		return nil, err
	}
	if s.Name == "" {
		return nil, api.MissingParam("response_format.json_schema.name")
	}
	if !validFunctionName(s.Name) {
		return nil, api.InvalidValue("response_format.json_schema.name", "Invalid 'response_format.json_schema.name': %q. Expected a string that matches the pattern '^[a-zA-Z0-9_-]{1,64}$'.", truncate(s.Name, 80))
	}
	if s.Description, _, err = js.str("description"); err != nil {
		return nil, err
	}
	if sch := js.get("schema"); sch != nil {
		if sch[0] != '{' {
			return nil, api.InvalidValue("response_format.json_schema.schema", "Invalid type for 'response_format.json_schema.schema': expected a JSON Schema object.")
		}
		s.Schema = sch
	}
	if b, given, err := js.boolean("strict"); err != nil {
		return nil, err
	} else if given {
		s.Strict = &b
	}
	rf.JSONSchema = s
	return rf, nil
}

func parseStop(v []byte) ([]string, error) {
	switch v[0] {
	case '"':
		s, err := jsonscan.String(v)
		if err != nil {
			return nil, api.InvalidValue("stop", "Invalid string for 'stop'.")
		}
		return []string{s}, nil
	case '[':
	default:
		return nil, api.InvalidValue("stop", "Invalid type for 'stop': expected a string or an array of strings.")
	}
	var stop []string
	err := jsonscan.Elements(v, func(el []byte) error {
		if el[0] != '"' {
			return api.InvalidValue("stop", "Invalid type for 'stop[%d]': expected a string.", len(stop))
		}
		s, err := jsonscan.String(el)
		if err != nil {
			return api.InvalidValue("stop", "Invalid string for 'stop[%d]'.", len(stop))
		}
		stop = append(stop, s)
		return nil
	})
	if err != nil {
		return nil, err
	}
	if len(stop) > MaxStop {
		return nil, api.InvalidValue("stop", "'stop' has %d sequences; at most %d are allowed.", len(stop), MaxStop)
	}
	return stop, nil
}

// boolField decodes an optional boolean member; absent and null give false.
func boolField(m field) (value, given bool, err error) {
	name, v := m.name, m.value
	if jsonscan.Null(v) {
		return false, false, nil
	}
	b, ok := jsonBool(v)
	if !ok {
		return false, false, api.InvalidValue(name, "Invalid type for '%s': expected a boolean.", name)
	}
	return b, true, nil
}

func jsonBool(v []byte) (bool, bool) {
	switch string(v) {
	case "true":
		return true, true
	case "false":
		return false, true
	}
	return false, false
}

// intField decodes an optional integer member within [min, max]; absent and
// null give 0.
func intField(m field, min, max int64) (value int64, given bool, err error) {
	name, v := m.name, m.value
	if jsonscan.Null(v) {
		return 0, false, nil
	}
	n, plain := jsonscan.PlainInt(v) // the usual form (256), read without strconv
	if !plain {
		var perr error
		if n, perr = strconv.ParseInt(string(v), 10, 64); perr != nil {
			// 1e3 and 5.0 are integers too, as OpenAI reads them.
			fl, ferr := strconv.ParseFloat(string(v), 64)
			if ferr != nil || !jsonscan.ValidNumber(v) || fl != math.Trunc(fl) || fl < -(1<<53) || fl > 1<<53 {
				return 0, false, api.InvalidValue(name, "Invalid type for '%s': expected an integer, got %s.", name, truncate(string(v), 40))
			}
			n = int64(fl)
		}
	}
	if n < min || n > max {
		return 0, false, api.InvalidValue(name, "Invalid value for '%s': %d is out of range [%d, %d].", name, n, min, max)
	}
	return n, true, nil
}

// floatField decodes an optional number member within [min, max]; absent
// and null give nil.
func floatField(m field, min, max float64) (*float64, error) {
	name, v := m.name, m.value
	if jsonscan.Null(v) {
		return nil, nil
	}
	if !jsonscan.ValidNumber(v) {
		return nil, api.InvalidValue(name, "Invalid type for '%s': expected a number.", name)
	}
	x, err := strconv.ParseFloat(string(v), 64)
	if err != nil {
		return nil, api.InvalidValue(name, "Invalid type for '%s': expected a number.", name)
	}
	if x < min || x > max {
		return nil, api.InvalidValue(name, "Invalid value for '%s': %s is out of range [%g, %g].", name, truncate(string(v), 40), min, max)
	}
	return &x, nil
}
