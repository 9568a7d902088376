// Package otlp exports traces over OTLP/HTTP (the OpenTelemetry exporter,
// configured by the OTEL_EXPORTER_OTLP_* variables). It is its own package
// so that only the binaries that export traces link it: the exporter
// brings gRPC and the OTLP protobufs, some 14 MB, which the Lambda
// functions — traced by X-Ray — do without.
package otlp

import (
	"context"
	"fmt"

	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
)

// Exporter builds the OTLP/HTTP span exporter from the environment.
func Exporter(ctx context.Context) (sdktrace.SpanExporter, error) {
	exp, err := otlptracehttp.New(ctx)
	if err != nil {
		return nil, fmt.Errorf("otlp: %w", err)
	}
	return exp, nil
}
