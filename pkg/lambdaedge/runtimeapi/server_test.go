package runtimeapi

import (
	"bytes"
	"context"
	"encoding/base64"
	"io"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/sluice-gateway/sluice/pkg/lambdaedge/rie"
)

// runtime is a hand-written Runtime API client, as a custom runtime would be.
type customRuntime struct {
	t    *testing.T
	base string
}

func (rt customRuntime) next() (id string, h http.Header, event []byte) {
	rt.t.Helper()
	resp, err := http.Get(rt.base + "/2018-06-01/runtime/invocation/next")
	if err != nil {
		rt.t.Fatal(err)
	}
	defer resp.Body.Close()
	event, _ = io.ReadAll(resp.Body)
	return resp.Header.Get(HeaderRequestID), resp.Header, event
}

func (rt customRuntime) post(path string, body io.Reader, header http.Header, trailer http.Header) int {
	rt.t.Helper()
	req, _ := http.NewRequest("POST", rt.base+"/2018-06-01/runtime/"+path, body)
	for k, v := range header {
		req.Header[k] = v
	}
	req.Trailer = trailer
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		rt.t.Fatal(err)
	}
	resp.Body.Close()
	return resp.StatusCode
}

func start(t *testing.T) (*Server, customRuntime) {
	s, err := NewServer()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s, customRuntime{t: t, base: "http://" + s.Addr()}
}

// invokeAsync runs Invoke in the background.
func invokeAsync(s *Server, event string, onChunk func(Chunk)) <-chan *Result {
	out := make(chan *Result, 1)
	go func() {
		r, err := s.Invoke(context.Background(), []byte(event), onChunk)
		if err != nil {
			r = &Result{Error: &FunctionError{Type: "InvokeFailed", Message: err.Error()}}
		}
		out <- r
	}()
	return out
}

func TestNextAndBufferedResponse(t *testing.T) {
	s, rt := start(t)
	s.Timeout = 3 * time.Second
	done := invokeAsync(s, `{"n":1}`, nil)
	before := time.Now()
	id, h, event := rt.next()
	select {
	case <-s.Ready():
	default:
		t.Error("not ready after the first /next")
	}
	if string(event) != `{"n":1}` || id == "" || h.Get(HeaderFunctionARN) == "" || !strings.HasPrefix(h.Get(HeaderTraceID), "Root=1-") {
		t.Fatalf("next: %q %q %v", id, event, h)
	}
	ms, _ := strconv.ParseInt(h.Get(HeaderDeadline), 10, 64)
	if d := time.UnixMilli(ms).Sub(before); d < 2*time.Second || d > 4*time.Second {
		t.Errorf("deadline in %v, want about 3s", d)
	}
	if code := rt.post("invocation/not-an-id/response", strings.NewReader("x"), nil, nil); code != http.StatusBadRequest {
		t.Errorf("unknown id answered %d", code)
	}
	if code := rt.post("invocation/"+id+"/response", strings.NewReader(`{"ok":true}`), http.Header{"Content-Type": {"application/json"}}, nil); code != http.StatusAccepted {
		t.Fatalf("response answered %d", code)
	}
	r := <-done
	if r.Error != nil || string(r.Body) != `{"ok":true}` || r.Streamed || r.RequestID != id || r.Done.Before(r.Taken) {
		t.Errorf("result %+v", r)
	}
	if code := rt.post("invocation/"+id+"/response", strings.NewReader("again"), nil, nil); code != http.StatusBadRequest {
		t.Errorf("a second answer got %d", code)
	}
}

func TestStreamingResponseWithErrorTrailers(t *testing.T) {
	s, rt := start(t)
	var chunks []string
	done := invokeAsync(s, `{}`, func(c Chunk) { chunks = append(chunks, string(c.Data)) })
	id, _, _ := rt.next()
	pr, pw := io.Pipe()
	trailer := http.Header{TrailerErrorType: nil, TrailerErrorBody: nil}
	go func() {
		pw.Write([]byte("one"))
		time.Sleep(20 * time.Millisecond)
		pw.Write([]byte("two"))
		trailer.Set(TrailerErrorType, "Runtime.StreamError")
		trailer.Set(TrailerErrorBody, base64.StdEncoding.EncodeToString([]byte(`{"errorMessage":"upstream died","errorType":"Runtime.StreamError"}`)))
		pw.Close()
	}()
	code := rt.post("invocation/"+id+"/response", pr, http.Header{HeaderResponseMode: {"streaming"}, "Content-Type": {rie.StreamContentType}}, trailer)
	if code != http.StatusAccepted {
		t.Fatalf("answered %d", code)
	}
	r := <-done
	if !r.Streamed || string(r.Body) != "onetwo" || len(r.Chunks) != 2 || strings.Join(chunks, "|") != "one|two" {
		t.Errorf("streamed %v body %q chunks %q", r.Streamed, r.Body, chunks)
	}
	if r.Error == nil || r.Error.Type != "Runtime.StreamError" || r.Error.Message != "upstream died" {
		t.Errorf("error %+v", r.Error)
	}
}

func TestBufferedResponseTooLarge(t *testing.T) {
	s, rt := start(t)
	done := invokeAsync(s, `{}`, nil)
	id, _, _ := rt.next()
	code := rt.post("invocation/"+id+"/response", bytes.NewReader(make([]byte, MaxBufferedResponse+1)), nil, nil)
	if code != http.StatusRequestEntityTooLarge {
		t.Errorf("answered %d", code)
	}
	if r := <-done; r.Error == nil || r.Error.Type != "Function.ResponseSizeTooLarge" {
		t.Errorf("error %+v", r.Error)
	}
}

