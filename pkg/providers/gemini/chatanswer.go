package gemini

import (
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"strings"
	"time"

	"github.com/sluice-gateway/sluice/pkg/ids"
	"github.com/sluice-gateway/sluice/pkg/jsonscan"
	"github.com/sluice-gateway/sluice/pkg/oai"
)

// A GenerateContentResponse — the whole answer, or one event of a stream —
// read as slices of the document (pkg/jsonscan): nothing is decoded that is
// copied through.
type response struct {
	candidates []byte // array
	usage      []byte // usageMetadata
	feedback   []byte // promptFeedback
	err        []byte // error (a stream's in-band error)
}

func parseResponse(doc []byte) (response, error) {
	var r response
	err := jsonscan.Members(doc, func(name, v []byte) error {
		if jsonscan.Null(v) {
			return nil
		}
		switch string(name) {
		case "candidates":
			if v[0] != '[' {
				return errors.New("candidates is not an array")
			}
			r.candidates = v
		case "usageMetadata":
			r.usage = v
		case "promptFeedback":
			r.feedback = v
		case "error":
			r.err = v
		}
		return nil
	})
	return r, err
}

// candidate is one candidate of a response.
type candidate struct {
	index   int
	content []byte // Content object; nil when absent
	finish  string // finishReason; "" until its last event
}

func parseCandidate(doc []byte) (candidate, error) {
	var c candidate
	err := jsonscan.Members(doc, func(name, v []byte) error {
		if jsonscan.Null(v) {
			return nil
		}
		switch string(name) {
		case "index":
			n, ok := jsonscan.Count(v)
			if !ok || n >= oai.MaxChoices {
				return fmt.Errorf("candidate index %.20s is out of range", v)
			}
			c.index = int(n)
		case "content":
			c.content = v
		case "finishReason":
			s, err := jsonscan.String(v)
			if err != nil {
				return errors.New("finishReason is not a string")
			}
			c.finish = s
		}
		return nil
	})
	return c, err
}

// answerPart is one part of a candidate's content. text and signature are JSON
// string literals as the answer holds them (checked: safe to copy into
// another JSON document).
type answerPart struct {
	text      []byte
	thought   bool
	signature []byte
	call      []byte // functionCall object
}

// eachPart calls f with each part of a Content object.
func eachPart(content []byte, f func(p answerPart) error) error {
	if content == nil {
		return nil
	}
	var parts []byte
	if err := jsonscan.Members(content, func(name, v []byte) error {
		if string(name) == "parts" && !jsonscan.Null(v) {
			parts = v
		}
		return nil
	}); err != nil {
		return err
	}
	if parts == nil {
		return nil
	}
	return jsonscan.Elements(parts, func(el []byte) error {
		var p answerPart
		err := jsonscan.Members(el, func(name, v []byte) error {
			if jsonscan.Null(v) {
				return nil
			}
			switch string(name) {
			case "text":
				if !validLiteral(v) {
					return errors.New("a part's text is not a JSON string")
				}
				p.text = v
			case "thought":
				p.thought = string(v) == "true"
			case "thoughtSignature":
				if !validLiteral(v) {
					return errors.New("a part's thoughtSignature is not a JSON string")
				}
				p.signature = v
			case "functionCall":
				if v[0] != '{' {
					return errors.New("a part's functionCall is not an object")
				}
				p.call = v
			}
			return nil
		})
		if err != nil {
			return err
		}
		return f(p)
	})
}

// validLiteral reports whether v is a JSON string literal that can be
// copied as it is: jsonscan found its end without a control character, so
// only its escapes are left to check.
func validLiteral(v []byte) bool {
	if len(v) < 2 || v[0] != '"' {
		return false
	}
	if e, err := jsonscan.StringEnd(v, 0); err != nil || e != len(v) {
		return false
	}
	for _, c := range v[1 : len(v)-1] {
		if c == '\\' {
			return json.Valid(v)
		}
	}
	return true
}

// parseCall reads a functionCall: its name and args (a JSON object; "{}"
// when absent).
func parseCall(doc []byte) (name string, args []byte, err error) {
	err = jsonscan.Members(doc, func(k, v []byte) error {
		switch string(k) {
		case "name":
			s, err := jsonscan.String(v)
			if err != nil {
				return errors.New("functionCall.name is not a string")
			}
			name = s
		case "args":
			if !jsonscan.Null(v) {
				if v[0] != '{' {
					return errors.New("functionCall.args is not an object")
				}
				args = v
			}
		}
		return nil
	})
	if err == nil && name == "" {
		err = errors.New("a functionCall has no name")
	}
	if args == nil {
		args = []byte("{}")
	}
	return name, args, err
}

// parseUsage reads usageMetadata (UsageMetadata.OpenAI).
func parseUsage(doc []byte) (oai.Usage, error) {
	var u UsageMetadata
	if !u.Decode(doc) || !jsonscan.NonNegative(u.Fields()) {
		return oai.Usage{}, errors.New("usageMetadata: a token count is not a count")
	}
	return u.OpenAI(), nil
}

// blockReason reads promptFeedback: why the prompt was blocked ("" when it
// was not), with Google's explanation if it gave one.
func blockReason(feedback []byte) (reason, message string) {
	if feedback == nil {
		return "", ""
	}
	s := jsonscan.Strings(feedback, "blockReason", "blockReasonMessage")
	reason, message = s[0], s[1]
	if reason == "BLOCKED_REASON_UNSPECIFIED" {
		reason = "OTHER"
	}
	return reason, message
}

