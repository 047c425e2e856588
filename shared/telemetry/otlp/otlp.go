// Package otlp turns package telemetry on: OpenTelemetry's SDK with the
// OTLP/HTTP trace and metric exporters, configured by the standard OTEL_*
// variables, which the SDK and its exporters read themselves.
//
// It is a package of its own because of its weight: the OTLP/HTTP exporters
// link the generated OTLP protobuf packages, and those link gRPC (upstream's
// open-telemetry/opentelemetry-go#2579), some 4 MB gzipped. Only the
// functions whose acts have spans import it (docs/telemetry.md says which,
// and why); every other package imports telemetry alone, which links only
// OpenTelemetry's API.
package otlp

import (
	"context"
	"errors"
	"strings"

	"go.opentelemetry.io/otel/exporters/otlp/otlpmetric/otlpmetrichttp"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	"go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/resource"
	"go.opentelemetry.io/otel/sdk/trace"
	semconv "go.opentelemetry.io/otel/semconv/v1.43.0"

	"github.com/fluidbox/fluidbox/shared/telemetry"
)

// Provider is a running SDK: its Telemetry, and the providers to flush and
// shut down.
type Provider struct {
	tel    *telemetry.Telemetry
	traces *trace.TracerProvider
	meters *metric.MeterProvider
}

// Telemetry is what handlers record through; nil when p is nil (off).
func (p *Provider) Telemetry() *telemetry.Telemetry {
	if p == nil {
		return nil
	}
	return p.tel
}

// Enabled reports whether the OTEL_* variables ask for export: an OTLP
// endpoint is set (OTEL_EXPORTER_OTLP_ENDPOINT, or the traces or metrics
// one) and OTEL_SDK_DISABLED is not "true". getenv is the process's
// environment (os.Getenv), the same the SDK reads.
func Enabled(getenv func(string) string) bool {
	if strings.EqualFold(strings.TrimSpace(getenv("OTEL_SDK_DISABLED")), "true") {
		return false
	}
	for _, k := range []string{"OTEL_EXPORTER_OTLP_ENDPOINT", "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "OTEL_EXPORTER_OTLP_METRICS_ENDPOINT"} {
		if getenv(k) != "" {
			return true
		}
	}
	return false
}

// FromEnv starts the SDK as the OTEL_* variables say, with service as the
// default service.name (OTEL_SERVICE_NAME and OTEL_RESOURCE_ATTRIBUTES
// override it). When Enabled is false it returns nil: nothing starts, no
// exporter runs, and the nil Provider's Telemetry records nothing.
func FromEnv(ctx context.Context, getenv func(string) string, service string) (*Provider, error) {
	if !Enabled(getenv) {
		return nil, nil
	}
	return start(ctx, service, nil, nil)
}

// New starts the SDK exporting to endpointURL (an http:// or https:// base
// URL; /v1/traces and /v1/metrics are appended), whatever the environment
// says of the endpoint. Tests and fluidbox dev's --otlp use it.
func New(ctx context.Context, endpointURL, service string) (*Provider, error) {
	base := strings.TrimSuffix(endpointURL, "/")
	return start(ctx, service,
		[]otlptracehttp.Option{otlptracehttp.WithEndpointURL(base + "/v1/traces")},
		[]otlpmetrichttp.Option{otlpmetrichttp.WithEndpointURL(base + "/v1/metrics")})
}

func start(ctx context.Context, service string, topts []otlptracehttp.Option, mopts []otlpmetrichttp.Option) (*Provider, error) {
	// The environment's resource (OTEL_SERVICE_NAME, OTEL_RESOURCE_ATTRIBUTES)
	// is merged last, so the operator's naming wins over ours.
	res, err := resource.New(ctx, resource.WithAttributes(semconv.ServiceName(service)), resource.WithFromEnv(), resource.WithTelemetrySDK())
	if err != nil {
		return nil, err
	}
	te, err := otlptracehttp.New(ctx, topts...)
	if err != nil {
		return nil, err
	}
	me, err := otlpmetrichttp.New(ctx, mopts...)
	if err != nil {
		return nil, errors.Join(err, te.Shutdown(ctx))
	}
	p := &Provider{
		traces: trace.NewTracerProvider(trace.WithBatcher(te), trace.WithResource(res)),
		meters: metric.NewMeterProvider(metric.WithReader(metric.NewPeriodicReader(me)), metric.WithResource(res)),
	}
	if p.tel, err = telemetry.New(p.traces, p.meters); err != nil {
		return nil, errors.Join(err, p.Shutdown(ctx))
	}
	return p, nil
}

// Flush exports what is buffered. A Lambda function calls it before
// answering each invocation: a frozen sandbox exports nothing.
func (p *Provider) Flush(ctx context.Context) error {
	if p == nil {
		return nil
	}
	return errors.Join(p.traces.ForceFlush(ctx), p.meters.ForceFlush(ctx))
}

// Shutdown flushes and stops the exporters.
func (p *Provider) Shutdown(ctx context.Context) error {
	if p == nil {
		return nil
	}
	return errors.Join(p.traces.Shutdown(ctx), p.meters.Shutdown(ctx))
}
