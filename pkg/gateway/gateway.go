// Package gateway assembles a sluice process from its environment: settings,
// the config file, the storage backend, the master key and the services. The
// local process and every Lambda function start through it, so both run the
// same code over different adapters.
package gateway

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/sluice-gateway/sluice/pkg/auth"
	"github.com/sluice-gateway/sluice/pkg/config"
	"github.com/sluice-gateway/sluice/pkg/metrics"
	"github.com/sluice-gateway/sluice/pkg/server"
	"github.com/sluice-gateway/sluice/pkg/store"
	"github.com/sluice-gateway/sluice/pkg/traces"
)

// masterKeyFile holds the master key make run generates on first start.
const masterKeyFile = "master.key"

// Gateway is an assembled process.
type Gateway struct {
	Settings config.Settings
	Config   *config.Config
	Backend  *store.Backend
	Services *server.Services
	// MasterKeySource says where the master key came from, for the start-up
	// message: "SLUICE_MASTER_KEY", "config", or the key file's path.
	MasterKeySource string
	// GeneratedMasterKey is set only when this start generated the master
	// key: it is shown once, then never again.
	GeneratedMasterKey string

	// tracer exports the traces (nil: OTEL_EXPORTER_OTLP_ENDPOINT unset).
	tracer *traces.Tracer
	// bodies is the local server's budget of request bodies held whole
	// (Serve); a Lambda function has no use for it.
	bodies *bodyBudget
}

// Option adjusts how Open assembles a gateway.
type Option func(*options)

type options struct {
	traceExporter traces.Exporter
	handoff       func(store.Bus) store.Bus
	openAWS       OpenCloud
}

// WithAWS has the gateway open SLUICE_BACKEND=aws with open
// (pkg/gateway/awscloud.Open: every Lambda function passes it, and the local
// process built with -tags aws). Without it, or with nil, that setting is an
// error and the binary links none of the AWS SDK's storage clients.
func WithAWS(open OpenCloud) Option {
	return func(o *options) { o.openAWS = open }
}

// WithTraceExporter has the gateway export traces with newExporter when
// OTEL_EXPORTER_OTLP_ENDPOINT is set (pkg/traces/otlp.Exporter: the local
// process passes it; a Lambda function, which would carry the exporter's
// weight in every cold start, does not, and is traced by X-Ray).
func WithTraceExporter(newExporter traces.Exporter) Option {
	return func(o *options) { o.traceExporter = newExporter }
}

// WithHandoff has the gateway's bus wrapped by wrap (pkg/handoff.Wrap: the
// local process passes it, so that its log events reach its delivery job in
// memory; a Lambda function, whose delivery is another function, links none
// of it).
func WithHandoff(wrap func(store.Bus) store.Bus) Option {
	return func(o *options) { o.handoff = wrap }
}

// Open assembles a gateway from the environment read through getenv.
func Open(ctx context.Context, getenv func(string) string, opts ...Option) (*Gateway, error) {
	settings, err := config.SettingsFromEnv(getenv)
	if err != nil {
		return nil, fmt.Errorf("settings: %w", err)
	}
	return OpenWith(ctx, settings, getenv, opts...)
}

// OpenWith assembles a gateway from settings already read.
func OpenWith(ctx context.Context, settings config.Settings, getenv func(string) string, opts ...Option) (*Gateway, error) {
	var o options
	for _, f := range opts {
		f(&o)
	}
	cloud, err := openBackend(ctx, settings, getenv, o.openAWS)
	if err != nil {
		return nil, err
	}
	cfg, err := config.Load(ctx, settings.ConfigLocation, cloud.Fetch, getenv)
	if err == nil && settings.Backend == config.BackendAWS {
		// The stack's functions may read its two secrets only.
		err = cfg.CheckDeployedSecrets()
	}
	if err != nil {
		cloud.Backend.Close()
		return nil, err
	}
	g := &Gateway{Settings: settings, Config: cfg, Backend: cloud.Backend}
	budget := settings.MaxBufferedBodies
	if budget <= 0 {
		budget = config.DefaultMaxBufferedBodies
	}
	g.bodies = newBodyBudget(budget)
	masterKey, resolveMasterKey, err := g.masterKey(cloud.Secrets)
	if err != nil {
		cloud.Backend.Close()
		return nil, err
	}
	lambdaFn := getenv("AWS_LAMBDA_FUNCTION_NAME")
	switch {
	case o.traceExporter != nil:
		if g.tracer, err = traces.FromEnv(ctx, getenv, "sluice", o.traceExporter, lambdaFn != ""); err != nil {
			cloud.Backend.Close()
			return nil, err
		}
	case traces.Wanted(getenv):
		slog.Warn("OTEL_EXPORTER_OTLP_ENDPOINT is set, but this binary does not export OpenTelemetry traces (a Lambda function: use its X-Ray traces)")
	}
	m := newMetrics(settings, cfg, lambdaFn)
	// Every store call of the services goes through the instruments.
	g.Backend = m.Instrument(cloud.Backend, settings.Backend)
	if o.handoff != nil {
		// Over the instruments, so that a publish handed over is measured.
		g.Backend.Bus = o.handoff(g.Backend.Bus)
	}
	g.Services, err = server.NewServices(server.Deps{
		Settings: settings, Config: cfg, Backend: g.Backend, Secrets: cloud.Secrets, Getenv: getenv,
		MasterKey: masterKey, ResolveMasterKey: resolveMasterKey, Metrics: m,
		Tracer: g.tracer,
	})
	if err != nil {
		cloud.Backend.Close()
		return nil, err
	}
	return g, nil
}

