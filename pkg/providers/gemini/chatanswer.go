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

// response is a GenerateContentResponse — the whole answer, or one event of
// a stream — as the translation reads it.
type response struct {
	Candidates     []candidate     `json:"candidates"`
	UsageMetadata  *UsageMetadata  `json:"usageMetadata"`
	PromptFeedback *promptFeedback `json:"promptFeedback"`
	Error          json.RawMessage `json:"error"` // a stream's in-band error
}

// candidate is one candidate of a response.
type candidate struct {
	Index        int            `json:"index"`
	Content      *answerContent `json:"content"`
	FinishReason string         `json:"finishReason"` // "" until its last event
}

type answerContent struct {
	Parts []answerPart `json:"parts"`
}

// answerPart is one part of a candidate's content.
type answerPart struct {
	Text             *string       `json:"text"`
	Thought          bool          `json:"thought"`
	ThoughtSignature string        `json:"thoughtSignature"`
	FunctionCall     *functionCall `json:"functionCall"`
}

type promptFeedback struct {
	BlockReason        string `json:"blockReason"`
	BlockReasonMessage string `json:"blockReasonMessage"`
}

// parseResponse decodes a response and checks what encoding/json does
// not: candidate indexes in range, function calls named with object
// arguments, counts not below 0.
func parseResponse(doc []byte) (*response, error) {
	var r response
	if err := json.Unmarshal(doc, &r); err != nil {
		return nil, err
	}
	for i := range r.Candidates {
		c := &r.Candidates[i]
		if c.Index < 0 || c.Index >= oai.MaxChoices {
			return nil, fmt.Errorf("candidate index %d is out of range", c.Index)
		}
		if c.Content == nil {
			continue
		}
		for _, p := range c.Content.Parts {
			if f := p.FunctionCall; f != nil {
				if f.Name == "" {
					return nil, errors.New("a functionCall has no name")
				}
				if len(f.Args) > 0 && string(f.Args) != "null" && f.Args[0] != '{' {
					return nil, errors.New("functionCall.args is not an object")
				}
			}
		}
	}
	if u := r.UsageMetadata; u != nil && !jsonscan.NonNegative(u.Fields()) {
		return nil, errors.New("usageMetadata: a token count is not a count")
	}
	return &r, nil
}

// arguments is a function call's args as the tool call's arguments ("{}"
// when absent).
func (f *functionCall) arguments() string {
	if len(f.Args) == 0 || string(f.Args) == "null" {
		return "{}"
	}
	return string(f.Args)
}

// blockReason is why the prompt was blocked ("" when it was not), with
// Google's explanation if it gave one.
func (r *response) blockReason() (reason, message string) {
	f := r.PromptFeedback
	if f == nil {
		return "", ""
	}
	reason = f.BlockReason
	if reason == "BLOCKED_REASON_UNSPECIFIED" {
		reason = "OTHER"
	}
	return reason, f.BlockReasonMessage
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
func translateAnswer(doc []byte, model string, n int) (*oai.ChatCompletion, error) {
	r, err := parseResponse(doc)
	if err != nil {
		return nil, err
	}
	out := oai.ChatCompletion{ID: oai.NewChatID(), Object: oai.ObjectChatCompletion, Created: time.Now().Unix(), Model: model}
	if u := r.UsageMetadata; u != nil {
		ou := u.OpenAI()
		out.Usage = &ou
	}
	for i := range r.Candidates {
		c := &r.Candidates[i]
		for _, ch := range out.Choices {
			if ch.Index == c.Index {
				return nil, fmt.Errorf("candidate %d is given twice", c.Index)
			}
		}
		out.Choices = append(out.Choices, answerChoice(c))
	}
	sort.Slice(out.Choices, func(i, j int) bool { return out.Choices[i].Index < out.Choices[j].Index })
	if len(out.Choices) == 0 {
		reason, message := r.blockReason()
		if reason == "" {
			return nil, errors.New("the answer has no candidates and no block reason")
		}
		refusal := blockedMessage(reason, message)
		for i := range max(n, 1) {
			out.Choices = append(out.Choices, oai.ChatChoice{Index: i, FinishReason: oai.FinishContentFilter,
				Message: oai.AnswerMessage{Role: oai.RoleAssistant, Refusal: &refusal}})
		}
	}
	return &out, nil
}

// encodeAnswer is the chat.completion's body, its usage as OpenAI writes
// it (zero counts and details included), as a stream's usage chunk has it.
func encodeAnswer(cc *oai.ChatCompletion) ([]byte, error) {
	u := cc.Usage
	cc.Usage = nil
	b, err := json.Marshal(cc)
	cc.Usage = u
	if err != nil || u == nil {
		return b, err
	}
	b = append(b[:len(b)-1], `,"usage":`...)
	b = oai.AppendUsage(b, u)
	return append(b, '}'), nil
}

// answerChoice builds the choice of a whole candidate: its text, its
// thoughts as reasoning_content, its function calls as tool calls.
func answerChoice(c *candidate) oai.ChatChoice {
	var (
		text, reasoning strings.Builder
		calls           []oai.ToolCall
		hasText         bool
	)
	for _, p := range c.parts() {
		switch {
		case p.FunctionCall != nil:
			calls = append(calls, oai.ToolCall{ID: toolCallID(p.ThoughtSignature), Type: "function",
				Function: oai.FunctionCall{Name: p.FunctionCall.Name, Arguments: p.FunctionCall.arguments()}})
		case p.Text != nil && p.Thought:
			reasoning.WriteString(*p.Text)
		case p.Text != nil:
			text.WriteString(*p.Text)
			hasText = true
		}
	}
	finish := finishReason(c.FinishReason, len(calls) > 0)
	msg := oai.AnswerMessage{Role: oai.RoleAssistant, ReasoningContent: reasoning.String(), ToolCalls: calls}
	if hasText || (len(calls) == 0 && finish != oai.FinishContentFilter) {
		s := text.String()
		msg.Content = &s
	}
	return oai.ChatChoice{Index: c.Index, Message: msg, FinishReason: finish}
}

// parts are the candidate's content parts (none when it has no content).
func (c *candidate) parts() []answerPart {
	if c.Content == nil {
		return nil
	}
	return c.Content.Parts
}
