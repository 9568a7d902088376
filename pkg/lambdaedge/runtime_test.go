package lambdaedge

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"

	"github.com/sluice-gateway/sluice/pkg/lambdaedge/rie"
	"github.com/sluice-gateway/sluice/pkg/lambdaedge/rie/rietest"
	"github.com/sluice-gateway/sluice/pkg/lambdaedge/runtimeapi"
)

// The tests below run testdata/edgefn — built once, with the production
// flags — under the Runtime API harness, as Lambda runs a function.

var (
	buildDir  string
	buildOnce sync.Once
	edgefn    string
	buildErr  error
)

func TestMain(m *testing.M) {
	code := m.Run()
	if buildDir != "" {
		os.RemoveAll(buildDir)
	}
	os.Exit(code)
}

func edgeBootstrap(t *testing.T) string {
	t.Helper()
	buildOnce.Do(func() {
		if buildDir, buildErr = os.MkdirTemp("", "lambdaedge-"); buildErr != nil {
			return
		}
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
		defer cancel()
		var paths map[string]string
		paths, buildErr = rie.Build(ctx, ".", buildDir, "", "", "./testdata/edgefn")
		edgefn = paths["edgefn"]
	})
	if buildErr != nil {
		t.Fatal(buildErr)
	}
	return edgefn
}

// startEdge runs edgefn in mode under a fresh Runtime API.
func startEdge(t *testing.T, mode string, env ...string) (*runtimeapi.Server, *runtimeapi.Process, *bytes.Buffer) {
	t.Helper()
	bin := edgeBootstrap(t)
	s, err := runtimeapi.NewServer()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	var out bytes.Buffer // the function's logs; read only after Stop
	p, err := s.Exec(bin, append(rie.LambdaEnv("edgefn"), append(env, "EDGE_MODE="+mode)...), &lockedWriter{w: &out})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		p.Stop()
		if t.Failed() {
			t.Logf("function output:\n%s", out.String())
		}
	})
	return s, p, &out
}

// startEdgeRIE runs edgefn in mode under aws-lambda-rie.
func startEdgeRIE(t *testing.T, mode string, env ...string) (*rie.Emulator, *bytes.Buffer) {
	t.Helper()
	rieBin := rietest.Binary(t)
	bin := edgeBootstrap(t)
	var out bytes.Buffer // the emulator's and function's logs; read only after Stop
	e, err := rie.Start(context.Background(), rieBin, bin, rie.Options{
		Env: append(rie.LambdaEnv("edgefn"), append(env, "EDGE_MODE="+mode)...),
		Out: &lockedWriter{w: &out},
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		e.Stop()
		if t.Failed() {
			t.Logf("emulator output:\n%s", out.String())
		}
	})
	return e, &out
}

type lockedWriter struct {
	mu sync.Mutex
	w  *bytes.Buffer
}

func (l *lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}