// newMetrics builds the process's instruments, or nil with SLUICE_METRICS
// off. In a Lambda function they also go out as EMF lines on stdout, which
// CloudWatch Logs turns into metrics of the stack's namespace.
func newMetrics(settings config.Settings, cfg *config.Config, lambdaFn string) *metrics.Metrics {
	if !settings.Metrics {
		return nil
	}
	opts := metrics.Options{Namespace: settings.MetricsNamespace}
	if fn := lambdaFn; fn != "" {
		opts.EMF, opts.Function = os.Stdout, fn
	} else {
		opts.Process = true
	}
	return metrics.New(cfg, opts)
}

// Redrive moves the log events waiting in the delivery dead-letter queue
// back to the delivery queue, where the callback-delivery job (or, in the
// cloud, the function) delivers them — each dead letter only to the
// callback it names — and says how many it moved.
func (g *Gateway) Redrive(ctx context.Context, out io.Writer) error {
	n, err := store.Redrive(ctx, g.Backend.DeliveryDeadLetters, g.Backend.Deliveries)
	fmt.Fprintf(out, "re-drove %d dead-lettered message(s) to the delivery queue\n", n)
	return err
}

// Close exports the traces still buffered and releases the backend.
func (g *Gateway) Close() error {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	return errors.Join(g.tracer.Shutdown(ctx), g.Backend.Close())
}

// masterKey picks the master key: SLUICE_MASTER_KEY, else
// general_settings.master_key, else (local backend only) the key file in the
// data dir, generated 0600 on first start. A secretsmanager/ reference is not
// read here but on the first request that needs it (resolve), so functions
// that never authenticate — health checks, the sweep — need no access to it.
func (g *Gateway) masterKey(secrets config.Secrets) (key string, resolve func(context.Context) (string, error), err error) {
	if k := g.Settings.MasterKey; k != "" {
		g.MasterKeySource = "SLUICE_MASTER_KEY"
		return k, nil, nil
	}
	if ref := g.Config.GeneralSettings.MasterKey; ref != "" {
		g.MasterKeySource = "config"
		if !strings.HasPrefix(ref, "secretsmanager/") {
			return ref, nil, nil
		}
		if secrets == nil {
			return "", nil, fmt.Errorf("general_settings.master_key %s: no secret store on the %s backend (Secrets Manager needs SLUICE_BACKEND=aws)", ref, g.Settings.Backend)
		}
		return "", func(ctx context.Context) (string, error) {
			k, err := g.Config.Resolve(ctx, secrets, ref)
			if err != nil {
				return "", fmt.Errorf("general_settings.master_key: %w", err)
			}
			return k, nil
		}, nil
	}
	if g.Settings.Backend != config.BackendLocal {
		return "", nil, errors.New("no master key: set SLUICE_MASTER_KEY or general_settings.master_key (e.g. secretsmanager/sluice-master-key)")
	}
	path := filepath.Join(g.Settings.DataDir, masterKeyFile)
	g.MasterKeySource = path
	data, err := os.ReadFile(path)
	if err == nil {
		if k := strings.TrimSpace(string(data)); k != "" {
			return k, nil, nil
		}
	} else if !errors.Is(err, fs.ErrNotExist) {
		return "", nil, fmt.Errorf("read master key: %w", err)
	}
	k := auth.NewKey()
	if err := writeFileAtomic(path, []byte(k+"\n"), 0o600); err != nil {
		return "", nil, fmt.Errorf("save master key: %w", err)
	}
	g.GeneratedMasterKey = k
	return k, nil, nil
}

// writeFileAtomic writes data to path through a temporary file and a rename,
// so a crash never leaves a half-written key.
func writeFileAtomic(path string, data []byte, perm os.FileMode) error {
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return err
	}
	f, err := os.CreateTemp(filepath.Dir(path), ".tmp-*")
	if err != nil {
		return err
	}
	defer os.Remove(f.Name())
	if err := f.Chmod(perm); err != nil {
		f.Close()
		return err
	}
	if _, err := f.Write(data); err != nil {
		f.Close()
		return err
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return err
	}
	if err := f.Close(); err != nil {
		return err
	}
	return os.Rename(f.Name(), path)
}
