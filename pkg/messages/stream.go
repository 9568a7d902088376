package messages

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"

	"github.com/sluice-gateway/sluice/pkg/api"
	"github.com/sluice-gateway/sluice/pkg/oai"
	"github.com/sluice-gateway/sluice/pkg/sse"
)

// chunk is the part of an OpenAI chat.completion.chunk the translation reads.
type chunk struct {
	ID      string `json:"id"`
	Choices []struct {
		Delta struct {
			Content          string `json:"content"`
			ReasoningContent string `json:"reasoning_content"`
			Refusal          string `json:"refusal"`
			ToolCalls        []struct {
				Index    int    `json:"index"`
				ID       string `json:"id"`
				Function struct {
					Name      string `json:"name"`
					Arguments string `json:"arguments"`
				} `json:"function"`
			} `json:"tool_calls"`
		} `json:"delta"`
		FinishReason *string `json:"finish_reason"`
	} `json:"choices"`
	Usage *oai.Usage `json:"usage"`
}

// streamer turns an OpenAI chunk stream (the chat seam's: it ends with the
// usage chunk and data: [DONE]) into Anthropic's event grammar, one OpenAI
// event's output per read: message_start and a ping first, then each
// content block opened, filled (text_delta, thinking_delta,
// input_json_delta) and closed as the deltas change kind, and at [DONE]
// message_delta (stop reason, usage) and message_stop.
type streamer struct {
	rd      *sse.Reader
	model   string
	started bool
	ended   bool
	// open is the content block being written: its kind and index; -1 none.
	open     int
	openKind string
	next     int // the next block's index
	// tool is the OpenAI index of the tool call the open block holds.
	tool  int
	stop  string
	usage *oai.Usage
}

// errCut is a translated stream that ended before the provider's [DONE].
var errCut = errors.New("messages: the provider's stream ended before its end")

// Stream translates the chat seam's stream body into Anthropic's events;
// model is the model the client named.
func Stream(body io.ReadCloser, model string) io.ReadCloser {
	s := &streamer{rd: sse.NewReader(body, sse.Limits{}), model: model, open: -1}
	return oai.NewChunkStream(s.step, body)
}

func (s *streamer) step(dst []byte) ([]byte, error) {
	if s.ended {
		return dst, io.EOF
	}
	ev, err := s.rd.Next()
	switch {
	case err == io.EOF:
		return dst, errCut
	case err != nil:
		return dst, err
	}
	data := bytes.TrimSpace(ev.Data)
	if string(data) == "[DONE]" {
		s.ended = true
		dst = s.start(dst, "")
		dst = s.closeBlock(dst)
		stop := s.stop
		if stop == "" {
			stop = StopEndTurn
		}
		dst = s.event(dst, EventMessageDelta, MessageDelta{Type: EventMessageDelta, Delta: MessageDeltaDelta{StopReason: &stop}, Usage: usageOf(s.usage)})
		dst = s.event(dst, EventMessageStop, struct {
			Type string `json:"type"`
		}{EventMessageStop})
		return dst, io.EOF
	}
	var c chunk
	if err := json.Unmarshal(data, &c); err != nil {
		return dst, api.Upstream(err, "The provider's stream sent an event that is not a chat chunk.")
	}
	dst = s.start(dst, c.ID)
	if c.Usage != nil && len(c.Choices) == 0 {
		s.usage = c.Usage
		return dst, nil
	}
	if len(c.Choices) == 0 {
		return dst, nil
	}
	ch := &c.Choices[0]
	d := &ch.Delta
	if d.ReasoningContent != "" {
		dst = s.ensure(dst, BlockThinking, -1, "", "")
		dst = s.delta(dst, Delta{Type: DeltaThinking, Thinking: d.ReasoningContent})
	}
	if text := d.Content + d.Refusal; text != "" {
		dst = s.ensure(dst, BlockText, -1, "", "")
		dst = s.delta(dst, Delta{Type: DeltaText, Text: text})
	}
	for _, tc := range d.ToolCalls {
		if tc.ID != "" || s.openKind != BlockToolUse || s.tool != tc.Index {
			dst = s.closeBlock(dst)
			s.tool = tc.Index
			dst = s.ensure(dst, BlockToolUse, tc.Index, tc.ID, tc.Function.Name)
		}
		if tc.Function.Arguments != "" {
			dst = s.delta(dst, Delta{Type: DeltaInputJSON, PartialJSON: tc.Function.Arguments})
		}
	}
	if ch.FinishReason != nil && *ch.FinishReason != "" {
		s.stop = stopReason(*ch.FinishReason)
	}
	return dst, nil
}

// start writes message_start and a ping before the first block.
func (s *streamer) start(dst []byte, id string) []byte {
	if s.started {
		return dst
	}
	s.started = true
	dst = s.event(dst, EventMessageStart, MessageStart{Type: EventMessageStart, Message: Response{
		ID: messageID(id), Type: "message", Role: "assistant", Model: s.model, Content: []Block{},
	}})
	return s.event(dst, EventPing, struct {
		Type string `json:"type"`
	}{EventPing})
}

// ensure opens a block of kind unless that kind is open.
func (s *streamer) ensure(dst []byte, kind string, tool int, id, name string) []byte {
	if s.open >= 0 && s.openKind == kind && kind != BlockToolUse {
		return dst
	}
	if s.open >= 0 && kind == BlockToolUse && s.openKind == kind && s.tool == tool && id == "" {
		return dst
	}
	dst = s.closeBlock(dst)
	s.open, s.openKind = s.next, kind
	s.next++
	if kind == BlockToolUse {
		s.tool = tool
	}
	var block json.RawMessage
	switch kind {
	case BlockText:
		block = json.RawMessage(`{"type":"text","text":""}`)
	case BlockThinking:
		block = json.RawMessage(`{"type":"thinking","thinking":"","signature":""}`)
	default:
		b, _ := blockJSON(&Block{Type: BlockToolUse, ID: id, Name: name, Input: json.RawMessage("{}")})
		block = b
	}
	return s.event(dst, EventContentBlockStart, struct {
		Type         string          `json:"type"`
		Index        int             `json:"index"`
		ContentBlock json.RawMessage `json:"content_block"`
	}{EventContentBlockStart, s.open, block})
}

func (s *streamer) delta(dst []byte, d Delta) []byte {
	return s.event(dst, EventContentBlockDelta, ContentBlockDelta{Type: EventContentBlockDelta, Index: s.open, Delta: d})
}

func (s *streamer) closeBlock(dst []byte) []byte {
	if s.open < 0 {
		return dst
	}
	dst = s.event(dst, EventContentBlockStop, ContentBlockStop{Type: EventContentBlockStop, Index: s.open})
	s.open, s.openKind = -1, ""
	return dst
}

// event appends one server-sent event: its type and its data.
func (s *streamer) event(dst []byte, typ string, v any) []byte {
	b, err := json.Marshal(v)
	if err != nil {
		panic(fmt.Sprintf("messages: encode a %s event: %v", typ, err)) // typed structs always encode
	}
	return sse.AppendEvent(dst, typ, b)
}
