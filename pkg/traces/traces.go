// Package traces owns sluice's OpenTelemetry traces: one span per request
// (W3C traceparent accepted), a child per provider attempt (traceparent
// forwarded to the provider), the GenAI semantic-convention attributes read
// from the call's log event, and batch lines and callback deliveries as
// spans linked to their batch. They are on only when
// OTEL_EXPORTER_OTLP_ENDPOINT is set: otherwise nothing is built and every
// span is the API's no-op.
package traces

import (
	"context"
	"crypto/sha256"
	"fmt"
	"net/http"

	"go.opentelemetry.io/contrib/instrumentation/net/http/otelhttp"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	semconv "go.opentelemetry.io/otel/semconv/v1.37.0"
	"go.opentelemetry.io/otel/trace"
	"go.opentelemetry.io/otel/trace/noop"

	"github.com/sluice-gateway/sluice/pkg/logevent"
)

// Name is the instrumentation scope of sluice's spans.
const Name = "github.com/sluice-gateway/sluice"

// Tracer makes sluice's spans. The zero value and nil are off: every span
// is a no-op and nothing is exported.
type Tracer struct {
	provider trace.TracerProvider
	tracer   trace.Tracer
	prop     propagation.TextMapPropagator
	shutdown func(context.Context) error
}

// Exporter builds the span exporter (pkg/traces/otlp.Exporter), which
// reads its OTEL_EXPORTER_OTLP_* settings itself.
type Exporter func(ctx context.Context) (sdktrace.SpanExporter, error)

// FromEnv builds a Tracer exporting with newExporter when getenv says
// OTEL_EXPORTER_OTLP_ENDPOINT (or OTEL_EXPORTER_OTLP_TRACES_ENDPOINT).
// Without it, nil: off. With sync (a Lambda function, frozen between invocations,
// where a batch in memory would wait for the next one or be lost) each
// span is exported as it ends; otherwise in batches in the background.
func FromEnv(ctx context.Context, getenv func(string) string, service string, newExporter Exporter, sync bool) (*Tracer, error) {
	if !Wanted(getenv) {
		return nil, nil
	}
	exp, err := newExporter(ctx)
	if err != nil {
		return nil, fmt.Errorf("traces: exporter: %w", err)
	}
	if sync {
		return New(sdktrace.NewSimpleSpanProcessor(exp), service), nil
	}
	return New(sdktrace.NewBatchSpanProcessor(exp), service), nil
}

// Wanted reports whether getenv asks for traces (an OTLP endpoint).
func Wanted(getenv func(string) string) bool {
	return getenv("OTEL_EXPORTER_OTLP_ENDPOINT") != "" || getenv("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT") != ""
}

// New builds a Tracer whose spans go to processor (a test's in-memory
// exporter behind a simple processor).
func New(processor sdktrace.SpanProcessor, service string) *Tracer {
	tp := sdktrace.NewTracerProvider(
		sdktrace.WithSpanProcessor(processor),
		sdktrace.WithResource(resource.NewSchemaless(semconv.ServiceName(service))),
	)
	return &Tracer{provider: tp, tracer: tp.Tracer(Name), prop: propagation.TraceContext{}, shutdown: tp.Shutdown}
}

// On reports whether spans are recorded.
func (t *Tracer) On() bool { return t != nil && t.tracer != nil }

// Shutdown exports what is buffered and stops.
func (t *Tracer) Shutdown(ctx context.Context) error {
	if !t.On() {
		return nil
	}
	return t.shutdown(ctx)
}

// StartRequest starts a request's server span, a child of the client's
// traceparent when it sent one.
func (t *Tracer) StartRequest(ctx context.Context, r *http.Request, route string) (context.Context, trace.Span) {
	if !t.On() {
		return ctx, noop.Span{}
	}
	ctx = t.prop.Extract(ctx, propagation.HeaderCarrier(r.Header))
	return t.tracer.Start(ctx, r.Method+" "+route, trace.WithSpanKind(trace.SpanKindServer),
		trace.WithAttributes(semconv.HTTPRequestMethodKey.String(r.Method), semconv.HTTPRoute(route)))
}

// EndRequest ends a request's span with its HTTP status.
func EndRequest(span trace.Span, status int, code string) {
	if !span.IsRecording() {
		span.End()
		return
	}
	span.SetAttributes(semconv.HTTPResponseStatusCode(status))
	if status >= 500 {
		span.SetStatus(codes.Error, code)
	}
	if code != "" {
		span.SetAttributes(attribute.String("error.type", code))
	}
	span.End()
}

