package anthropic

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/sluice-gateway/sluice/pkg/api"
	"github.com/sluice-gateway/sluice/pkg/jsonscan"
	"github.com/sluice-gateway/sluice/pkg/models"
	"github.com/sluice-gateway/sluice/pkg/oai"
	"github.com/sluice-gateway/sluice/pkg/sse"
)

// maxBlocks bounds the content blocks of one streamed message a translator
// keeps track of.
const maxBlocks = 1024

// Stream translates a streamed Messages answer (the provider's event
// stream body) into the OpenAI chunk stream the client gets: one provider
// event's chunks per read.
func (c *Call) Stream(body io.ReadCloser) *models.Answer {
	return &models.Answer{Body: oai.NewSSEStream(body, sse.Limits{}, c.Translator()), ContentLength: -1}
}

// Translator returns the translator of the call's event stream (see
// Stream).
func (c *Call) Translator() oai.StreamTranslator {
	return &streamer{provider: c.provider, model: c.model, jsonMode: c.jsonMode}
}

// block kinds: what a content block's deltas become.
const (
	blockOther    = iota // a block sluice does not translate (server tools)
	blockText            // content
	blockThinking        // reasoning_content and thinking_blocks
	blockTool            // a tool call
	blockJSON            // JSON mode: the format tool, whose input is content
)

type block struct {
	index int64 // Anthropic's
	kind  int
	tool  int  // the tool call's index (blockTool)
	args  bool // some input arrived (blockTool, blockJSON)
}

// streamer translates Anthropic's events — message_start, then per content
// block content_block_start, content_block_delta…, content_block_stop,
// then message_delta (stop_reason, usage) and message_stop; ping and error
// anywhere — into OpenAI chunks: the role chunk at message_start, a chunk
// per text, thinking, signature and tool-input delta, a chunk naming each
// tool call; the finish, usage and [DONE] at the end.
type streamer struct {
	provider, model string
	jsonMode        bool

	w       *oai.ChunkWriter // from message_start on
	blocks  []block
	tools   int // tool calls so far
	usage   usage
	finish  string
	stopped bool // message_stop seen
	// thinkingBytes is the reasoning's size, for the estimate of its
	// tokens (see usage.openAI).
	thinkingBytes int
	scratch       []byte // a thinking_blocks piece, reused
}

// event is the members of an event's data a streamer reads.
type event struct {
	typ, index, delta, contentBlock, message, usage, err []byte
}

func (s *streamer) Event(dst []byte, ev sse.Event) ([]byte, error) {
	var e event
	if err := jsonscan.Members(ev.Data, func(name, v []byte) error {
		switch string(name) {
		case "type":
			e.typ = v
		case "index":
			e.index = v
		case "delta":
			e.delta = v
		case "content_block":
			e.contentBlock = v
		case "message":
			e.message = v
		case "usage":
			e.usage = v
		case "error":
			e.err = v
		}
		return nil
	}); err != nil {
		if len(ev.Data) == 0 {
			return dst, nil // an event without data (none is sent)
		}
		return dst, s.malformed("an event is not a JSON object")
	}
	typ := string(e.typ)
	if s.w == nil && typ != `"message_start"` && typ != `"ping"` && typ != `"error"` {
		return dst, s.malformed("the stream does not begin with message_start")
	}
	switch typ {
	case `"message_start"`:
		return s.start(dst, &e)
	case `"content_block_start"`:
		return s.blockStart(dst, &e)
	case `"content_block_delta"`:
		return s.blockDelta(dst, &e)
	case `"content_block_stop"`:
		return s.blockStop(dst, &e)
	case `"message_delta"`:
		return dst, s.messageDelta(&e)
	case `"message_stop"`:
		s.stopped = true
		return dst, io.EOF
	case `"error"`:
		return dst, s.providerError(e.err)
	}
	return dst, nil // ping, and event types added later
}

func (s *streamer) start(dst []byte, e *event) ([]byte, error) {
	if s.w != nil {
		return dst, s.malformed("message_start came twice")
	}
	model := s.model
	var rawUsage []byte
	if err := jsonscan.Members(e.message, func(name, v []byte) error {
		switch string(name) {
		case "model":
			if m, err := jsonscan.String(v); err == nil && m != "" {
				model = m
			}
		case "usage":
			rawUsage = v
		}
		return nil
	}); err != nil {
		return dst, s.malformed("message_start has no message object")
	}
	if len(rawUsage) > 0 {
		if err := s.usage.read(rawUsage); err != nil {
			return dst, s.malformed(err.Error())
		}
	}
	s.w = oai.NewChunkWriter(oai.NewChatID(), model, time.Now().Unix())
	return s.w.Role(dst, 0), nil
}

