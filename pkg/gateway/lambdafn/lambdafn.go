// Package lambdafn starts a Lambda function: the composition every
// functions/<fn>/main.go shares, so each main is one call naming its function.
package lambdafn

import (
	"context"
	"log/slog"
	"net/http"
	"os"

	"github.com/aws/aws-lambda-go/lambda"

	"github.com/sluice-gateway/sluice/pkg/gateway"
	"github.com/sluice-gateway/sluice/pkg/gateway/awscloud"
	"github.com/sluice-gateway/sluice/pkg/lambdaedge"
	"github.com/sluice-gateway/sluice/pkg/metrics"
	"github.com/sluice-gateway/sluice/pkg/server"
)

// Serve runs function — a job of the jobs table, or a function of the route
// table (pkg/server) — as a Lambda function: once per container, before the
// first event, it opens the gateway (settings, config, secrets, AWS clients,
// the provider HTTP client) and builds the function's handler (Handler);
// then it answers events. An init failure is reported to the Runtime API.
func Serve(function string) {
	slog.SetDefault(lambdaedge.NewLogger(os.Getenv))
	g, err := gateway.Open(context.Background(), os.Getenv, gateway.WithAWS(awscloud.Open))
	if err != nil {
		lambdaedge.InitFailed(err)
	}
	for _, w := range g.Config.Warnings {
		slog.Warn(w)
	}
	if j, ok := server.LookupJob(function); ok {
		h, err := JobHandler(g.Services, j)
		if err != nil {
			lambdaedge.InitFailed(err)
		}
		lambdaedge.Start(h)
	}
	h, stream, err := routes(g.Services, function)
	if err != nil {
		lambdaedge.InitFailed(err)
	}
	lambdaedge.StartHTTP(h, stream)
}

// Handler is function's Lambda handler over s, as Serve runs it, for
// invoking in process: its job's (JobHandler), or its routes' — streamed or
// buffered as the route table says.
func Handler(s *server.Services, function string) (lambda.Handler, error) {
	if j, ok := server.LookupJob(function); ok {
		return JobHandler(s, j)
	}
	h, stream, err := routes(s, function)
	if err != nil {
		return nil, err
	}
	return lambdaedge.HTTPFunction(h, stream), nil
}

// routes mounts function's routes over s and says whether they stream.
func routes(s *server.Services, function string) (http.Handler, bool, error) {
	h, err := server.Handler(s, server.Options{Function: function, AwaitPublishes: true})
	if err != nil {
		return nil, false, err
	}
	stream, err := server.Streams(function)
	if err != nil {
		return nil, false, err
	}
	return flushingHTTP{h, s.Metrics}, stream, nil
}

// flushingHTTP writes the measurements an invocation gathered (its store
// operations' EMF line) once its request is answered.
type flushingHTTP struct {
	http.Handler
	m *metrics.Metrics
}

func (f flushingHTTP) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	defer f.m.Flush()
	f.Handler.ServeHTTP(w, r)
}

// flushingJob is flushingHTTP for a job's invocation; a scheduled job's
// (faultsOnly) reports its store calls only when one failed, so that an
// idle stack publishes no store metrics (Metrics.FlushFaults).
type flushingJob struct {
	lambda.Handler
	m          *metrics.Metrics
	faultsOnly bool
}

func (f flushingJob) Invoke(ctx context.Context, payload []byte) ([]byte, error) {
	if f.faultsOnly {
		defer f.m.FlushFaults()
	} else {
		defer f.m.Flush()
	}
	return f.Handler.Invoke(ctx, payload)
}

// JobHandler is job j's Lambda handler over s. A scheduled job runs once per
// EventBridge event, stopping server.ScheduleMargin before the invocation's
// deadline; a queue job handles each message of an SQS batch, j.Workers at
// once, and answers the failed ones as partial batch failures.
func JobHandler(s *server.Services, j server.Job) (lambda.Handler, error) {
	if err := j.Validate(); err != nil {
		return nil, err
	}
	if j.Queue != "" {
		return flushingJob{lambdaedge.SQSFunction(lambdaedge.MessageHandler(j.Handle(s)), j.Workers), s.Metrics, false}, nil
	}
	return flushingJob{lambdaedge.ScheduledFunction(j.Run(s), server.ScheduleMargin), s.Metrics, true}, nil
}
