package main

import (
	"encoding/json"
	"net/http"
	"strconv"
)

type anthropicRequest struct {
	Model    string          `json:"model"`
	System   json.RawMessage `json:"system"`
	Messages []struct {
		Content json.RawMessage `json:"content"`
	} `json:"messages"`
	MaxTokens int  `json:"max_tokens"`
	Stream    bool `json:"stream"`
}

func (req anthropicRequest) inputTokens() int {
	size := len(req.System)
	for _, m := range req.Messages {
		size += len(m.Content)
	}
	return estimateTokens(size)
}

// anthropicDeltas precomputes one content_block_delta SSE event per token.
func anthropicDeltas(c *corpus) [][]byte {
	out := make([][]byte, len(c.jsonTokens))
	for i, tok := range c.jsonTokens {
		b := []byte("event: content_block_delta\ndata: ")
		b = append(b, anthropicDeltaJSON(tok)...)
		out[i] = append(b, "\n\n"...)
	}
	return out
}

func anthropicDeltaJSON(tok []byte) []byte {
	b := []byte(`{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":`)
	b = append(b, tok...)
	return append(b, `}}`...)
}

// appendAnthropicMessage appends a complete (non-streamed) Messages answer.
func (s *server) appendAnthropicMessage(b []byte, id, model string, u usage) []byte {
	b = append(b, `{"id":"msg_`...)
	b = append(b, id...)
	b = append(b, `","type":"message","role":"assistant","model":`...)
	b = strconv.AppendQuote(b, model)
	b = append(b, `,"content":[{"type":"text","text":`...)
	b = s.text.appendText(b, u.completion)
	b = append(b, `}],"stop_reason":"end_turn","stop_sequence":null,"usage":`...)
	return appendAnthropicUsage(b, u)
}

func appendAnthropicUsage(b []byte, u usage) []byte {
	b = append(b, `{"input_tokens":`...)
	b = strconv.AppendInt(b, int64(u.prompt), 10)
	b = append(b, `,"cache_creation_input_tokens":0,"cache_read_input_tokens":0,"output_tokens":`...)
	b = strconv.AppendInt(b, int64(u.completion), 10)
	return append(b, `,"service_tier":"standard"}}`...)
}

// anthropicStart is the message_start event's JSON.
func anthropicStart(id, model string, inputTokens int) []byte {
	b := []byte(`{"type":"message_start","message":{"id":"msg_`)
	b = append(b, id...)
	b = append(b, `","type":"message","role":"assistant","model":`...)
	b = strconv.AppendQuote(b, model)
	b = append(b, `,"content":[],"stop_reason":null,"stop_sequence":null,"usage":{"input_tokens":`...)
	b = strconv.AppendInt(b, int64(inputTokens), 10)
	return append(b, `,"cache_creation_input_tokens":0,"cache_read_input_tokens":0,"output_tokens":1,"service_tier":"standard"}}}`...)
}

// anthropicMessageDelta is the message_delta event's JSON, carrying usage.
func anthropicMessageDelta(outputTokens int) []byte {
	b := []byte(`{"type":"message_delta","delta":{"stop_reason":"end_turn","stop_sequence":null},"usage":{"output_tokens":`)
	b = strconv.AppendInt(b, int64(outputTokens), 10)
	return append(b, `}}`...)
}

const (
	anthropicBlockStart = `{"type":"content_block_start","index":0,"content_block":{"type":"text","text":""}}`
	anthropicPing       = `{"type":"ping"}`
	anthropicBlockStop  = `{"type":"content_block_stop","index":0}`
	anthropicStop       = `{"type":"message_stop"}`
)

func (s *server) anthropicMessages(w http.ResponseWriter, r *http.Request) {
	var req anthropicRequest
	if !decode(w, r, familyAnthropic, &req) {
		return
	}
	if len(req.Messages) == 0 || req.MaxTokens <= 0 {
		writeError(w, familyAnthropic, http.StatusBadRequest, "messages and max_tokens are required")
		return
	}
	u := usage{prompt: req.inputTokens(), completion: s.text.count(req.MaxTokens)}
	id := s.nextID()
	w.Header().Set("Request-Id", "req_"+id)
	if !req.Stream {
		bp := s.getBuf()
		defer s.putBuf(bp)
		*bp = s.appendAnthropicMessage(*bp, id, req.Model, u)
		writeBody(w, http.StatusOK, *bp)
		return
	}
	st := newStreamer(w, r, "text/event-stream; charset=utf-8", s.opts.streamInterval)
	event := func(name string, data []byte) []byte {
		b := make([]byte, 0, len(name)+len(data)+16)
		b = append(b, "event: "...)
		b = append(b, name...)
		b = append(b, "\ndata: "...)
		b = append(b, data...)
		return append(b, "\n\n"...)
	}
	if !st.send(event("message_start", anthropicStart(id, req.Model, u.prompt))) ||
		!st.send(event("content_block_start", []byte(anthropicBlockStart))) ||
		!st.send(event("ping", []byte(anthropicPing))) {
		return
	}
	for i, d := range s.deltas[:u.completion] {
		if (i > 0 && !st.pause()) || !st.send(d) {
			return
		}
	}
	_ = st.send(event("content_block_stop", []byte(anthropicBlockStop))) &&
		st.send(event("message_delta", anthropicMessageDelta(u.completion))) &&
		st.send(event("message_stop", []byte(anthropicStop)))
}

func (s *server) anthropicCountTokens(w http.ResponseWriter, r *http.Request) {
	var req anthropicRequest
	if !decode(w, r, familyAnthropic, &req) {
		return
	}
	b := strconv.AppendInt([]byte(`{"input_tokens":`), int64(req.inputTokens()), 10)
	writeBody(w, http.StatusOK, append(b, '}'))
}
