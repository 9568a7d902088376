package oai

import "encoding/json"

// BatchOutputLine is a line of an OpenAI batch's output or error file,
// the one declaration of that shape: written by a vendor's native batch job
// (Bedrock's), read by the batch engine for each line's log event.
//
//	{"id":"batch_req_…","custom_id":"…","response":{"status_code":200,"request_id":"…","body":{…}},"error":null}
//	{"id":"batch_req_…","custom_id":"…","response":null,"error":{"code":"…","message":"…"}}
type BatchOutputLine struct {
	ID       string             `json:"id"`
	CustomID string             `json:"custom_id"`
	Response *BatchLineResponse `json:"response"`
	Error    *BatchLineError    `json:"error"`
}

// BatchLineResponse is the answer a batch line got.
type BatchLineResponse struct {
	StatusCode int             `json:"status_code"`
	RequestID  string          `json:"request_id"`
	Body       json.RawMessage `json:"body"`
}

// BatchLineError is why a batch line got no answer.
type BatchLineError struct {
	Code    string `json:"code"`
	Message string `json:"message"`
}
