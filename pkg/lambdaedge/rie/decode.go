package rie

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
)

// StreamContentType is the content type of an HTTP answer streamed in API
// Gateway's format (JSON prelude, 8 NUL bytes, body).
const StreamContentType = "application/vnd.awslambda.http-integration-response"

// preludeDelimiter ends a streamed answer's prelude.
var preludeDelimiter = make([]byte, 8)

// maxPrelude is where API Gateway stops looking for the delimiter.
const maxPrelude = 16 << 10

// HTTPResponse is an HTTP answer as API Gateway would turn it into a response.
type HTTPResponse struct {
	Status  int
	Header  http.Header
	Cookies []string
	Body    []byte
	// BodyOffset is where the body starts in the raw answer (the prelude's
	// length for a streamed answer), to map Result.Chunks onto the body.
	BodyOffset int
}

// DecodeHTTP reads a function's HTTP answer: a streamed one (API Gateway's
// response-streaming format) when streamed is true, else a buffered
// APIGatewayProxyResponse document.
func DecodeHTTP(streamed bool, payload []byte) (*HTTPResponse, error) {
	if streamed {
		return decodeStreamed(payload)
	}
	return decodeBuffered(payload)
}

// metadata is the JSON both formats share.
type metadata struct {
	StatusCode        int                 `json:"statusCode"`
	Headers           map[string]string   `json:"headers"`
	MultiValueHeaders map[string][]string `json:"multiValueHeaders"`
	Cookies           []string            `json:"cookies"`
	Body              string              `json:"body"`
	IsBase64Encoded   bool                `json:"isBase64Encoded"`
}

func (m metadata) response() (*HTTPResponse, error) {
	if m.StatusCode < 100 || m.StatusCode > 999 {
		return nil, fmt.Errorf("rie: statusCode %d is not an HTTP status", m.StatusCode)
	}
	r := &HTTPResponse{Status: m.StatusCode, Header: http.Header{}, Cookies: m.Cookies}
	// As API Gateway does, multiValueHeaders and headers are merged.
	for k, vs := range m.MultiValueHeaders {
		for _, v := range vs {
			r.Header.Add(k, v)
		}
	}
	for k, v := range m.Headers {
		if _, dup := m.MultiValueHeaders[k]; !dup {
			r.Header.Add(k, v)
		}
	}
	return r, nil
}

func decodeBuffered(payload []byte) (*HTTPResponse, error) {
	var m metadata
	if err := json.Unmarshal(payload, &m); err != nil {
		return nil, fmt.Errorf("rie: the answer is not an API Gateway proxy response: %w", err)
	}
	r, err := m.response()
	if err != nil {
		return nil, err
	}
	r.Body = []byte(m.Body)
	if m.IsBase64Encoded {
		if r.Body, err = base64.StdEncoding.DecodeString(m.Body); err != nil {
			return nil, fmt.Errorf("rie: isBase64Encoded body: %w", err)
		}
	}
	return r, nil
}

func decodeStreamed(payload []byte) (*HTTPResponse, error) {
	i := bytes.Index(payload, preludeDelimiter)
	if i < 0 || i > maxPrelude {
		return nil, errors.New("rie: no prelude delimiter (8 NUL bytes) in the first 16 KB of the streamed answer")
	}
	var m metadata
	if err := json.Unmarshal(payload[:i], &m); err != nil {
		return nil, fmt.Errorf("rie: streamed answer prelude: %w", err)
	}
	r, err := m.response()
	if err != nil {
		return nil, err
	}
	r.BodyOffset = i + len(preludeDelimiter)
	r.Body = payload[r.BodyOffset:]
	return r, nil
}
