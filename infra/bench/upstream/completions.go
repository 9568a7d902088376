package main

import (
	"encoding/json"
	"net/http"
	"strconv"
	"time"
)

// completionsRequest is what the legacy text completions route reads.
type completionsRequest struct {
	Model         string          `json:"model"`
	Prompt        json.RawMessage `json:"prompt"`
	MaxTokens     int             `json:"max_tokens"`
	Stream        bool            `json:"stream"`
	StreamOptions struct {
		IncludeUsage bool `json:"include_usage"`
	} `json:"stream_options"`
}

// openAICompletions answers POST /v1/completions (gpt-3.5-turbo-instruct's
// legacy route) with a text_completion, or its chunks when streamed.
func (s *server) openAICompletions(w http.ResponseWriter, r *http.Request) {
	var req completionsRequest
	if !decode(w, r, familyOpenAI, &req) {
		return
	}
	if len(req.Prompt) == 0 {
		writeError(w, familyOpenAI, http.StatusBadRequest, "'prompt' is a required property")
		return
	}
	_, size := inputs(req.Prompt)
	u := usage{prompt: estimateTokens(size), completion: s.text.count(req.MaxTokens)}
	finish := `"stop"`
	if req.MaxTokens > 0 && u.completion == req.MaxTokens {
		finish = `"length"`
	}
	bp := s.getBuf()
	defer s.putBuf(bp)
	b := append(*bp, `{"id":"cmpl-`...)
	b = append(b, s.nextID()...)
	b = append(b, `","object":"text_completion","created":`...)
	b = strconv.AppendInt(b, time.Now().Unix(), 10)
	b = append(b, `,"model":`...)
	b = strconv.AppendQuote(b, req.Model)
	b = append(b, `,"system_fingerprint":"fp_bench","choices":[`...)
	head := len(b) // the prefix every streamed chunk shares
	if req.Stream {
		st := newStreamer(w, r, "text/event-stream; charset=utf-8", s.opts.streamInterval)
		prefix := append([]byte("data: "), b[:head]...)
		var chunk []byte
		for i, tok := range s.text.jsonTokens[:u.completion] {
			chunk = append(append(chunk[:0], prefix...), `{"text":`...)
			chunk = append(append(chunk, tok...), `,"index":0,"logprobs":null,"finish_reason":`...)
			if i == u.completion-1 {
				chunk = append(chunk, finish...)
			} else {
				chunk = append(chunk, "null"...)
			}
			chunk = append(chunk, "}]}\n\n"...)
			if (i > 0 && !st.pause()) || !st.send(chunk) {
				return
			}
		}
		if req.StreamOptions.IncludeUsage {
			chunk = append(append(chunk[:0], prefix...), `],"usage":`...)
			chunk = append(u.appendOpenAI(chunk), "}\n\n"...)
			if !st.send(chunk) {
				return
			}
		}
		st.send([]byte("data: [DONE]\n\n"))
		return
	}
	b = append(b, `{"text":`...)
	b = s.text.appendText(b, u.completion)
	b = append(b, `,"index":0,"logprobs":null,"finish_reason":`...)
	b = append(b, finish...)
	b = append(b, `}],"usage":`...)
	b = u.appendOpenAI(b)
	*bp = append(b, '}')
	writeBody(w, http.StatusOK, *bp)
}