// Transport wraps base so that each provider attempt is a client span,
// child of the call's, whose traceparent goes to the provider. Off, base
// itself.
func (t *Tracer) Transport(base http.RoundTripper) http.RoundTripper {
	if !t.On() {
		return base
	}
	return otelhttp.NewTransport(base, otelhttp.WithTracerProvider(t.provider), otelhttp.WithPropagators(t.prop),
		otelhttp.WithSpanNameFormatter(func(_ string, r *http.Request) string { return "provider " + r.Method }))
}

// batchSpan is the span context standing for batch id: derived from the
// id, so every line and delivery of the batch links to the same one,
// whichever process runs it, without storing it.
func batchSpan(id string) trace.SpanContext {
	sum := sha256.Sum256([]byte("sluice batch " + id))
	var tid trace.TraceID
	var sid trace.SpanID
	copy(tid[:], sum[:16])
	copy(sid[:], sum[16:24])
	return trace.NewSpanContext(trace.SpanContextConfig{TraceID: tid, SpanID: sid, TraceFlags: trace.FlagsSampled, Remote: true})
}

// BatchLink links a span to batch id's.
func BatchLink(id string) trace.Link {
	return trace.Link{SpanContext: batchSpan(id), Attributes: []attribute.KeyValue{attribute.String("sluice.batch.id", id)}}
}

// StartBatchLine starts the span of one batch line, a root linked to its
// batch.
func (t *Tracer) StartBatchLine(ctx context.Context, batchID, customID string) (context.Context, trace.Span) {
	if !t.On() {
		return ctx, noop.Span{}
	}
	return t.tracer.Start(ctx, "batch line", trace.WithNewRoot(), trace.WithLinks(BatchLink(batchID)),
		trace.WithAttributes(attribute.String("sluice.batch.id", batchID), attribute.String("sluice.batch.custom_id", customID)))
}

// StartDelivery starts the span of a delivery of events to a callback of
// kind: linked to the batch of each batch line among them.
func (t *Tracer) StartDelivery(ctx context.Context, kind string, events []*logevent.Event) (context.Context, trace.Span) {
	if !t.On() {
		return ctx, noop.Span{}
	}
	var links []trace.Link
	seen := map[string]bool{}
	for _, ev := range events {
		if b := ev.Metadata.BatchID; b != "" && !seen[b] {
			seen[b] = true
			links = append(links, BatchLink(b))
		}
	}
	return t.tracer.Start(ctx, "callback delivery", trace.WithSpanKind(trace.SpanKindClient), trace.WithLinks(links...),
		trace.WithAttributes(attribute.String("sluice.callback.kind", kind), attribute.Int("sluice.callback.events", len(events))))
}

// ObserveEvent puts a call's GenAI attributes on the span of its context
// (logevent.Observer): the request's, or the batch line's.
func (t *Tracer) ObserveEvent(ctx context.Context, ev *logevent.Event) {
	span := trace.SpanFromContext(ctx)
	if !span.IsRecording() {
		return
	}
	model := ev.ModelGroup
	if model == "" {
		model = ev.Model
	}
	attrs := []attribute.KeyValue{
		attribute.String("gen_ai.operation.name", operation(ev.CallType)),
		attribute.String("gen_ai.request.model", model),
		attribute.String("gen_ai.provider.name", ev.CustomLLMProvider),
		attribute.Int64("gen_ai.usage.input_tokens", ev.PromptTokens),
		attribute.Int64("gen_ai.usage.output_tokens", ev.CompletionTokens),
		attribute.String("sluice.request_id", ev.ID),
		attribute.Float64("sluice.response_cost", ev.ResponseCost),
	}
	if ev.ModelID != "" {
		attrs = append(attrs, attribute.String("sluice.deployment", ev.ModelID))
	}
	if ev.FinishReason != "" {
		attrs = append(attrs, attribute.StringSlice("gen_ai.response.finish_reasons", []string{ev.FinishReason}))
	}
	if ev.Metadata.UserAPIKeyTeamID != "" {
		attrs = append(attrs, attribute.String("sluice.team_id", ev.Metadata.UserAPIKeyTeamID))
	}
	if ev.Status == logevent.StatusFailure && ev.ErrorInformation != nil {
		attrs = append(attrs, attribute.String("error.type", ev.ErrorInformation.ErrorClass))
	}
	span.SetAttributes(attrs...)
}

// operation is the GenAI operation name of a call type.
func operation(callType string) string {
	switch callType {
	case logevent.CallCompletion, logevent.CallResponses:
		return "chat"
	case logevent.CallTextCompletion:
		return "text_completion"
	case logevent.CallEmbedding:
		return "embeddings"
	}
	return callType
}
