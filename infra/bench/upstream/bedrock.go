package main

import (
	"encoding/json"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// bedrockFrames are the event-stream frames that do not depend on the request.
type bedrockFrames struct {
	converseStart, converseBlockStop, converseStop []byte
	converseDeltas                                 [][]byte

	claudeBlockStart, claudePing, claudeBlockStop []byte
	claudeDeltas                                  [][]byte
}

func newBedrockFrames(c *corpus) *bedrockFrames {
	f := &bedrockFrames{
		converseStart:     mustFrame(eventFrame("messageStart", []byte(`{"p":"abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVW","role":"assistant"}`))),
		converseBlockStop: mustFrame(eventFrame("contentBlockStop", []byte(`{"contentBlockIndex":0,"p":"abcdefghijklmnopqrstu"}`))),
		converseStop:      mustFrame(eventFrame("messageStop", []byte(`{"p":"abcdefghijklmnopq","stopReason":"end_turn"}`))),
		claudeBlockStart:  mustFrame(chunkFrame([]byte(anthropicBlockStart))),
		claudePing:        mustFrame(chunkFrame([]byte(anthropicPing))),
		claudeBlockStop:   mustFrame(chunkFrame([]byte(anthropicBlockStop))),
	}
	for _, tok := range c.jsonTokens {
		p := append([]byte(`{"contentBlockIndex":0,"delta":{"text":`), tok...)
		p = append(p, `},"p":"abcdefghijklm"}`...)
		f.converseDeltas = append(f.converseDeltas, mustFrame(eventFrame("contentBlockDelta", p)))
		f.claudeDeltas = append(f.claudeDeltas, mustFrame(chunkFrame(anthropicDeltaJSON(tok))))
	}
	return f
}

// bedrockRequest holds the fields of the invoke bodies the upstream reads:
// Titan embeddings and text, and Anthropic's Messages-on-Bedrock.
type bedrockRequest struct {
	InputText  string          `json:"inputText"`
	Dimensions int             `json:"dimensions"`
	Messages   json.RawMessage `json:"messages"`
	System     json.RawMessage `json:"system"`
	MaxTokens  int             `json:"max_tokens"`
	Config     struct {
		MaxTokenCount int `json:"maxTokenCount"`
	} `json:"textGenerationConfig"`
}

func (s *server) bedrockUsage(req bedrockRequest, limit int) usage {
	return usage{
		prompt:     estimateTokens(len(req.InputText) + len(req.Messages) + len(req.System)),
		completion: s.text.count(limit),
	}
}

func setBedrockHeaders(w http.ResponseWriter, id string, u usage, start time.Time) {
	h := w.Header()
	h.Set("X-Amzn-Requestid", id)
	h.Set("X-Amzn-Bedrock-Input-Token-Count", strconv.Itoa(u.prompt))
	h.Set("X-Amzn-Bedrock-Output-Token-Count", strconv.Itoa(u.completion))
	h.Set("X-Amzn-Bedrock-Invocation-Latency", strconv.FormatInt(time.Since(start).Milliseconds(), 10))
}

// bedrockInvoke serves InvokeModel: the Titan embedding shape for embedding
// models, the Messages shape for Anthropic models, Titan text otherwise.
func (s *server) bedrockInvoke(w http.ResponseWriter, r *http.Request) {
	start := time.Now()
	model := r.PathValue("model")
	var req bedrockRequest
	if !decode(w, r, familyBedrock, &req) {
		return
	}
	id := s.nextID()
	bp := s.getBuf()
	defer s.putBuf(bp)
	b := *bp
	var u usage
	switch {
	case strings.Contains(model, "embed"):
		u = usage{prompt: estimateTokens(len(req.InputText))}
		b = append(b, `{"embedding":`...)
		b = append(b, s.vecs.get(s.dimsOr(req.Dimensions)).floatJSON...)
		b = append(b, `,"inputTextTokenCount":`...)
		b = strconv.AppendInt(b, int64(u.prompt), 10)
		b = append(b, '}')
	case strings.Contains(model, "anthropic"):
		u = s.bedrockUsage(req, req.MaxTokens)
		b = s.appendAnthropicMessage(b, id, model, u)
	default:
		u = s.bedrockUsage(req, req.Config.MaxTokenCount)
		b = append(b, `{"inputTextTokenCount":`...)
		b = strconv.AppendInt(b, int64(u.prompt), 10)
		b = append(b, `,"results":[{"tokenCount":`...)
		b = strconv.AppendInt(b, int64(u.completion), 10)
		b = append(b, `,"outputText":`...)
		b = s.text.appendText(b, u.completion)
		b = append(b, `,"completionReason":"FINISH"}]}`...)
	}
	*bp = b
	setBedrockHeaders(w, id, u, start)
	writeBody(w, http.StatusOK, b)
}

type converseRequest struct {
	Messages        json.RawMessage `json:"messages"`
	System          json.RawMessage `json:"system"`
	InferenceConfig struct {
		MaxTokens int `json:"maxTokens"`
	} `json:"inferenceConfig"`
}

func (s *server) converseUsage(w http.ResponseWriter, r *http.Request) (usage, bool) {
	var req converseRequest
	if !decode(w, r, familyBedrock, &req) {
		return usage{}, false
	}
	if len(req.Messages) == 0 {
		writeError(w, familyBedrock, http.StatusBadRequest, "The model returned the following errors: messages: field required")
		return usage{}, false
	}
	return usage{
		prompt:     estimateTokens(len(req.Messages) + len(req.System)),
		completion: s.text.count(req.InferenceConfig.MaxTokens),
	}, true
}

func appendConverseUsage(b []byte, u usage, latency time.Duration) []byte {
	b = append(b, `"usage":{"inputTokens":`...)
	b = strconv.AppendInt(b, int64(u.prompt), 10)
	b = append(b, `,"outputTokens":`...)
	b = strconv.AppendInt(b, int64(u.completion), 10)
	b = append(b, `,"totalTokens":`...)
	b = strconv.AppendInt(b, int64(u.prompt+u.completion), 10)
	b = append(b, `},"metrics":{"latencyMs":`...)
	b = strconv.AppendInt(b, max(1, latency.Milliseconds()), 10)
	return append(b, '}')
}

func (s *server) bedrockConverse(w http.ResponseWriter, r *http.Request) {
	start := time.Now()
	u, ok := s.converseUsage(w, r)
	if !ok {
		return
	}
	bp := s.getBuf()
	defer s.putBuf(bp)
	b := append(*bp, `{"output":{"message":{"role":"assistant","content":[{"text":`...)
	b = s.text.appendText(b, u.completion)
	b = append(b, `}]}},"stopReason":"end_turn",`...)
	b = appendConverseUsage(b, u, time.Since(start))
	*bp = append(b, '}')
	w.Header().Set("X-Amzn-Requestid", s.nextID())
	writeBody(w, http.StatusOK, *bp)
}

// bedrockConverseStream writes ConverseStream events: messageStart,
// contentBlockDelta per token, contentBlockStop, messageStop, metadata.
func (s *server) bedrockConverseStream(w http.ResponseWriter, r *http.Request) {
	start := time.Now()
	u, ok := s.converseUsage(w, r)
	if !ok {
		return
	}
	w.Header().Set("X-Amzn-Requestid", s.nextID())
	st := newStreamer(w, r, eventStreamContentType, s.opts.streamInterval)
	f := s.frames
	if !st.send(f.converseStart) {
		return
	}
	for i, d := range f.converseDeltas[:u.completion] {
		if (i > 0 && !st.pause()) || !st.send(d) {
			return
		}
	}
	if !st.send(f.converseBlockStop) || !st.send(f.converseStop) {
		return
	}
	meta, err := eventFrame("metadata", append(appendConverseUsage([]byte(`{`), u, time.Since(start)), `,"p":"abcdefg"}`...))
	if err == nil {
		st.send(meta)
	}
}

// bedrockInvokeStream writes InvokeModelWithResponseStream chunks: Anthropic
// stream events for Anthropic models, Titan text chunks otherwise.
func (s *server) bedrockInvokeStream(w http.ResponseWriter, r *http.Request) {
	start := time.Now()
	model := r.PathValue("model")
	var req bedrockRequest
	if !decode(w, r, familyBedrock, &req) {
		return
	}
	id := s.nextID()
	w.Header().Set("X-Amzn-Requestid", id)
	if !strings.Contains(model, "anthropic") {
		s.titanStream(w, r, s.bedrockUsage(req, req.Config.MaxTokenCount))
		return
	}
	u := s.bedrockUsage(req, req.MaxTokens)
	st := newStreamer(w, r, eventStreamContentType, s.opts.streamInterval)
	f := s.frames
	first, err := chunkFrame(anthropicStart(id, model, u.prompt))
	if err != nil || !st.send(first) || !st.send(f.claudeBlockStart) || !st.send(f.claudePing) {
		return
	}
	for i, d := range f.claudeDeltas[:u.completion] {
		if (i > 0 && !st.pause()) || !st.send(d) {
			return
		}
	}
	if !st.send(f.claudeBlockStop) {
		return
	}
	delta, err := chunkFrame(anthropicMessageDelta(u.completion))
	if err != nil || !st.send(delta) {
		return
	}
	stop := []byte(`{"type":"message_stop","amazon-bedrock-invocationMetrics":{"inputTokenCount":`)
	stop = strconv.AppendInt(stop, int64(u.prompt), 10)
	stop = append(stop, `,"outputTokenCount":`...)
	stop = strconv.AppendInt(stop, int64(u.completion), 10)
	stop = append(stop, `,"invocationLatency":`...)
	stop = strconv.AppendInt(stop, time.Since(start).Milliseconds(), 10)
	stop = append(stop, `,"firstByteLatency":1}}`...)
	if last, err := chunkFrame(stop); err == nil {
		st.send(last)
	}
}

func (s *server) titanStream(w http.ResponseWriter, r *http.Request, u usage) {
	st := newStreamer(w, r, eventStreamContentType, s.opts.streamInterval)
	for i, tok := range s.text.jsonTokens[:u.completion] {
		if i > 0 && !st.pause() {
			return
		}
		p := append([]byte(`{"outputText":`), tok...)
		p = append(p, `,"index":0,"totalOutputTextTokenCount":`...)
		p = strconv.AppendInt(p, int64(i+1), 10)
		if i == u.completion-1 {
			p = append(p, `,"completionReason":"FINISH"`...)
		} else {
			p = append(p, `,"completionReason":null`...)
		}
		p = append(p, `,"inputTextTokenCount":`...)
		p = strconv.AppendInt(p, int64(u.prompt), 10)
		frame, err := chunkFrame(append(p, '}'))
		if err != nil || !st.send(frame) {
			return
		}
	}
}
