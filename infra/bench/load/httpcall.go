package main

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"sync"
	"time"
)

// requestTimeout bounds one request of a load loop.
const requestTimeout = 60 * time.Second

// newClient returns a keep-alive client with a pool large enough for the
// loops' concurrency, and no transparent decompression (which would charge
// the client's CPU to nobody and hide sizes).
func newClient() *http.Client {
	tr := &http.Transport{
		Proxy:               nil,
		DialContext:         (&net.Dialer{Timeout: 5 * time.Second, KeepAlive: 30 * time.Second}).DialContext,
		MaxIdleConns:        4096,
		MaxIdleConnsPerHost: 4096,
		IdleConnTimeout:     90 * time.Second,
		DisableCompression:  true,
	}
	return &http.Client{Transport: tr, Timeout: requestTimeout}
}

// requestSpec is one request, sent the same way many times.
type requestSpec struct {
	Method string
	URL    string
	Header http.Header
	Body   []byte
}

// newRequest builds one http.Request from the spec.
func (s requestSpec) newRequest(ctx context.Context) (*http.Request, error) {
	var body io.Reader
	if s.Body != nil {
		body = bytes.NewReader(s.Body)
	}
	req, err := http.NewRequestWithContext(ctx, s.Method, s.URL, body)
	if err != nil {
		return nil, err
	}
	for k, v := range s.Header {
		req.Header[k] = v
	}
	if s.Body != nil && req.Header.Get("Content-Type") == "" {
		req.Header.Set("Content-Type", "application/json")
	}
	return req, nil
}

// httpCall returns a call that sends spec with client and reads the answer
// to the end, noting when its first body byte arrived.
func httpCall(client *http.Client, spec requestSpec) call {
	// Read buffers are reused across requests to keep the load generator light.
	bufs := &sync.Pool{New: func() any { b := make([]byte, 32<<10); return &b }}
	return func(ctx context.Context) outcome {
		req, err := spec.newRequest(ctx)
		if err != nil {
			return outcome{err: err}
		}
		resp, err := client.Do(req)
		if err != nil {
			return outcome{err: err}
		}
		defer resp.Body.Close()
		out := outcome{status: resp.StatusCode}
		bp := bufs.Get().(*[]byte)
		out.firstByte, out.bytes, out.err = drain(resp.Body, *bp)
		bufs.Put(bp)
		return out
	}
}

// drain reads r to the end through buf and returns when its first byte
// arrived.
func drain(r io.Reader, buf []byte) (first time.Time, n int64, err error) {
	for {
		k, err := r.Read(buf)
		if k > 0 {
			if n == 0 {
				first = time.Now()
			}
			n += int64(k)
		}
		if errors.Is(err, io.EOF) {
			return first, n, nil
		}
		if err != nil {
			return first, n, err
		}
	}
}
