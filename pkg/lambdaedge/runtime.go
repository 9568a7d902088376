package lambdaedge

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"reflect"
	"strconv"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-lambda-go/lambdacontext"
)

// The Runtime API contract of a streamed answer (custom runtimes,
// "Implementing response streaming"): the runtime POSTs
// /runtime/invocation/{id}/response with Lambda-Runtime-Function-Response-Mode:
// streaming and Transfer-Encoding: chunked, declares the two error trailers,
// and, when the answer fails after it began, sends them: the error's type,
// and its JSON document base64-encoded. aws-lambda-go posts a streamed
// answer chunked with the trailers but without the response-mode header, so
// streaming functions run this loop instead of lambda.Start.
const (
	headerRequestID    = "Lambda-Runtime-Aws-Request-Id"
	headerDeadline     = "Lambda-Runtime-Deadline-Ms"
	headerFunctionARN  = "Lambda-Runtime-Invoked-Function-Arn"
	headerTraceID      = "Lambda-Runtime-Trace-Id"
	headerResponseMode = "Lambda-Runtime-Function-Response-Mode"
	headerErrorType    = "Lambda-Runtime-Function-Error-Type"
	trailerErrorType   = "Lambda-Runtime-Function-Error-Type"
	trailerErrorBody   = "Lambda-Runtime-Function-Error-Body"
	runtimeAPIPrefix   = "/2018-06-01/runtime/invocation/"
)

// StartStreaming serves h as a streaming HTTP function (see Streaming) under
// the Runtime API named by AWS_LAMBDA_RUNTIME_API, posting each answer as
// the streaming contract says. It never returns: a Runtime API it cannot
// talk to ends the process, as aws-lambda-go does, and Lambda starts another.
func StartStreaming(h http.Handler) {
	api := os.Getenv(RuntimeAPIEnv)
	if api == "" {
		InitFailed(fmt.Errorf("%s is not set: this is no Lambda environment (make invoke runs a function locally)", RuntimeAPIEnv))
	}
	err := newRuntimeClient(api).serve(context.Background(), Streaming(h))
	slog.Error("the Runtime API loop ended", "error", err)
	os.Exit(1)
}

// runtimeClient talks to the Runtime API, one invocation at a time.
type runtimeClient struct {
	base   string // http://host:port
	client *http.Client
}

func newRuntimeClient(api string) *runtimeClient {
	// The Runtime API is local: never through a proxy, never a timeout (a
	// /next waits as long as there is no event).
	return &runtimeClient{base: "http://" + api, client: &http.Client{Transport: &http.Transport{Proxy: nil}}}
}

// serve answers invocations with handle until the Runtime API fails.
func (c *runtimeClient) serve(ctx context.Context, handle func(context.Context, *events.APIGatewayProxyRequest) (*events.APIGatewayProxyStreamingResponse, error)) error {
	for {
		inv, err := c.next(ctx)
		if err != nil {
			return err
		}
		if err := c.invoke(ctx, inv, handle); err != nil {
			return err
		}
	}
}

// invocation is an event the Runtime API handed out.
type invocation struct {
	id      string
	header  http.Header
	payload []byte
}

func (c *runtimeClient) next(ctx context.Context) (*invocation, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, c.base+runtimeAPIPrefix+"next", nil)
	if err != nil {
		return nil, err
	}
	resp, err := c.client.Do(req)
	if err != nil {
		return nil, fmt.Errorf("runtime API: next: %w", err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("runtime API: next: %s", resp.Status)
	}
	payload, err := io.ReadAll(resp.Body)
	if err != nil {
		return nil, fmt.Errorf("runtime API: next: read the event: %w", err)
	}
	return &invocation{id: resp.Header.Get(headerRequestID), header: resp.Header, payload: payload}, nil
}