func (s *streamer) blockStart(dst []byte, e *event) ([]byte, error) {
	index, ok := jsonscan.Count(e.index)
	if !ok {
		return dst, s.malformed("content_block_start has no index")
	}
	if len(s.blocks) >= maxBlocks {
		return dst, s.malformed(fmt.Sprintf("more than %d content blocks", maxBlocks))
	}
	var typ, text, id, name, thinking []byte
	if err := jsonscan.Members(e.contentBlock, func(k, v []byte) error {
		switch string(k) {
		case "type":
			typ = v
		case "text":
			text = v
		case "id":
			id = v
		case "name":
			name = v
		case "thinking":
			thinking = v
		}
		return nil
	}); err != nil {
		return dst, s.malformed("content_block_start has no content_block object")
	}
	b := block{index: int64(index)}
	switch string(typ) {
	case `"text"`:
		b.kind = blockText
		if text != nil && !isString(text) {
			return dst, s.malformed("a text block's text is not a JSON string")
		}
		if len(text) > 2 { // a start holds "" in practice; a text, if ever, is content
			dst = s.w.Text(dst, 0, text)
		}
	case `"thinking"`:
		b.kind = blockThinking
		if len(thinking) > 2 {
			var err error
			if dst, err = s.reasoning(dst, thinking); err != nil {
				return dst, err
			}
		}
	case `"redacted_thinking"`:
		if !json.Valid(e.contentBlock) {
			return dst, s.malformed("a redacted_thinking block is not JSON")
		}
		// The block as it came (its data is opaque), for the client to
		// send back.
		s.scratch = append(append(append(s.scratch[:0], '['), e.contentBlock...), ']')
		dst = s.w.Choice(dst, &oai.ChunkChoice{Delta: oai.Delta{ThinkingBlocks: s.scratch}})
	case `"tool_use"`:
		callID, err1 := jsonscan.String(id)
		fn, err2 := jsonscan.String(name)
		if err1 != nil || err2 != nil {
			return dst, s.malformed("a tool_use block lacks its id or name")
		}
		if s.jsonMode && fn == JSONToolName {
			b.kind = blockJSON
			break
		}
		b.kind, b.tool = blockTool, s.tools
		s.tools++
		dst = s.w.Choice(dst, &oai.ChunkChoice{Delta: oai.Delta{ToolCalls: []oai.ToolCallDelta{{Index: b.tool, ID: callID, Type: "function", Name: fn}}}})
	}
	s.blocks = append(s.blocks, b)
	return dst, nil
}

// find returns the block of a delta or stop event.
func (s *streamer) find(raw []byte) (*block, error) {
	index, ok := jsonscan.Count(raw)
	if ok {
		for i := len(s.blocks) - 1; i >= 0; i-- {
			if s.blocks[i].index == index {
				return &s.blocks[i], nil
			}
		}
	}
	return nil, s.malformed("a content block event names no started block")
}

func (s *streamer) blockDelta(dst []byte, e *event) ([]byte, error) {
	b, err := s.find(e.index)
	if err != nil {
		return dst, err
	}
	var typ, text, partial, thinking, signature []byte
	if err := jsonscan.Members(e.delta, func(k, v []byte) error {
		switch string(k) {
		case "type":
			typ = v
		case "text":
			text = v
		case "partial_json":
			partial = v
		case "thinking":
			thinking = v
		case "signature":
			signature = v
		}
		return nil
	}); err != nil {
		return dst, s.malformed("content_block_delta has no delta object")
	}
	switch string(typ) {
	case `"text_delta"`:
		if !isString(text) {
			return dst, s.malformed("a text_delta has no text string")
		}
		if b.kind == blockText && len(text) > 2 {
			dst = s.w.Text(dst, 0, text)
		}
	case `"input_json_delta"`:
		if !isString(partial) {
			return dst, s.malformed("an input_json_delta has no partial_json string")
		}
		if len(partial) <= 2 {
			break
		}
		switch b.kind {
		case blockJSON:
			b.args = true
			dst = s.w.Text(dst, 0, partial)
		case blockTool:
			args, err := jsonscan.String(partial)
			if err != nil {
				return dst, s.malformed("an input_json_delta has no partial_json string")
			}
			b.args = true
			dst = s.w.Choice(dst, &oai.ChunkChoice{Delta: oai.Delta{ToolCalls: []oai.ToolCallDelta{{Index: b.tool, Arguments: args}}}})
		}
	case `"thinking_delta"`:
		if !isString(thinking) {
			return dst, s.malformed("a thinking_delta has no thinking string")
		}
		if b.kind == blockThinking && len(thinking) > 2 {
			return s.reasoning(dst, thinking)
		}
	case `"signature_delta"`:
		if !isString(signature) {
			return dst, s.malformed("a signature_delta has no signature string")
		}
		if b.kind == blockThinking {
			s.scratch = append(s.scratch[:0], `[{"type":"thinking","thinking":"","signature":`...)
			s.scratch = append(s.scratch, signature...)
			s.scratch = append(s.scratch, "}]"...)
			dst = s.w.Choice(dst, &oai.ChunkChoice{Delta: oai.Delta{ThinkingBlocks: s.scratch}})
		}
	}
	return dst, nil // citations_delta and deltas added later
}

