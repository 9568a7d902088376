package lambdaedge

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/lambda"

	"github.com/sluice-gateway/sluice/pkg/lambdaedge/rie"
)

func TestStreamingFormat(t *testing.T) {
	h := http.NewServeMux()
	h.HandleFunc("POST /sse", func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		w.Header().Set("Content-Type", "text/event-stream")
		w.Header().Add("X-Multi", "1")
		w.Header().Add("X-Multi", "2")
		w.Header().Add("Set-Cookie", "a=1")
		w.Header().Add("Set-Cookie", "b=2")
		w.WriteHeader(http.StatusAccepted)
		w.Write([]byte("data: " + string(body) + "\n\n"))
		http.NewResponseController(w).Flush()
		w.Write([]byte("data: [DONE]\n\n"))
	})
	h.HandleFunc("GET /html", func(w http.ResponseWriter, r *http.Request) {
		w.Write([]byte("<!DOCTYPE html><html></html>"))
	})
	h.HandleFunc("DELETE /nobody", func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(http.StatusNoContent)
		if _, err := w.Write([]byte("x")); !errors.Is(err, http.ErrBodyNotAllowed) {
			panic("a 204 took a body")
		}
	})
	h.HandleFunc("GET /silent", func(w http.ResponseWriter, r *http.Request) {})
	h.HandleFunc("GET /panic", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("X-Partial", "yes")
		panic("boom")
	})
	fn := lambda.NewHandler(Streaming(h))

	t.Run("prelude, delimiter, body", func(t *testing.T) {
		e := restEvent("POST", "/sse")
		e.Body = "aGk="
		e.IsBase64Encoded = true
		out, err := invoke(t, fn, e)
		if err != nil {
			t.Fatal(err)
		}
		head, body, ok := bytes.Cut(out, make([]byte, 8))
		if !ok {
			t.Fatalf("no delimiter in %q", out)
		}
		var p map[string]any
		if err := json.Unmarshal(head, &p); err != nil {
			t.Fatalf("prelude %q: %v", head, err)
		}
		if p["statusCode"] != float64(202) {
			t.Errorf("prelude %s", head)
		}
		if string(body) != "data: hi\n\ndata: [DONE]\n\n" {
			t.Errorf("body %q", body)
		}
		resp, err := rie.DecodeHTTP(true, out)
		if err != nil {
			t.Fatal(err)
		}
		if resp.Header.Get("Content-Type") != "text/event-stream" || !slices.Equal(resp.Header.Values("X-Multi"), []string{"1", "2"}) ||
			!slices.Equal(resp.Cookies, []string{"a=1", "b=2"}) {
			t.Errorf("header %v cookies %v", resp.Header, resp.Cookies)
		}
	})
	for _, tc := range []struct {
		name, method, path string
		status             int
		contentType        string
		body               string
	}{
		{"content type sniffed from the first write", "GET", "/html", 200, "text/html; charset=utf-8", "<!DOCTYPE html><html></html>"},
		{"no body for 204", "DELETE", "/nobody", 204, "", ""},
		{"a handler that writes nothing answers 200", "GET", "/silent", 200, "", ""},
		{"unknown route", "GET", "/nowhere", 404, "text/plain; charset=utf-8", "404 page not found\n"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			resp := answer(t, fn, true, restEvent(tc.method, tc.path))
			if resp.Status != tc.status || resp.Header.Get("Content-Type") != tc.contentType || string(resp.Body) != tc.body {
				t.Errorf("got %d %q %q", resp.Status, resp.Header.Get("Content-Type"), resp.Body)
			}
		})
	}
	t.Run("panic before the answer began is a clean 500", func(t *testing.T) {
		resp := answer(t, fn, true, restEvent("GET", "/panic"))
		if resp.Status != 500 || errorCode(t, resp.Body) != "internal_error" || resp.Header.Get("X-Partial") != "" {
			t.Errorf("got %d %v %s", resp.Status, resp.Header, resp.Body)
		}
	})
	t.Run("bad event is a 400", func(t *testing.T) {
		resp := answer(t, fn, true, restEvent("GET", "no-slash"))
		if resp.Status != 400 || errorCode(t, resp.Body) != "invalid_value" {
			t.Errorf("got %d %s", resp.Status, resp.Body)
		}
	})
}