func TestInvocationErrorAndInitError(t *testing.T) {
	s, rt := start(t)
	done := invokeAsync(s, `{}`, nil)
	id, _, _ := rt.next()
	rt.post("invocation/"+id+"/error", strings.NewReader(`{"errorMessage":"bad input","errorType":"ValidationError"}`),
		http.Header{HeaderErrorType: {"Function.ValidationError"}}, nil)
	if r := <-done; r.Error == nil || r.Error.Type != "Function.ValidationError" || r.Error.Message != "bad input" {
		t.Errorf("error %+v", r.Error)
	}

	rt.post("init/error", strings.NewReader(`{"errorMessage":"no config","errorType":"Runtime.InitError"}`), nil, nil)
	if fe := s.InitError(); fe == nil || fe.Message != "no config" {
		t.Errorf("init error %+v", fe)
	}
	if _, err := s.Invoke(context.Background(), []byte(`{}`), nil); err == nil || !strings.Contains(err.Error(), "no config") {
		t.Errorf("Invoke after an init error: %v", err)
	}
}

func TestInvokeTimesOut(t *testing.T) {
	s, rt := start(t)
	s.Timeout = 50 * time.Millisecond
	done := invokeAsync(s, `{}`, nil)
	rt.next()
	if r := <-done; r.Error == nil || !strings.Contains(r.Error.Message, "timed out") {
		t.Errorf("result %+v", r)
	}
}

// TestStreamingContract: a streamed answer that breaks the contract of
// custom runtimes fails the invocation, naming what it broke.
func TestStreamingContract(t *testing.T) {
	errorBody := base64.StdEncoding.EncodeToString([]byte(`{"errorMessage":"upstream died","errorType":"Runtime.StreamError"}`))
	for _, tc := range []struct {
		name    string
		header  http.Header
		chunked bool
		trailer http.Header
		fail    func(trailer http.Header) // sets trailers once the body is sent
		want    string
	}{
		{"no response mode", http.Header{"Content-Type": {rie.StreamContentType}}, true, nil, nil,
			"without Lambda-Runtime-Function-Response-Mode: streaming"},
		{"another response mode", http.Header{HeaderResponseMode: {"buffered"}, "Content-Type": {"application/json"}}, true, nil, nil,
			`"buffered" is no response mode`},
		{"not chunked", http.Header{HeaderResponseMode: {"streaming"}, "Content-Type": {rie.StreamContentType}}, false, nil, nil,
			"not sent with Transfer-Encoding: chunked"},
		{"no content type", http.Header{HeaderResponseMode: {"streaming"}}, true, http.Header{TrailerErrorType: nil, TrailerErrorBody: nil}, nil,
			"without a Content-Type"},
		{"trailers not declared", http.Header{HeaderResponseMode: {"streaming"}, "Content-Type": {rie.StreamContentType}}, true,
			http.Header{TrailerErrorType: nil}, nil, "does not declare the trailer Lambda-Runtime-Function-Error-Body"},
		{"an error type without its document", http.Header{HeaderResponseMode: {"streaming"}, "Content-Type": {rie.StreamContentType}}, true,
			http.Header{TrailerErrorType: nil, TrailerErrorBody: nil},
			func(tr http.Header) { tr.Set(TrailerErrorType, "Runtime.StreamError") }, "is no error document"},
		{"an error document not in base64", http.Header{HeaderResponseMode: {"streaming"}, "Content-Type": {rie.StreamContentType}}, true,
			http.Header{TrailerErrorType: nil, TrailerErrorBody: nil}, func(tr http.Header) {
				tr.Set(TrailerErrorType, "Runtime.StreamError")
				tr.Set(TrailerErrorBody, `{"errorMessage":"upstream died","errorType":"Runtime.StreamError"}`)
			}, "is not base64"},
		{"an error document without its type", http.Header{HeaderResponseMode: {"streaming"}, "Content-Type": {rie.StreamContentType}}, true,
			http.Header{TrailerErrorType: nil, TrailerErrorBody: nil},
			func(tr http.Header) { tr.Set(TrailerErrorBody, errorBody) }, "without Lambda-Runtime-Function-Error-Type"},
		{"an error document that is none", http.Header{HeaderResponseMode: {"streaming"}, "Content-Type": {rie.StreamContentType}}, true,
			http.Header{TrailerErrorType: nil, TrailerErrorBody: nil}, func(tr http.Header) {
				tr.Set(TrailerErrorType, "Runtime.StreamError")
				tr.Set(TrailerErrorBody, base64.StdEncoding.EncodeToString([]byte("upstream died")))
			}, "is no error document"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s, rt := start(t)
			errc := make(chan error, 1)
			go func() {
				_, err := s.Invoke(context.Background(), []byte(`{}`), nil)
				errc <- err
			}()
			id, _, _ := rt.next()
			var body io.Reader = strings.NewReader("partial")
			if tc.chunked {
				pr, pw := io.Pipe()
				go func() {
					pw.Write([]byte("partial"))
					if tc.fail != nil {
						tc.fail(tc.trailer)
					}
					pw.Close()
				}()
				body = pr
			}
			rt.post("invocation/"+id+"/response", body, tc.header, tc.trailer)
			if err := <-errc; err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("Invoke: %v, want an error saying %q", err, tc.want)
			}
		})
	}
}
