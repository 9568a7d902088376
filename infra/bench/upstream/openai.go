package main

import (
	"bytes"
	"encoding/json"
	"net/http"
	"strconv"
	"time"
)

// inputs counts the inputs of an OpenAI `input` field (a string, an array of
// strings, an array of token ids, or an array of token arrays) and the bytes
// they hold.
func inputs(raw json.RawMessage) (n, size int) {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 || raw[0] != '[' {
		return 1, len(raw)
	}
	var items []json.RawMessage
	if err := json.Unmarshal(raw, &items); err != nil || len(items) == 0 {
		return 1, len(raw)
	}
	if first := bytes.TrimSpace(items[0]); len(first) > 0 && first[0] != '"' && first[0] != '[' && first[0] != '{' {
		return 1, len(raw) // one input given as token ids
	}
	for _, it := range items {
		size += len(it)
	}
	return len(items), size
}

func (s *server) openAIModels(w http.ResponseWriter, _ *http.Request) {
	const body = `{"object":"list","data":[` +
		`{"id":"gpt-4o-mini","object":"model","created":1721172741,"owned_by":"system"},` +
		`{"id":"text-embedding-3-small","object":"model","created":1705948997,"owned_by":"system"},` +
		`{"id":"omni-moderation-latest","object":"model","created":1731689265,"owned_by":"system"}]}`
	writeBody(w, http.StatusOK, []byte(body))
}

type embeddingsRequest struct {
	Model          string          `json:"model"`
	Input          json.RawMessage `json:"input"`
	EncodingFormat string          `json:"encoding_format"`
	Dimensions     int             `json:"dimensions"`
}

func (s *server) openAIEmbeddings(w http.ResponseWriter, r *http.Request) {
	var req embeddingsRequest
	if !decode(w, r, familyOpenAI, &req) {
		return
	}
	if len(req.Input) == 0 {
		writeError(w, familyOpenAI, http.StatusBadRequest, "'input' is a required property")
		return
	}
	vec := s.vecs.get(s.dimsOr(req.Dimensions))
	emb := vec.floatJSON
	if req.EncodingFormat == "base64" {
		emb = vec.base64JSON
	}
	n, size := inputs(req.Input)
	tokens := estimateTokens(size)

	bp := s.getBuf()
	defer s.putBuf(bp)
	b := append(*bp, `{"object":"list","data":[`...)
	for i := range n {
		if i > 0 {
			b = append(b, ',')
		}
		b = append(b, `{"object":"embedding","index":`...)
		b = strconv.AppendInt(b, int64(i), 10)
		b = append(b, `,"embedding":`...)
		b = append(b, emb...)
		b = append(b, '}')
	}
	b = append(b, `],"model":`...)
	b = strconv.AppendQuote(b, req.Model)
	b = append(b, `,"usage":{"prompt_tokens":`...)
	b = strconv.AppendInt(b, int64(tokens), 10)
	b = append(b, `,"total_tokens":`...)
	b = strconv.AppendInt(b, int64(tokens), 10)
	b = append(b, `}}`...)
	*bp = b
	writeBody(w, http.StatusOK, b)
}

type moderationsRequest struct {
	Model string          `json:"model"`
	Input json.RawMessage `json:"input"`
}

// moderationResult is one results[] entry of an omni-moderation answer for
// text input: nothing flagged, small scores, every category applied to text.
const moderationResult = `{"flagged":false,"categories":{` +
	`"harassment":false,"harassment/threatening":false,"hate":false,"hate/threatening":false,` +
	`"illicit":false,"illicit/violent":false,"self-harm":false,"self-harm/instructions":false,` +
	`"self-harm/intent":false,"sexual":false,"sexual/minors":false,"violence":false,"violence/graphic":false},` +
	`"category_scores":{` +
	`"harassment":0.000012505,"harassment/threatening":0.0000014202,"hate":0.0000034015,"hate/threatening":2.5466e-7,` +
	`"illicit":0.0000087706,"illicit/violent":0.0000040089,"self-harm":0.0000011478,"self-harm/instructions":2.2603e-7,` +
	`"self-harm/intent":3.5008e-7,"sexual":0.0000065387,"sexual/minors":5.9242e-7,"violence":0.0000101808,"violence/graphic":0.0000016964},` +
	`"category_applied_input_types":{` +
	`"harassment":["text"],"harassment/threatening":["text"],"hate":["text"],"hate/threatening":["text"],` +
	`"illicit":["text"],"illicit/violent":["text"],"self-harm":["text"],"self-harm/instructions":["text"],` +
	`"self-harm/intent":["text"],"sexual":["text"],"sexual/minors":["text"],"violence":["text"],"violence/graphic":["text"]}}`

func (s *server) openAIModerations(w http.ResponseWriter, r *http.Request) {
	var req moderationsRequest
	if !decode(w, r, familyOpenAI, &req) {
		return
	}
	if len(req.Input) == 0 {
		writeError(w, familyOpenAI, http.StatusBadRequest, "'input' is a required property")
		return
	}
	if req.Model == "" {
		req.Model = "omni-moderation-latest"
	}
	n, _ := inputs(req.Input)
	if in := bytes.TrimSpace(req.Input); bytes.Contains(in, []byte(`"type"`)) {
		n = 1 // a multimodal array is moderated as one input
	}
	bp := s.getBuf()
	defer s.putBuf(bp)
	b := append(*bp, `{"id":"modr-`...)
	b = append(b, s.nextID()...)
	b = append(b, `","model":`...)
	b = strconv.AppendQuote(b, req.Model)
	b = append(b, `,"results":[`...)
	for i := range n {
		if i > 0 {
			b = append(b, ',')
		}
		b = append(b, moderationResult...)
	}
	b = append(b, `]}`...)
	*bp = b
	writeBody(w, http.StatusOK, b)
}