// readUntil reads from r until the bytes read contain want, or fails after a
// few seconds.
func readUntil(t *testing.T, r io.Reader, got *bytes.Buffer, want string) {
	t.Helper()
	done := make(chan error, 1)
	go func() {
		buf := make([]byte, 512)
		for !bytes.Contains(got.Bytes(), []byte(want)) {
			n, err := r.Read(buf)
			got.Write(buf[:n])
			if err != nil {
				done <- err
				return
			}
		}
		done <- nil
	}()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("stream ended (%v) before %q; got %q", err, want, got)
		}
	case <-time.After(5 * time.Second):
		t.Fatalf("%q did not arrive; got %q", want, got)
	}
}

// TestStreamingSendsWhatIsFlushed: a flushed piece can be read while the
// handler is still running; the rest follows when it writes it.
func TestStreamingSendsWhatIsFlushed(t *testing.T) {
	release := make(chan struct{})
	var finished atomic.Bool
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		defer finished.Store(true)
		w.Header().Set("Content-Type", "text/event-stream")
		w.Write([]byte("data: first\n\n"))
		w.(http.Flusher).Flush()
		<-release
		w.Write([]byte("data: second\n\n"))
	})
	e := restEvent("POST", "/v1/chat/completions")
	resp, err := Streaming(h)(context.Background(), &e)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Close()
	var got bytes.Buffer
	readUntil(t, resp, &got, "data: first\n\n")
	if finished.Load() {
		t.Fatal("the handler finished before its first piece was read")
	}
	close(release)
	rest, err := io.ReadAll(resp)
	if err != nil {
		t.Fatal(err)
	}
	if string(rest) != "data: second\n\n" {
		t.Errorf("rest %q", rest)
	}
}

// TestStreamingPanicAfterStart: a panic once the answer began cuts the
// stream with an error instead of a clean end.
func TestStreamingPanicAfterStart(t *testing.T) {
	for name, v := range map[string]any{"panic": "boom", "abort": http.ErrAbortHandler} {
		t.Run(name, func(t *testing.T) {
			h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				w.Write([]byte("partial"))
				w.(http.Flusher).Flush()
				panic(v)
			})
			e := restEvent("GET", "/x")
			resp, err := Streaming(h)(context.Background(), &e)
			if err != nil {
				t.Fatal(err)
			}
			out, err := io.ReadAll(resp)
			if err == nil {
				t.Fatalf("stream ended cleanly: %q", out)
			}
			if !bytes.HasSuffix(out, []byte("partial")) {
				t.Errorf("read %q", out)
			}
		})
	}
	t.Run("abort before the answer began is a function error", func(t *testing.T) {
		h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { panic(http.ErrAbortHandler) })
		e := restEvent("GET", "/x")
		if _, err := Streaming(h)(context.Background(), &e); err == nil {
			t.Error("no error")
		}
	})
}

// TestStreamingClosedByRuntime: when the runtime stops reading (the Runtime
// API went away), the handler's writes fail instead of blocking forever.
func TestStreamingClosedByRuntime(t *testing.T) {
	writeErr := make(chan error, 1)
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Write([]byte("x"))
		w.(http.Flusher).Flush()
		for {
			if _, err := w.Write(bytes.Repeat([]byte("y"), 64<<10)); err != nil {
				writeErr <- err
				return
			}
		}
	})
	e := restEvent("GET", "/x")
	resp, err := Streaming(h)(context.Background(), &e)
	if err != nil {
		t.Fatal(err)
	}
	resp.Close()
	select {
	case err := <-writeErr:
		if !errors.Is(err, io.ErrClosedPipe) {
			t.Errorf("write error %v", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("the handler is still blocked writing")
	}
}

// TestStreamingBinaryBody: a binary passthrough body (audio, as API Gateway
// delivers the binary media types: base64, isBase64Encoded) reaches the
// handler byte for byte, bytes that are no UTF-8 included.
func TestStreamingBinaryBody(t *testing.T) {
	audio := make([]byte, 64<<10)
	for i := range audio {
		audio[i] = byte(i*7 + i>>8) // every byte value, 0x80–0xff included
	}
	var got []byte
	fn := lambda.NewHandler(Streaming(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		got, _ = io.ReadAll(r.Body)
		w.WriteHeader(http.StatusNoContent)
	})))
	e := restEvent("POST", "/gemini/upload/v1beta/files")
	e.MultiValueHeaders["Content-Type"] = []string{"audio/wav"}
	e.Body = base64.StdEncoding.EncodeToString(audio)
	e.IsBase64Encoded = true
	if _, err := invoke(t, fn, e); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, audio) {
		t.Errorf("the handler read %d bytes, not the %d sent", len(got), len(audio))
	}
}
