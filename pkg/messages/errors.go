package messages

import (
	"encoding/json"
	"net/http"

	"github.com/sluice-gateway/sluice/pkg/api"
	"github.com/sluice-gateway/sluice/pkg/sse"
)

// ErrorBody is Anthropic's error body.
type ErrorBody struct {
	Type  string      `json:"type"` // "error"
	Error ErrorDetail `json:"error"`
}

// ErrorDetail is the inside of ErrorBody.
type ErrorDetail struct {
	Type    string `json:"type"`
	Message string `json:"message"`
}

// errorType is Anthropic's error type for a status.
func errorType(status int) string {
	switch status {
	case http.StatusBadRequest, http.StatusMethodNotAllowed, http.StatusConflict, http.StatusUnprocessableEntity:
		return "invalid_request_error"
	case http.StatusUnauthorized:
		return "authentication_error"
	case http.StatusPaymentRequired:
		return "billing_error"
	case http.StatusForbidden:
		return "permission_error"
	case http.StatusNotFound:
		return "not_found_error"
	case http.StatusRequestEntityTooLarge:
		return "request_too_large"
	case http.StatusTooManyRequests:
		return "rate_limit_error"
	case http.StatusRequestTimeout, http.StatusGatewayTimeout:
		return "timeout_error"
	case 529:
		return "overloaded_error"
	}
	if status < 500 {
		return "invalid_request_error"
	}
	return "api_error"
}

// Body is e in Anthropic's shape.
func Body(e *api.Error) any {
	return ErrorBody{Type: "error", Error: ErrorDetail{Type: errorType(e.Status), Message: e.Message}}
}

// WriteError renders err as Anthropic's error body (api.WriteErrorAs): the
// Messages routes' errors, authentication's included.
func WriteError(w http.ResponseWriter, r *http.Request, err error) {
	api.WriteErrorAs(w, r, err, Body)
}

// ErrorEvent is the event that ends a Messages stream failing midway:
// Anthropic's event: error.
func ErrorEvent(err error) []byte {
	b, _ := json.Marshal(Body(api.AsError(err))) // strings always encode
	return sse.AppendEvent(nil, EventError, b)
}