// reasoning appends a thinking delta (lit, its JSON string) as LiteLLM
// streams it: the reasoning_content, and the piece of the thinking block a
// client puts together with the block's signature to send the block back.
func (s *streamer) reasoning(dst, lit []byte) ([]byte, error) {
	text, err := jsonscan.String(lit)
	if err != nil {
		return dst, s.malformed("a thinking delta is not a JSON string")
	}
	s.thinkingBytes += len(text)
	s.scratch = append(s.scratch[:0], `[{"type":"thinking","thinking":`...)
	s.scratch = append(s.scratch, lit...)
	s.scratch = append(s.scratch, "}]"...)
	return s.w.Choice(dst, &oai.ChunkChoice{Delta: oai.Delta{ReasoningContent: text, ThinkingBlocks: s.scratch}}), nil
}

func (s *streamer) blockStop(dst []byte, e *event) ([]byte, error) {
	b, err := s.find(e.index)
	if err != nil {
		return dst, err
	}
	if b.args {
		return dst, nil
	}
	// A tool called without input streams no input_json_delta: its
	// arguments are the empty object, not "" (as in LiteLLM).
	switch b.kind {
	case blockTool:
		b.args = true
		return s.w.Choice(dst, &oai.ChunkChoice{Delta: oai.Delta{ToolCalls: []oai.ToolCallDelta{{Index: b.tool, Arguments: "{}"}}}}), nil
	case blockJSON:
		b.args = true
		return s.w.Text(dst, 0, []byte(`"{}"`)), nil
	}
	return dst, nil
}

func (s *streamer) messageDelta(e *event) error {
	var stop []byte
	if err := jsonscan.Members(e.delta, func(k, v []byte) error {
		if string(k) == "stop_reason" {
			stop = v
		}
		return nil
	}); err != nil {
		return s.malformed("message_delta has no delta object")
	}
	if !jsonscan.Null(stop) {
		reason, _ := jsonscan.String(stop) // not a string: a stop
		s.finish = FinishReason(reason)
	}
	if len(e.usage) > 0 {
		if err := s.usage.read(e.usage); err != nil {
			return s.malformed(err.Error())
		}
	}
	return nil
}

// End appends the finish chunk, the usage chunk and [DONE] after
// message_stop; a stream that ended before it was cut short.
func (s *streamer) End(dst []byte) ([]byte, error) {
	if !s.stopped {
		return dst, fmt.Errorf("%s: the stream ended before message_stop", s.provider)
	}
	finish := s.finish
	switch {
	case finish == "":
		finish = oai.FinishStop
	case finish == oai.FinishToolCalls && s.tools == 0 && s.jsonMode:
		finish = oai.FinishStop // the format tool was the call
	}
	dst = s.w.Finish(dst, 0, finish)
	u := s.usage.openAI(s.thinkingBytes)
	return s.w.End(dst, &u), nil
}

// providerError is an error event's error, for the client's final error
// event: {"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}.
func (s *streamer) providerError(raw []byte) error {
	typ, msg := ParseError(raw)
	if msg == "" {
		msg = "no message"
	}
	if typ != "" {
		msg += " (" + typ + ")"
	}
	return api.Upstream(errors.New(s.provider+" stream error: "+msg), "The provider reported an error: %s", clip(msg, 500))
}

func (s *streamer) malformed(what string) error {
	return api.Upstream(fmt.Errorf("%s stream: %s", s.provider, what), "The provider's stream was unreadable: %s.", what)
}

// isString reports whether v is a JSON string literal with valid escapes:
// a provider's literal copied into a chunk as it is must be one.
func isString(v []byte) bool {
	if len(v) < 2 || v[0] != '"' || v[len(v)-1] != '"' {
		return false
	}
	for _, c := range v[1 : len(v)-1] {
		if c < 0x20 || c == '\\' {
			return json.Valid(v) // the rare literal with escapes
		}
	}
	return true
}

// read takes the counts a usage object gives (a stream's message_delta
// repeats only some of them, cumulatively): absent and null counts keep
// their value.
func (u *usage) read(raw []byte) error {
	count := func(v []byte, dst *int64) error {
		if jsonscan.Null(v) {
			return nil
		}
		n, ok := jsonscan.Count(v)
		if !ok {
			return errors.New("usage: a token count is not a non-negative integer")
		}
		*dst = n
		return nil
	}
	return jsonscan.Members(raw, func(name, v []byte) error {
		switch string(name) {
		case "input_tokens":
			return count(v, &u.input)
		case "output_tokens":
			return count(v, &u.output)
		case "cache_read_input_tokens":
			return count(v, &u.cacheRead)
		case "cache_creation_input_tokens":
			return count(v, &u.cacheCreation)
		case "output_tokens_details":
			if jsonscan.Null(v) {
				return nil
			}
			return jsonscan.Members(v, func(name, v []byte) error {
				if string(name) == "thinking_tokens" && !jsonscan.Null(v) {
					u.thinkingKnown = true
					return count(v, &u.thinking)
				}
				return nil
			})
		}
		return nil
	})
}
