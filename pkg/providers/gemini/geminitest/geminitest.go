// Package geminitest is a fake generateContent server for tests: it speaks
// the Gemini API's and Vertex AI's wire format (the same for both), answers
// a prompt with text, a conversation offering tools with a function call
// (and its thought signature), the function's result with text, and a few
// user texts with what Gemini does in worse cases. It records nothing
// itself: wrap it in providertest.NewUpstream to see what it received.
package geminitest

import (
	"encoding/json"
	"io"
	"net/http"
	"strings"
)

// Texts a user message may be to make the fake misbehave.
const (
	// Blocked gets a blocked prompt (promptFeedback.blockReason SAFETY).
	Blocked = "blocked"
	// Invalid gets Google's 400 INVALID_ARGUMENT.
	Invalid = "invalid"
)

// Answers the fake gives.
const (
	// Hello answers a plain prompt.
	Hello = "Hello! How can I help?"
	// Weather answers a function's result.
	Weather = "It is 18°C and clear in Paris."
	// Signature is the thought signature of its function calls.
	Signature = "CiQB0e2Kb3cSignature="
)

// Usage is the usageMetadata of every answer (on the last event of a
// stream): 10 prompt tokens, 6 candidate tokens, 4 thinking.
const Usage = `{"promptTokenCount": 10,"candidatesTokenCount": 6,"totalTokenCount": 20,"thoughtsTokenCount": 4,"promptTokensDetails": [{"modality": "TEXT","tokenCount": 10}]}`

// Handler answers generateContent and streamGenerateContent?alt=sse calls
// for any model. authorized (nil: any) checks each call's credential; a call
// it refuses gets Google's 401.
func Handler(authorized func(r *http.Request) bool) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		stream := strings.HasSuffix(r.URL.Path, ":streamGenerateContent")
		switch {
		case r.Method != http.MethodPost || !stream && !strings.HasSuffix(r.URL.Path, ":generateContent"):
			writeError(w, 404, "NOT_FOUND", "Method not found.")
			return
		case stream && r.URL.Query().Get("alt") != "sse":
			writeError(w, 400, "INVALID_ARGUMENT", "This fake streams only with alt=sse.")
			return
		case authorized != nil && !authorized(r):
			writeError(w, 401, "UNAUTHENTICATED", "Request had invalid authentication credentials. Expected OAuth 2 access token, login cookie or other valid authentication credential.")
			return
		}
		var req struct {
			Contents []struct {
				Role  string `json:"role"`
				Parts []struct {
					Text             string          `json:"text"`
					FunctionResponse json.RawMessage `json:"functionResponse"`
				} `json:"parts"`
			} `json:"contents"`
			Tools []json.RawMessage `json:"tools"`
		}
		body, _ := io.ReadAll(r.Body)
		if err := json.Unmarshal(body, &req); err != nil || len(req.Contents) == 0 {
			writeError(w, 400, "INVALID_ARGUMENT", "* GenerateContentRequest.contents: contents is not specified\n")
			return
		}
		last := req.Contents[len(req.Contents)-1]
		lastPart := last.Parts[len(last.Parts)-1]
		var events []string
		switch {
		case lastPart.Text == Invalid:
			writeError(w, 400, "INVALID_ARGUMENT", "Request contains an invalid argument.")
			return
		case lastPart.Text == Blocked:
			events = []string{`{"promptFeedback": {"blockReason": "SAFETY","safetyRatings": [{"category": "HARM_CATEGORY_HARASSMENT","probability": "HIGH"}]},"usageMetadata": {"promptTokenCount": 10,"totalTokenCount": 10},"modelVersion": "gemini-2.5-flash"}`}
		case lastPart.FunctionResponse != nil:
			events = textEvents(Weather)
		case len(req.Tools) > 0:
			events = []string{`{"candidates": [{"content": {"parts": [{"functionCall": {"name": "get_weather","args": {"city": "Paris"}},"thoughtSignature": "` + Signature + `"}],"role": "model"},"finishReason": "STOP","index": 0}],"usageMetadata": ` + Usage + `,"modelVersion": "gemini-2.5-flash","responseId": "fake-2"}`}
		default:
			events = textEvents(Hello)
		}
		if !stream {
			w.Header().Set("Content-Type", "application/json; charset=UTF-8")
			io.WriteString(w, merge(events))
			return
		}
		w.Header().Set("Content-Type", "text/event-stream")
		for _, e := range events {
			io.WriteString(w, "data: "+e+"\r\n\r\n")
			w.(http.Flusher).Flush()
		}
	}
}

// textEvents streams text in two events: a thought and the text's first
// word, then the rest with the finish reason and the usage.
func textEvents(text string) []string {
	first, rest, _ := strings.Cut(text, " ")
	q := func(s string) string { b, _ := json.Marshal(s); return string(b) }
	return []string{
		`{"candidates": [{"content": {"parts": [{"text": "**Answering**\n","thought": true},{"text": ` + q(first+" ") + `}],"role": "model"},"index": 0}],"modelVersion": "gemini-2.5-flash","responseId": "fake-1"}`,
		`{"candidates": [{"content": {"parts": [{"text": ` + q(rest) + `}],"role": "model"},"finishReason": "STOP","index": 0}],"usageMetadata": ` + Usage + `,"modelVersion": "gemini-2.5-flash","responseId": "fake-1"}`,
	}
}

// merge makes the whole answer of a stream's events: their parts joined
// in one candidate, the last event's finish reason, usage and feedback.
func merge(events []string) string {
	type candidate struct {
		Content struct {
			Parts []json.RawMessage `json:"parts"`
			Role  string            `json:"role"`
		} `json:"content"`
		FinishReason string `json:"finishReason,omitempty"`
		Index        int    `json:"index"`
	}
	var out struct {
		Candidates     []candidate     `json:"candidates,omitempty"`
		PromptFeedback json.RawMessage `json:"promptFeedback,omitempty"`
		UsageMetadata  json.RawMessage `json:"usageMetadata,omitempty"`
		ModelVersion   string          `json:"modelVersion"`
	}
	for _, e := range events {
		var ev struct {
			Candidates     []candidate     `json:"candidates"`
			PromptFeedback json.RawMessage `json:"promptFeedback"`
			UsageMetadata  json.RawMessage `json:"usageMetadata"`
			ModelVersion   string          `json:"modelVersion"`
		}
		json.Unmarshal([]byte(e), &ev)
		for _, c := range ev.Candidates {
			if len(out.Candidates) == 0 {
				out.Candidates = append(out.Candidates, c)
				continue
			}
			out.Candidates[0].Content.Parts = append(out.Candidates[0].Content.Parts, c.Content.Parts...)
			out.Candidates[0].FinishReason = c.FinishReason
		}
		out.PromptFeedback, out.UsageMetadata, out.ModelVersion = ev.PromptFeedback, ev.UsageMetadata, ev.ModelVersion
	}
	b, _ := json.MarshalIndent(out, "", "  ")
	return string(b)
}

func writeError(w http.ResponseWriter, code int, status, message string) {
	w.Header().Set("Content-Type", "application/json; charset=UTF-8")
	w.WriteHeader(code)
	b, _ := json.Marshal(map[string]any{"error": map[string]any{"code": code, "message": message, "status": status}})
	w.Write(b)
}
