// Command edgefn is a Lambda function for the edge's tests: built with the
// production flags and run under the Runtime API harness, it exercises each
// edge as Lambda would. EDGE_MODE picks it: stream, buffered, sqs, raw (a
// plain aws-lambda-go handler), hang (an init that never ends); anything else
// fails its init. The streaming mode runs the edge's own Runtime API loop,
// as every streaming function does (lambdaedge.StartHTTP).
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"time"

	"github.com/aws/aws-lambda-go/lambda"

	"github.com/sluice-gateway/sluice/pkg/lambdaedge"
	"github.com/sluice-gateway/sluice/pkg/store"
)

func main() {
	slog.SetDefault(lambdaedge.NewLogger(os.Getenv))
	mux := http.NewServeMux()
	// first-then-wait writes and flushes a first piece, then waits for the
	// test to say it saw it (GET $EDGE_RELEASE_URL), then writes the rest.
	mux.HandleFunc("POST /first-then-wait", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		w.Write([]byte("data: first\n\n"))
		if f, ok := w.(http.Flusher); ok {
			f.Flush()
		}
		resp, err := http.Get(os.Getenv("EDGE_RELEASE_URL"))
		if err != nil {
			panic(err)
		}
		resp.Body.Close()
		w.Write([]byte("data: second\n\n"))
	})
	mux.HandleFunc("GET /panic-mid-stream", func(w http.ResponseWriter, r *http.Request) {
		w.Write([]byte("partial"))
		w.(http.Flusher).Flush()
		panic("mid-stream failure")
	})
	mux.HandleFunc("POST /echo", func(w http.ResponseWriter, r *http.Request) {
		slog.InfoContext(r.Context(), "echo")
		w.Header().Set("Content-Type", r.Header.Get("Content-Type"))
		io.Copy(w, r.Body)
	})
	switch os.Getenv("EDGE_MODE") {
	case "stream":
		lambdaedge.StartStreaming(mux)
	case "stream-aws-lambda-go":
		// The same answers through aws-lambda-go's runtime loop, which
		// sluice does not use for them (see TestAWSLambdaGoStreamsOffContract).
		lambda.Start(lambdaedge.Streaming(mux))
	case "buffered":
		lambda.Start(lambdaedge.Buffered(mux))
	case "sqs":
		lambda.Start(lambdaedge.SQS(func(ctx context.Context, m store.Message) error {
			if string(m.Body) == "fail" {
				return errors.New("refused")
			}
			return nil
		}, 0))
	case "hang":
		time.Sleep(time.Hour) // an init that never ends
	case "raw":
		lambda.Start(func(ctx context.Context, ev map[string]any) (map[string]any, error) {
			if ev["panic"] != nil {
				panic("raw panic")
			}
			if msg, ok := ev["error"].(string); ok {
				return nil, errors.New(msg)
			}
			return ev, nil
		})
	default:
		lambdaedge.InitFailed(fmt.Errorf("EDGE_MODE %q is not a mode", os.Getenv("EDGE_MODE")))
	}
}
