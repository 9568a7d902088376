package lambdaedge

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"strings"
	"time"

	"github.com/aws/aws-lambda-go/lambda"
	"github.com/aws/aws-lambda-go/lambdacontext"

	"github.com/sluice-gateway/sluice/pkg/logging"
)

// RuntimeAPIEnv names the Runtime API's host:port; Lambda sets it.
const RuntimeAPIEnv = "AWS_LAMBDA_RUNTIME_API"

// HTTPFunction is the Lambda handler of an HTTP function whose routes h
// serves: behind the streaming edge when stream (the route table says so,
// server.Streams), else behind the buffered edge. It is what StartHTTP
// serves, for callers that invoke it in process.
func HTTPFunction(h http.Handler, stream bool) lambda.Handler {
	if stream {
		return lambda.NewHandler(Streaming(h))
	}
	return lambda.NewHandler(Buffered(h))
}

// StartHTTP serves an HTTP function whose routes h serves under the Runtime
// API: streamed answers by the streaming contract (StartStreaming), buffered
// ones through aws-lambda-go. It never returns.
func StartHTTP(h http.Handler, stream bool) {
	if stream {
		StartStreaming(h)
	}
	Start(lambda.NewHandler(Buffered(h)))
}

// SQSFunction is the Lambda handler of an SQS-triggered worker function:
// handle runs on each message (see SQS), at most concurrency at once.
func SQSFunction(handle MessageHandler, concurrency int) lambda.Handler {
	return lambda.NewHandler(SQS(handle, concurrency))
}

// Start serves h under the Lambda Runtime API named by AWS_LAMBDA_RUNTIME_API.
// It never returns.
func Start(h lambda.Handler) { lambda.StartHandler(h) }

// NewLogger returns the logger of a Lambda function: JSON on stderr with
// level, timestamp and message (Lambda's JSON log format filters on them),
// at SLUICE_LOG_LEVEL, else the level Lambda's LoggingConfig sets
// (AWS_LAMBDA_LOG_LEVEL), else info. Each invocation's records also carry
// aws_request_id (see invocationContext).
func NewLogger(getenv func(string) string) *slog.Logger {
	level := getenv("SLUICE_LOG_LEVEL")
	if level == "" {
		switch l := strings.ToLower(getenv("AWS_LAMBDA_LOG_LEVEL")); l {
		case "trace":
			level = "debug"
		case "fatal":
			level = "error"
		default:
			level = l
		}
	}
	return logging.New(os.Stderr, "json", level)
}

// InitFailed reports an initialization failure to the Runtime API (so Lambda
// shows it as the function's init error instead of a bare exit) and exits.
// Outside Lambda it prints the error.
func InitFailed(err error) {
	slog.Error("initialization failed", "error", err)
	if api := os.Getenv(RuntimeAPIEnv); api != "" {
		if rerr := postInitError(api, err); rerr != nil {
			slog.Error("could not report the initialization failure to the Runtime API", "error", rerr)
		}
	} else {
		fmt.Fprintln(os.Stderr, "sluice:", err)
	}
	os.Exit(1)
}

// InitErrorType is the error type InitFailed reports.
const InitErrorType = "Runtime.InitError"

func postInitError(api string, cause error) error {
	body, _ := json.Marshal(map[string]any{"errorMessage": cause.Error(), "errorType": InitErrorType, "stackTrace": []string{}})
	req, err := http.NewRequest(http.MethodPost, "http://"+api+"/2018-06-01/runtime/init/error", bytes.NewReader(body))
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Lambda-Runtime-Function-Error-Type", InitErrorType)
	client := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{Proxy: nil}}
	resp, err := client.Do(req)
	if err != nil {
		return err
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusAccepted {
		return fmt.Errorf("runtime API answered %s", resp.Status)
	}
	return nil
}

// invocationContext gives ctx the log attributes of one invocation: Lambda's
// request id, and API Gateway's when there is one.
func invocationContext(ctx context.Context, apiGatewayRequestID string) context.Context {
	var attrs []slog.Attr
	if lc, ok := lambdacontext.FromContext(ctx); ok && lc.AwsRequestID != "" {
		attrs = append(attrs, slog.String("aws_request_id", lc.AwsRequestID))
	}
	if apiGatewayRequestID != "" {
		attrs = append(attrs, slog.String("apigw_request_id", apiGatewayRequestID))
	}
	return withLogAttrs(ctx, attrs...)
}

func withLogAttrs(ctx context.Context, attrs ...slog.Attr) context.Context {
	if len(attrs) == 0 {
		return ctx
	}
	return logging.WithAttrs(ctx, attrs...)
}
