package providers

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"mime"
	"net/http"
	"net/url"
	"strings"

	"github.com/sluice-gateway/sluice/pkg/models"
)

// MaxAnswerBytes bounds one provider answer, which is read whole to be
// translated: 2048 vectors of 3072 floats as text is about 70 MB at worst,
// and no single call carries more than 250 of them.
const MaxAnswerBytes = 64 << 20

// Response is a provider's successful JSON answer, read whole.
type Response struct {
	Status int
	Header http.Header
	Body   []byte
}

// NewRequest builds a provider's JSON POST to url with v encoded as the
// body. It returns the body's bytes too, for providers that sign them.
func NewRequest(ctx context.Context, provider, url string, v any) (*http.Request, []byte, error) {
	body, err := json.Marshal(v)
	if err != nil {
		return nil, nil, fmt.Errorf("%s: encode the request: %w", provider, err)
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, bytes.NewReader(body))
	if err != nil {
		return nil, nil, fmt.Errorf("%s: build the request: %w", provider, err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json")
	return req, body, nil
}

// Post posts v, encoded as JSON, to url with the credential authorize puts
// on the request (it gets the body too, for a signature), and reads the
// answer as DoInto does, into buf when it has room.
func Post(ctx context.Context, client *http.Client, provider, url string, v any, authorize func(*http.Request, []byte) error, buf []byte) (*Response, error) {
	req, body, err := NewRequest(ctx, provider, url, v)
	if err != nil {
		return nil, err
	}
	if err := authorize(req, body); err != nil {
		return nil, err
	}
	return DoInto(client, provider, req, models.ReadProviderError, buf)
}

// Do sends req through client and reads its JSON answer whole (to be
// translated). An answer other
// than 2xx is a *models.ProviderError (its message read from the body); an
// answer that is not JSON, or larger than MaxAnswerBytes, too (the router
// reports it as the provider's unexpected answer). Transport failures come
// back wrapped, so timeouts stay recognisable.
func Do(client *http.Client, provider string, req *http.Request) (*Response, error) {
	return DoWith(client, provider, req, models.ReadProviderError)
}

// ErrorReader reads (and closes) a provider's answer other than 2xx as its
// error: models.ReadProviderError, or a vendor's own reader.
type ErrorReader func(provider string, resp *http.Response) *models.ProviderError

// DoWith is Do with the vendor's error reader.
func DoWith(client *http.Client, provider string, req *http.Request, readError ErrorReader) (*Response, error) {
	return DoInto(client, provider, req, readError, nil)
}

// DoInto is DoWith reading an answer of known length into buf when it has
// room (into a new slice otherwise): a caller that reuses its buffers
// saves allocating every answer it translates.
func DoInto(client *http.Client, provider string, req *http.Request, readError ErrorReader, buf []byte) (*Response, error) {
	resp, err := send(client, provider, req, readError, jsonMediaType, notJSON)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	if resp.ContentLength > MaxAnswerBytes {
		return nil, tooLarge(provider, resp.StatusCode)
	}
	var body []byte
	if resp.ContentLength >= 0 {
		if body = buf[:0]; int64(cap(body)) < resp.ContentLength {
			body = make([]byte, 0, resp.ContentLength)
		}
		body = body[:resp.ContentLength]
		_, err = io.ReadFull(resp.Body, body)
	} else {
		body, err = io.ReadAll(io.LimitReader(resp.Body, MaxAnswerBytes+1))
		if err == nil && len(body) > MaxAnswerBytes {
			return nil, tooLarge(provider, resp.StatusCode)
		}
	}
	if err != nil {
		return nil, fmt.Errorf("%s %s: read the answer: %w", provider, req.URL.Path, err)
	}
	return &Response{Status: resp.StatusCode, Header: resp.Header, Body: body}, nil
}

func tooLarge(provider string, status int) *models.ProviderError {
	return &models.ProviderError{Provider: provider, Status: status,
		Message: fmt.Sprintf("answered more than %d bytes", MaxAnswerBytes)}
}

// Send sends a provider call. A client that refuses redirects and has no
// timeout or cookie jar, as NewHTTPClient's, would add nothing to its
// transport but a copy of every header (for redirects it never follows):
// the call goes to the transport directly, which saves a tenth of a relayed
// call's CPU. Any other client is used as it is.
func Send(client *http.Client, req *http.Request) (*http.Response, error) {
	if client.Jar != nil || client.Timeout != 0 || client.CheckRedirect == nil {
		return client.Do(req)
	}
	t := client.Transport
	if t == nil {
		t = http.DefaultTransport
	}
	resp, err := t.RoundTrip(req)
	if err != nil {
		return nil, &url.Error{Op: req.Method[:1] + strings.ToLower(req.Method[1:]), URL: req.URL.Redacted(), Err: err}
	}
	return resp, nil
}

// Relay sends a call whose JSON answer is relayed as it comes: the Answer's
// body is the response's, unread (the caller closes it). An answer other
// than 2xx (or one that is not JSON) is a *models.ProviderError; a transport
// failure comes back wrapped.
func Relay(client *http.Client, provider string, req *http.Request) (*models.Answer, error) {
	resp, err := send(client, provider, req, models.ReadProviderError, jsonMediaType, notJSON)
	if err != nil {
		return nil, err
	}
	return &models.Answer{Body: resp.Body, ContentLength: resp.ContentLength}, nil
}

const notJSON = "answered with Content-Type %q, not JSON"

// send sends a call and checks its answer: 2xx (else readError's error),
// with a Content-Type accept allows (else a *models.ProviderError whose
// message is refused with the media type read).
func send(client *http.Client, provider string, req *http.Request, readError ErrorReader, accept func(ct string) (string, bool), refused string) (*http.Response, error) {
	resp, err := Send(client, req)
	if err != nil {
		return nil, fmt.Errorf("%s %s: %w", provider, req.URL.Path, err)
	}
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		return nil, readError(provider, resp)
	}
	var ct string
	if v := resp.Header["Content-Type"]; len(v) > 0 { // the transport's keys are canonical: Get's pass over the key is not needed
		ct = v[0]
	}
	if mt, ok := accept(ct); !ok {
		resp.Body.Close()
		return nil, &models.ProviderError{Provider: provider, Status: resp.StatusCode, Message: fmt.Sprintf(refused, mt)}
	}
	return resp, nil
}

// jsonMediaType reports whether an answer's Content-Type allows JSON: none,
// application/json or a +json type. It returns the media type it read.
func jsonMediaType(ct string) (string, bool) {
	if ct == "" || ct == "application/json" { // the usual answers: nothing to parse
		return ct, true
	}
	mt, _, _ := mime.ParseMediaType(ct)
	return mt, mt == "application/json" || strings.HasSuffix(mt, "+json")
}

// RelayStream sends a call whose answer is an event stream
// (text/event-stream), relayed as it comes: the Answer's body is the
// response's, unread (the caller closes it). An answer other than 2xx, or
// one that is not an event stream, is a *models.ProviderError; a transport
// failure comes back wrapped.
func RelayStream(client *http.Client, provider string, req *http.Request) (*models.Answer, error) {
	return RelayStreamWith(client, provider, req, models.ReadProviderError)
}

// RelayStreamWith is RelayStream with the vendor's error reader.
func RelayStreamWith(client *http.Client, provider string, req *http.Request, readError ErrorReader) (*models.Answer, error) {
	resp, err := send(client, provider, req, readError, eventStreamType, "answered a streamed call with Content-Type %q, not an event stream")
	if err != nil {
		return nil, err
	}
	return &models.Answer{Body: resp.Body, ContentLength: -1}, nil
}

// eventStreamType reports whether an answer's Content-Type is
// text/event-stream. It returns the media type it read.
func eventStreamType(ct string) (string, bool) {
	if ct == "text/event-stream" { // the usual answer: nothing to parse
		return ct, true
	}
	mt, _, _ := mime.ParseMediaType(ct)
	return mt, mt == "text/event-stream"
}