type chatRequest struct {
	Model    string `json:"model"`
	Messages []struct {
		Content json.RawMessage `json:"content"`
	} `json:"messages"`
	Stream        bool `json:"stream"`
	StreamOptions struct {
		IncludeUsage bool `json:"include_usage"`
	} `json:"stream_options"`
	MaxTokens           int `json:"max_tokens"`
	MaxCompletionTokens int `json:"max_completion_tokens"`
}

func (s *server) openAIChat(w http.ResponseWriter, r *http.Request) {
	var req chatRequest
	if !decode(w, r, familyOpenAI, &req) {
		return
	}
	if len(req.Messages) == 0 {
		writeError(w, familyOpenAI, http.StatusBadRequest, "'messages' is a required property")
		return
	}
	size := 0
	for _, m := range req.Messages {
		size += len(m.Content)
	}
	limit := req.MaxCompletionTokens
	if limit == 0 {
		limit = req.MaxTokens
	}
	u := usage{prompt: estimateTokens(size), completion: s.text.count(limit)}
	id := "chatcmpl-" + s.nextID()
	created := time.Now().Unix()
	if req.Stream {
		s.openAIChatStream(w, r, req, id, created, u)
		return
	}
	bp := s.getBuf()
	defer s.putBuf(bp)
	b := append(*bp, `{"id":"`...)
	b = append(b, id...)
	b = append(b, `","object":"chat.completion","created":`...)
	b = strconv.AppendInt(b, created, 10)
	b = append(b, `,"model":`...)
	b = strconv.AppendQuote(b, req.Model)
	b = append(b, `,"choices":[{"index":0,"message":{"role":"assistant","content":`...)
	b = s.text.appendText(b, u.completion)
	b = append(b, `,"refusal":null,"annotations":[]},"logprobs":null,"finish_reason":"stop"}],"usage":`...)
	b = u.appendOpenAI(b)
	b = append(b, `,"service_tier":"default","system_fingerprint":"fp_bench"}`...)
	*bp = b
	writeBody(w, http.StatusOK, b)
}

// openAIChatStream writes chat.completion.chunk events: a role chunk, one
// chunk per token, a finish chunk, the usage chunk when asked, and [DONE].
func (s *server) openAIChatStream(w http.ResponseWriter, r *http.Request, req chatRequest, id string, created int64, u usage) {
	st := newStreamer(w, r, "text/event-stream; charset=utf-8", s.opts.streamInterval)
	prefix := make([]byte, 0, 160)
	prefix = append(prefix, `data: {"id":"`...)
	prefix = append(prefix, id...)
	prefix = append(prefix, `","object":"chat.completion.chunk","created":`...)
	prefix = strconv.AppendInt(prefix, created, 10)
	prefix = append(prefix, `,"model":`...)
	prefix = strconv.AppendQuote(prefix, req.Model)
	prefix = append(prefix, `,"system_fingerprint":"fp_bench","choices":[`...)
	tail := []byte("]}\n\n")
	if req.StreamOptions.IncludeUsage {
		tail = []byte("],\"usage\":null}\n\n")
	}
	buf := make([]byte, 0, 512)
	chunk := func(choice string, tok []byte) []byte {
		buf = append(buf[:0], prefix...)
		buf = append(buf, choice...)
		if tok != nil {
			buf = append(buf, tok...)
			buf = append(buf, `},"logprobs":null,"finish_reason":null}`...)
		}
		return append(buf, tail...)
	}
	if !st.send(chunk(`{"index":0,"delta":{"role":"assistant","content":"","refusal":null},"logprobs":null,"finish_reason":null}`, nil)) {
		return
	}
	for i, tok := range s.text.jsonTokens[:u.completion] {
		if (i > 0 && !st.pause()) || !st.send(chunk(`{"index":0,"delta":{"content":`, tok)) {
			return
		}
	}
	if !st.send(chunk(`{"index":0,"delta":{},"logprobs":null,"finish_reason":"stop"}`, nil)) {
		return
	}
	if req.StreamOptions.IncludeUsage {
		buf = append(buf[:0], prefix...)
		buf = append(buf, `],"usage":`...)
		buf = u.appendOpenAI(buf)
		buf = append(buf, "}\n\n"...)
		if !st.send(buf) {
			return
		}
	}
	st.send([]byte("data: [DONE]\n\n"))
}

// usage is a call's token counts.
type usage struct{ prompt, completion int }

func (u usage) appendOpenAI(b []byte) []byte {
	b = append(b, `{"prompt_tokens":`...)
	b = strconv.AppendInt(b, int64(u.prompt), 10)
	b = append(b, `,"completion_tokens":`...)
	b = strconv.AppendInt(b, int64(u.completion), 10)
	b = append(b, `,"total_tokens":`...)
	b = strconv.AppendInt(b, int64(u.prompt+u.completion), 10)
	return append(b, `,"prompt_tokens_details":{"cached_tokens":0,"audio_tokens":0},"completion_tokens_details":{"reasoning_tokens":0,"audio_tokens":0,"accepted_prediction_tokens":0,"rejected_prediction_tokens":0}}`...)
}