func eventJSON(t *testing.T, e any) []byte {
	t.Helper()
	b, err := json.Marshal(e)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// TestStreamReachesRuntimeAPIWhileHandlerRuns is the streaming edge's
// promise, end to end: the first piece a handler flushes reaches the Runtime
// API — through aws-lambda-go's chunked POST — while the handler is still
// running. The handler cannot finish until the test has seen that piece.
func TestStreamReachesRuntimeAPIWhileHandlerRuns(t *testing.T) {
	release := make(chan struct{})
	var releaseOnce sync.Once
	doRelease := func() { releaseOnce.Do(func() { close(release) }) }
	defer doRelease()
	gate := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-release:
		case <-r.Context().Done():
		}
	}))
	defer gate.Close()
	s, _, _ := startEdge(t, "stream", "EDGE_RELEASE_URL="+gate.URL)

	var mu sync.Mutex
	var seen bytes.Buffer
	var firstAt time.Time
	onChunk := func(c runtimeapi.Chunk) {
		mu.Lock()
		defer mu.Unlock()
		seen.Write(c.Data)
		if firstAt.IsZero() && bytes.Contains(seen.Bytes(), []byte("data: first")) {
			firstAt = c.At
			doRelease() // only now may the handler finish
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	e := restEvent("POST", "/first-then-wait")
	res, err := s.Invoke(ctx, eventJSON(t, e), onChunk)
	if err != nil {
		t.Fatalf("%v (seen so far: %q) — a stream that is buffered to the end never shows its first piece, so the handler waits forever", err, seen.String())
	}
	if !res.Streamed || res.ContentType != rie.StreamContentType || res.Error != nil {
		t.Fatalf("answer streamed=%v content type %q error %v", res.Streamed, res.ContentType, res.Error)
	}
	if firstAt.IsZero() || !firstAt.Before(res.Done) || len(res.Chunks) < 2 {
		t.Errorf("first piece at %v, done %v, %d chunks", firstAt, res.Done, len(res.Chunks))
	}
	resp, err := rie.DecodeHTTP(true, res.Body)
	if err != nil {
		t.Fatal(err)
	}
	if resp.Status != 200 || resp.Header.Get("Content-Type") != "text/event-stream" || string(resp.Body) != "data: first\n\ndata: second\n\n" {
		t.Errorf("answer %d %v %q", resp.Status, resp.Header, resp.Body)
	}
}

func TestStreamErrorTrailers(t *testing.T) {
	s, _, _ := startEdge(t, "stream")
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	res, err := s.Invoke(ctx, eventJSON(t, restEvent("GET", "/panic-mid-stream")), nil)
	if err != nil {
		t.Fatal(err)
	}
	if res.Error == nil || !strings.Contains(res.Error.Message, "mid-stream failure") || !bytes.HasSuffix(res.Body, []byte("partial")) {
		t.Errorf("error %v, body %q", res.Error, res.Body)
	}
	// The process survives a recovered panic and answers the next event.
	e := restEvent("POST", "/echo")
	e.Body = "again"
	res, err = s.Invoke(ctx, eventJSON(t, e), nil)
	if err != nil {
		t.Fatal(err)
	}
	if resp, err := rie.DecodeHTTP(true, res.Body); err != nil || string(resp.Body) != "again" {
		t.Errorf("next answer %v %q", err, res.Body)
	}
}

// TestAWSLambdaGoStreamsOffContract is why streaming functions run the
// edge's own Runtime API loop: aws-lambda-go (the pinned version) posts a
// streamed answer without Lambda-Runtime-Function-Response-Mode: streaming,
// which the contract for custom runtimes requires. When it starts sending
// it, this test fails: StartStreaming can then give way to lambda.Start.
func TestAWSLambdaGoStreamsOffContract(t *testing.T) {
	s, _, _ := startEdge(t, "stream-aws-lambda-go")
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	e := restEvent("POST", "/echo")
	e.Body = "hi"
	_, err := s.Invoke(ctx, eventJSON(t, e), nil)
	if err == nil || !strings.Contains(err.Error(), "without Lambda-Runtime-Function-Response-Mode: streaming") {
		t.Errorf("aws-lambda-go's streamed answer: %v; if it now keeps the contract, StartStreaming can go", err)
	}
}

func TestBufferedUnderRIE(t *testing.T) {
	e0, out := startEdgeRIE(t, "buffered")
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	e := restEvent("POST", "/echo")
	e.Body = "AAEC/w=="
	e.IsBase64Encoded = true
	e.MultiValueHeaders["Content-Type"] = []string{"application/octet-stream"}
	res, err := e0.Invoke(ctx, eventJSON(t, e))
	if err != nil {
		t.Fatal(err)
	}
	if res.Error != nil {
		t.Fatalf("error %v", res.Error)
	}
	resp, err := rie.DecodeHTTP(false, res.Payload)
	if err != nil {
		t.Fatal(err)
	}
	if resp.Status != 200 || !bytes.Equal(resp.Body, []byte{0, 1, 2, 0xff}) {
		t.Errorf("answer %d %q", resp.Status, resp.Body)
	}
	e0.Stop()
	// The function logs JSON with Lambda's request id on every record.
	var rec map[string]any
	for _, line := range strings.Split(out.String(), "\n") {
		if strings.Contains(line, `"echo"`) {
			json.Unmarshal([]byte(line), &rec)
		}
	}
	if rec["aws_request_id"] != res.RequestID || rec["level"] != "INFO" || rec["timestamp"] == nil ||
		rec["apigw_request_id"] != e.RequestContext.RequestID {
		t.Errorf("log record %v (request %s)\n%s", rec, res.RequestID, out.String())
	}
}

func TestSQSUnderRIE(t *testing.T) {
	e, _ := startEdgeRIE(t, "sqs")
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	ev := events.SQSEvent{Records: []events.SQSMessage{sqsRecord("ok-1", "work", nil), sqsRecord("bad-2", "fail", nil)}}
	res, err := e.Invoke(ctx, eventJSON(t, ev))
	if err != nil {
		t.Fatal(err)
	}
	if string(res.Payload) != `{"batchItemFailures":[{"itemIdentifier":"bad-2"}]}` {
		t.Errorf("answer %s", res.Payload)
	}
}

// TestStreamedUnderRIE: the emulator takes a streamed answer (response
// mode streaming, chunked) and returns it whole, in order; it does not pass
// chunks on as they come (TestStreamReachesRuntimeAPIWhileHandlerRuns
// proves that under runtimeapi).
func TestStreamedUnderRIE(t *testing.T) {
	e0, _ := startEdgeRIE(t, "stream")
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	e := restEvent("POST", "/echo")
	e.Body = strings.Repeat("data: 0123456789\n\n", 10000)
	e.MultiValueHeaders["Content-Type"] = []string{"text/event-stream"}
	res, err := e0.Invoke(ctx, eventJSON(t, e))
	if err != nil {
		t.Fatal(err)
	}
	if res.Error != nil {
		t.Fatalf("error %v", res.Error)
	}
	resp, err := rie.DecodeHTTP(true, res.Payload)
	if err != nil {
		t.Fatal(err)
	}
	if resp.Status != 200 || string(resp.Body) != e.Body {
		t.Errorf("answer %d, %d bytes, want the %d sent", resp.Status, len(resp.Body), len(e.Body))
	}
}

func TestFunctionErrorsUnderRIE(t *testing.T) {
	e, _ := startEdgeRIE(t, "raw")
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	res, err := e.Invoke(ctx, []byte(`{"error":"no such batch"}`))
	if err != nil {
		t.Fatal(err)
	}
	if res.Error == nil || res.Error.Message != "no such batch" {
		t.Errorf("error %+v payload %s", res.Error, res.Payload)
	}
	res, err = e.Invoke(ctx, []byte(`{"hello":"world"}`))
	if err != nil || res.Error != nil || string(res.Payload) != `{"hello":"world"}` {
		t.Errorf("echo %v %+v", err, res)
	}
}

// TestFunctionErrorsUnderRuntimeAPI keeps what the emulator hides: that
// the process exits after a panic and no later event is answered by it
// (the emulator restarts the function).
func TestFunctionErrorsUnderRuntimeAPI(t *testing.T) {
	s, p, _ := startEdge(t, "raw")
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	res, err := s.Invoke(ctx, []byte(`{"error":"no such batch"}`), nil)
	if err != nil {
		t.Fatal(err)
	}
	if res.Error == nil || res.Error.Message != "no such batch" {
		t.Errorf("error %+v body %s", res.Error, res.Body)
	}
	res, err = s.Invoke(ctx, []byte(`{"hello":"world"}`), nil)
	if err != nil || string(res.Body) != `{"hello":"world"}` {
		t.Errorf("echo %v %s", err, res.Body)
	}
	// aws-lambda-go reports a panic, then exits: the next event finds no runtime.
	res, err = s.Invoke(ctx, []byte(`{"panic":true}`), nil)
	if err != nil || res.Error == nil || !strings.Contains(res.Error.Message, "raw panic") {
		t.Errorf("panic: %v %+v", err, res)
	}
	select {
	case <-p.Exited():
	case <-time.After(10 * time.Second):
		t.Fatal("the process did not exit after a panic")
	}
	if _, err := s.Invoke(ctx, []byte(`{}`), nil); err == nil {
		t.Error("an event was answered after the process exited")
	}
}

func TestInitFailedUnderRuntimeAPI(t *testing.T) {
	s, p, _ := startEdge(t, "no-such-mode")
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if _, err := s.Invoke(ctx, []byte(`{}`), nil); err == nil || !strings.Contains(err.Error(), "initialize") {
		t.Errorf("Invoke error %v", err)
	}
	fe := s.InitError()
	if fe == nil || fe.Type != InitErrorType || !strings.Contains(fe.Message, "no-such-mode") {
		t.Errorf("init error %+v", fe)
	}
	select {
	case <-p.Exited():
	case <-time.After(10 * time.Second):
		t.Fatal("the process did not exit after its init error")
	}
}

func TestInitTimeoutUnderRuntimeAPI(t *testing.T) {
	bin := edgeBootstrap(t)
	s, err := runtimeapi.NewServer()
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	s.InitTimeout = 300 * time.Millisecond
	p, err := s.Exec(bin, append(rie.LambdaEnv("edgefn"), "EDGE_MODE=hang"), io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	defer p.Stop()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if _, err := s.Invoke(ctx, []byte(`{}`), nil); err == nil || !strings.Contains(err.Error(), "initializing") {
		t.Errorf("Invoke error %v", err)
	}
}
