package main

import (
	"encoding/json"
	"math/rand/v2"
	"net/http"
)

// retryAfterSeconds is what injected errors ask the client to wait.
const retryAfterSeconds = "1"

// injectError answers 429 or 500 (even odds) with Retry-After, in the
// provider's own error shape.
func injectError(w http.ResponseWriter, fam family) {
	status, msg := http.StatusTooManyRequests, "Rate limit reached (injected by the bench upstream)."
	if rand.IntN(2) == 0 {
		status, msg = http.StatusInternalServerError, "The server had an error processing your request (injected by the bench upstream)."
	}
	w.Header().Set("Retry-After", retryAfterSeconds)
	writeError(w, fam, status, msg)
}

// writeError renders an error the way the family's provider does.
func writeError(w http.ResponseWriter, fam family, status int, msg string) {
	var body any
	switch fam {
	case familyAnthropic:
		body = map[string]any{"type": "error", "error": map[string]string{"type": anthropicErrorType(status), "message": msg}}
	case familyGoogle:
		body = map[string]any{"error": map[string]any{"code": status, "message": msg, "status": googleStatus(status)}}
	case familyBedrock:
		w.Header().Set("X-Amzn-Errortype", bedrockErrorType(status)+":http://internal.amazon.com/coral/com.amazon.bedrock/")
		body = map[string]string{"message": msg}
	default:
		typ, code := "invalid_request_error", "invalid_value"
		switch {
		case status == http.StatusTooManyRequests:
			typ, code = "requests", "rate_limit_exceeded"
		case status == http.StatusNotFound:
			code = "not_found"
		case status >= 500:
			typ, code = "server_error", "internal_error"
		}
		body = map[string]any{"error": map[string]any{"message": msg, "type": typ, "param": nil, "code": code}}
	}
	b, _ := json.Marshal(body) // maps of strings cannot fail to marshal
	writeBody(w, status, b)
}

func anthropicErrorType(status int) string {
	switch {
	case status == http.StatusTooManyRequests:
		return "rate_limit_error"
	case status == http.StatusNotFound:
		return "not_found_error"
	case status >= 500:
		return "api_error"
	}
	return "invalid_request_error"
}

func googleStatus(status int) string {
	switch {
	case status == http.StatusTooManyRequests:
		return "RESOURCE_EXHAUSTED"
	case status == http.StatusNotFound:
		return "NOT_FOUND"
	case status >= 500:
		return "INTERNAL"
	}
	return "INVALID_ARGUMENT"
}

func bedrockErrorType(status int) string {
	switch {
	case status == http.StatusTooManyRequests:
		return "ThrottlingException"
	case status == http.StatusNotFound:
		return "ResourceNotFoundException"
	case status >= 500:
		return "InternalServerException"
	}
	return "ValidationException"
}
