package main

import (
	"encoding/json"
	"net/http"
	"strconv"
	"strings"
)

type geminiRequest struct {
	Contents         json.RawMessage `json:"contents"`
	GenerationConfig struct {
		MaxOutputTokens int `json:"maxOutputTokens"`
	} `json:"generationConfig"`
}

// splitAction splits "gemini-2.0-flash:generateContent" at the last colon.
func splitAction(action string) (model, method string) {
	i := strings.LastIndexByte(action, ':')
	if i < 0 {
		return action, ""
	}
	return action[:i], action[i+1:]
}

// gemini serves POST /v1beta/models/{model}:{method} (Google AI Studio).
func (s *server) gemini(w http.ResponseWriter, r *http.Request) {
	model, method := splitAction(r.PathValue("action"))
	switch method {
	case "generateContent":
		s.geminiGenerate(w, r, model, false)
	case "streamGenerateContent":
		s.geminiGenerate(w, r, model, true)
	case "batchEmbedContents":
		s.geminiBatchEmbed(w, r)
	default:
		writeError(w, familyGoogle, http.StatusNotFound, "method "+method+" is not served by the bench upstream")
	}
}

// vertex serves .../publishers/google/models/{model}:{method} (Vertex AI).
func (s *server) vertex(w http.ResponseWriter, r *http.Request) {
	model, method := splitAction(r.PathValue("action"))
	switch method {
	case "generateContent":
		s.geminiGenerate(w, r, model, false)
	case "streamGenerateContent":
		s.geminiGenerate(w, r, model, true)
	case "predict":
		s.vertexPredict(w, r)
	default:
		writeError(w, familyGoogle, http.StatusNotFound, "method "+method+" is not served by the bench upstream")
	}
}

// appendGeminiChunk appends one GenerateContentResponse holding the given
// text (a JSON string) and cumulative usage.
func appendGeminiChunk(b, text []byte, final bool, model, id string, u usage) []byte {
	b = append(b, `{"candidates":[{"content":{"parts":[{"text":`...)
	b = append(b, text...)
	b = append(b, `}],"role":"model"}`...)
	if final {
		b = append(b, `,"finishReason":"STOP"`...)
	}
	b = append(b, `,"index":0}],"usageMetadata":{"promptTokenCount":`...)
	b = strconv.AppendInt(b, int64(u.prompt), 10)
	b = append(b, `,"candidatesTokenCount":`...)
	b = strconv.AppendInt(b, int64(u.completion), 10)
	b = append(b, `,"totalTokenCount":`...)
	b = strconv.AppendInt(b, int64(u.prompt+u.completion), 10)
	b = append(b, `,"promptTokensDetails":[{"modality":"TEXT","tokenCount":`...)
	b = strconv.AppendInt(b, int64(u.prompt), 10)
	b = append(b, `}]},"modelVersion":`...)
	b = strconv.AppendQuote(b, model)
	b = append(b, `,"responseId":"`...)
	b = append(b, id...)
	return append(b, `"}`...)
}

func (s *server) geminiGenerate(w http.ResponseWriter, r *http.Request, model string, stream bool) {
	var req geminiRequest
	if !decode(w, r, familyGoogle, &req) {
		return
	}
	if len(req.Contents) == 0 {
		writeError(w, familyGoogle, http.StatusBadRequest, "* GenerateContentRequest.contents: contents is not specified")
		return
	}
	total := s.text.count(req.GenerationConfig.MaxOutputTokens)
	prompt := estimateTokens(len(req.Contents))
	id := s.nextID()
	if !stream {
		bp := s.getBuf()
		defer s.putBuf(bp)
		text := s.text.appendText(nil, total)
		*bp = appendGeminiChunk(*bp, text, true, model, id, usage{prompt, total})
		writeBody(w, http.StatusOK, *bp)
		return
	}
	// With alt=sse Google answers server-sent events separated by CRLF
	// pairs; without it, one JSON array written element by element.
	sse := r.URL.Query().Get("alt") == "sse"
	ct := "application/json; charset=UTF-8"
	if sse {
		ct = "text/event-stream"
	}
	st := newStreamer(w, r, ct, s.opts.streamInterval)
	buf := make([]byte, 0, 512)
	for i, tok := range s.text.jsonTokens[:total] {
		if i > 0 && !st.pause() {
			return
		}
		buf = buf[:0]
		switch {
		case sse:
			buf = append(buf, "data: "...)
		case i == 0:
			buf = append(buf, '[')
		default:
			buf = append(buf, ",\r\n"...)
		}
		buf = appendGeminiChunk(buf, tok, i == total-1, model, id, usage{prompt, i + 1})
		switch {
		case sse:
			buf = append(buf, "\r\n\r\n"...)
		case i == total-1:
			buf = append(buf, ']')
		}
		if !st.send(buf) {
			return
		}
	}
}

type geminiBatchEmbedRequest struct {
	Requests []struct {
		Content              json.RawMessage `json:"content"`
		OutputDimensionality int             `json:"outputDimensionality"`
	} `json:"requests"`
}

func (s *server) geminiBatchEmbed(w http.ResponseWriter, r *http.Request) {
	var req geminiBatchEmbedRequest
	if !decode(w, r, familyGoogle, &req) {
		return
	}
	if len(req.Requests) == 0 {
		writeError(w, familyGoogle, http.StatusBadRequest, "* BatchEmbedContentsRequest.requests: requests is not specified")
		return
	}
	bp := s.getBuf()
	defer s.putBuf(bp)
	b := append(*bp, `{"embeddings":[`...)
	for i, it := range req.Requests {
		if i > 0 {
			b = append(b, ',')
		}
		b = append(b, `{"values":`...)
		b = append(b, s.vecs.get(s.dimsOr(it.OutputDimensionality)).floatJSON...)
		b = append(b, '}')
	}
	*bp = append(b, `]}`...)
	writeBody(w, http.StatusOK, *bp)
}

type vertexPredictRequest struct {
	Instances []struct {
		Content string `json:"content"`
	} `json:"instances"`
	Parameters struct {
		OutputDimensionality int `json:"outputDimensionality"`
	} `json:"parameters"`
}

// vertexPredict answers the text-embedding :predict call.
func (s *server) vertexPredict(w http.ResponseWriter, r *http.Request) {
	var req vertexPredictRequest
	if !decode(w, r, familyGoogle, &req) {
		return
	}
	if len(req.Instances) == 0 {
		writeError(w, familyGoogle, http.StatusBadRequest, "instances must not be empty")
		return
	}
	vec := s.vecs.get(s.dimsOr(req.Parameters.OutputDimensionality)).floatJSON
	bp := s.getBuf()
	defer s.putBuf(bp)
	b := append(*bp, `{"predictions":[`...)
	chars := 0
	for i, in := range req.Instances {
		chars += len(in.Content)
		if i > 0 {
			b = append(b, ',')
		}
		b = append(b, `{"embeddings":{"statistics":{"truncated":false,"token_count":`...)
		b = strconv.AppendInt(b, int64(estimateTokens(len(in.Content))), 10)
		b = append(b, `},"values":`...)
		b = append(b, vec...)
		b = append(b, `}}`...)
	}
	b = append(b, `],"metadata":{"billableCharacterCount":`...)
	b = strconv.AppendInt(b, int64(chars), 10)
	*bp = append(b, `}}`...)
	writeBody(w, http.StatusOK, *bp)
}

// dimsOr returns n when it is a sensible request, else the default size.
func (s *server) dimsOr(n int) int {
	if n > 0 && n <= maxDims {
		return n
	}
	return s.opts.dims
}