// invoke runs one invocation: the context aws-lambda-go would give it (the
// deadline, the Lambda context, the trace id), the handler, and its answer
// or its error posted back.
func (c *runtimeClient) invoke(base context.Context, inv *invocation, handle func(context.Context, *events.APIGatewayProxyRequest) (*events.APIGatewayProxyStreamingResponse, error)) error {
	ms, err := strconv.ParseInt(inv.header.Get(headerDeadline), 10, 64)
	if err != nil {
		return c.postError(inv, "Runtime.InvalidDeadline", fmt.Errorf("the Runtime API sent deadline %q", inv.header.Get(headerDeadline)))
	}
	ctx, cancel := context.WithDeadline(base, time.UnixMilli(ms))
	defer cancel()
	ctx = lambdacontext.NewContext(ctx, &lambdacontext.LambdaContext{
		AwsRequestID: inv.id, InvokedFunctionArn: inv.header.Get(headerFunctionARN),
	})
	trace := inv.header.Get(headerTraceID)
	os.Setenv("_X_AMZN_TRACE_ID", trace)
	ctx = context.WithValue(ctx, "x-amzn-trace-id", trace) //nolint:staticcheck // the key aws-lambda-go and the X-Ray SDK use

	var e events.APIGatewayProxyRequest
	if err := json.Unmarshal(inv.payload, &e); err != nil {
		return c.postError(inv, "Runtime.UnmarshalError", fmt.Errorf("the event is not an API Gateway proxy event: %w", err))
	}
	resp, err := handle(ctx, &e)
	if err != nil {
		return c.postError(inv, errorType(err), err)
	}
	defer resp.Close()
	return c.postStream(inv, resp)
}

// postStream sends a streamed answer by the contract: the response mode,
// chunked encoding, both error trailers declared, and set if reading the
// answer fails.
func (c *runtimeClient) postStream(inv *invocation, resp *events.APIGatewayProxyStreamingResponse) error {
	body := &trailingReader{r: resp, trailer: http.Header{trailerErrorType: nil, trailerErrorBody: nil}}
	req, err := http.NewRequest(http.MethodPost, c.base+runtimeAPIPrefix+inv.id+"/response", body)
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", resp.ContentType())
	req.Header.Set(headerResponseMode, "streaming")
	req.TransferEncoding = []string{"chunked"}
	req.Trailer = body.trailer
	// The contract: close the connection once the answer is written.
	req.Close = true
	return c.post(req, "response")
}

// postError reports a failed invocation.
func (c *runtimeClient) postError(inv *invocation, typ string, cause error) error {
	req, err := http.NewRequest(http.MethodPost, c.base+runtimeAPIPrefix+inv.id+"/error", bytes.NewReader(errorDocument(typ, cause)))
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set(headerErrorType, typ)
	return c.post(req, "error")
}

func (c *runtimeClient) post(req *http.Request, what string) error {
	resp, err := c.client.Do(req)
	if err != nil {
		return fmt.Errorf("runtime API: post the %s: %w", what, err)
	}
	defer resp.Body.Close()
	io.Copy(io.Discard, resp.Body)
	if resp.StatusCode != http.StatusAccepted {
		return fmt.Errorf("runtime API: post the %s: %s", what, resp.Status)
	}
	return nil
}

// trailingReader reads the answer; a read error ends the body and sets the
// error trailers, which the HTTP client sends after the last chunk.
type trailingReader struct {
	r       io.Reader
	trailer http.Header
}

func (t *trailingReader) Read(p []byte) (int, error) {
	n, err := t.r.Read(p)
	if err != nil && err != io.EOF {
		typ := errorType(err)
		t.trailer.Set(trailerErrorType, typ)
		t.trailer.Set(trailerErrorBody, base64.StdEncoding.EncodeToString(errorDocument(typ, err)))
		return n, io.EOF
	}
	return n, err
}

// errorType is the type Lambda reports for err: its Go type's name, as
// aws-lambda-go names them.
func errorType(err error) string {
	t := reflect.TypeOf(err)
	if t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	return t.Name()
}

// errorDocument is Lambda's error document.
func errorDocument(typ string, err error) []byte {
	b, _ := json.Marshal(map[string]any{"errorMessage": err.Error(), "errorType": typ})
	return b
}