// blockedMessage is the refusal sluice answers for a blocked prompt.
func blockedMessage(reason, message string) string {
	s := "Gemini blocked the prompt (" + reason + ")"
	if message != "" {
		return s + ": " + message
	}
	return s + "."
}

// finishReason maps a candidate's finishReason to OpenAI's (as LiteLLM
// does): a stop after function calls is tool_calls; safety, recitation,
// blocklist and the like are content_filter.
func finishReason(reason string, calls bool) string {
	switch reason {
	case "MAX_TOKENS":
		return oai.FinishLength
	case "SAFETY", "RECITATION", "LANGUAGE", "OTHER", "BLOCKLIST", "PROHIBITED_CONTENT", "SPII",
		"IMAGE_SAFETY", "IMAGE_PROHIBITED_CONTENT", "IMAGE_RECITATION", "IMAGE_OTHER":
		return oai.FinishContentFilter
	}
	if calls {
		return oai.FinishToolCalls
	}
	return oai.FinishStop
}

// A thought signature rides in the id of the tool call it came with, after
// this separator (LiteLLM's convention), so that an OpenAI client sending
// the call back returns the signature to Gemini, which requires it of
// Gemini 3's function calls.
const thoughtSeparator = "__thought__"

// toolCallPrefix starts the ids of tool calls, which Gemini does not name.
const toolCallPrefix = "call_"

func toolCallID(signature string) string {
	id := ids.New(toolCallPrefix)
	if signature == "" {
		return id
	}
	return id + thoughtSeparator + signature
}

// splitToolCallID returns a tool call id's own part and the thought
// signature it carries ("" when none).
func splitToolCallID(id string) (base, signature string) {
	base, signature, _ = strings.Cut(id, thoughtSeparator)
	return base, signature
}

// translateAnswer turns a generateContent answer into a chat.completion
// for model. n is the number of choices asked for (a blocked prompt gets
// that many refusals).
func translateAnswer(doc []byte, model string, n int) ([]byte, error) {
	r, err := parseResponse(doc)
	if err != nil {
		return nil, err
	}
	out := oai.ChatCompletion{ID: oai.NewChatID(), Object: oai.ObjectChatCompletion, Created: time.Now().Unix(), Model: model}
	var usage *oai.Usage
	if r.usage != nil {
		u, err := parseUsage(r.usage)
		if err != nil {
			return nil, err
		}
		usage = &u
	}
	if r.candidates != nil {
		err = jsonscan.Elements(r.candidates, func(el []byte) error {
			c, err := parseCandidate(el)
			if err != nil {
				return err
			}
			for _, ch := range out.Choices {
				if ch.Index == c.index {
					return fmt.Errorf("candidate %d is given twice", c.index)
				}
			}
			ch, err := answerChoice(c)
			if err != nil {
				return err
			}
			out.Choices = append(out.Choices, ch)
			return nil
		})
		if err != nil {
			return nil, err
		}
		sort.Slice(out.Choices, func(i, j int) bool { return out.Choices[i].Index < out.Choices[j].Index })
	}
	if len(out.Choices) == 0 {
		reason, message := blockReason(r.feedback)
		if reason == "" {
			return nil, errors.New("the answer has no candidates and no block reason")
		}
		refusal := blockedMessage(reason, message)
		for i := range max(n, 1) {
			out.Choices = append(out.Choices, oai.ChatChoice{Index: i, FinishReason: oai.FinishContentFilter,
				Message: oai.AnswerMessage{Role: oai.RoleAssistant, Refusal: &refusal}})
		}
	}
	b, err := json.Marshal(out)
	if err != nil || usage == nil {
		return b, err
	}
	// The usage as OpenAI writes it (zero counts and details included), as
	// a stream's usage chunk has it.
	b = append(b[:len(b)-1], `,"usage":`...)
	b = oai.AppendUsage(b, usage)
	return append(b, '}'), nil
}

// answerChoice builds the choice of a whole candidate: its text, its
// thoughts as reasoning_content, its function calls as tool calls.
func answerChoice(c candidate) (oai.ChatChoice, error) {
	var (
		text, reasoning strings.Builder
		calls           []oai.ToolCall
		hasText         bool
	)
	err := eachPart(c.content, func(p answerPart) error {
		switch {
		case p.call != nil:
			name, args, err := parseCall(p.call)
			if err != nil {
				return err
			}
			sig, _ := jsonscan.String(p.signature)
			calls = append(calls, oai.ToolCall{ID: toolCallID(sig), Type: "function",
				Function: oai.FunctionCall{Name: name, Arguments: string(args)}})
		case p.text != nil:
			s, _ := jsonscan.String(p.text)
			if p.thought {
				reasoning.WriteString(s)
			} else {
				text.WriteString(s)
				hasText = true
			}
		}
		return nil
	})
	if err != nil {
		return oai.ChatChoice{}, err
	}
	finish := finishReason(c.finish, len(calls) > 0)
	msg := oai.AnswerMessage{Role: oai.RoleAssistant, ReasoningContent: reasoning.String(), ToolCalls: calls}
	if hasText || (len(calls) == 0 && finish != oai.FinishContentFilter) {
		s := text.String()
		msg.Content = &s
	}
	return oai.ChatChoice{Index: c.index, Message: msg, FinishReason: finish}, nil
}
