package server

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"net/http"
	"os"
	"slices"
	"time"

	"github.com/sluice-gateway/sluice/pkg/auth"
	"github.com/sluice-gateway/sluice/pkg/batches"
	"github.com/sluice-gateway/sluice/pkg/batchinput"
	"github.com/sluice-gateway/sluice/pkg/callbacks"
	"github.com/sluice-gateway/sluice/pkg/callbacks/delivery"
	"github.com/sluice-gateway/sluice/pkg/callbacks/gcsbucket"
	"github.com/sluice-gateway/sluice/pkg/chat"
	"github.com/sluice-gateway/sluice/pkg/config"
	"github.com/sluice-gateway/sluice/pkg/embeddings"
	"github.com/sluice-gateway/sluice/pkg/files"
	"github.com/sluice-gateway/sluice/pkg/logevent"
	"github.com/sluice-gateway/sluice/pkg/messages"
	"github.com/sluice-gateway/sluice/pkg/metrics"
	"github.com/sluice-gateway/sluice/pkg/modelcall"
	"github.com/sluice-gateway/sluice/pkg/models"
	"github.com/sluice-gateway/sluice/pkg/moderations"
	"github.com/sluice-gateway/sluice/pkg/passthrough"
	"github.com/sluice-gateway/sluice/pkg/providers"
	"github.com/sluice-gateway/sluice/pkg/providers/bedrock"
	"github.com/sluice-gateway/sluice/pkg/providers/vendors"
	"github.com/sluice-gateway/sluice/pkg/server/middleware"
	"github.com/sluice-gateway/sluice/pkg/spend"
	"github.com/sluice-gateway/sluice/pkg/store"
	"github.com/sluice-gateway/sluice/pkg/traces"
)

// Deps is what a process brings to build its services: settings, the parsed
// config, and the storage backend.
type Deps struct {
	Settings config.Settings
	Config   *config.Config
	Backend  *store.Backend
	// MasterKey is the master key; when empty, ResolveMasterKey reads it on
	// the first request that needs it.
	MasterKey        string
	ResolveMasterKey func(ctx context.Context) (string, error)
	// Secrets resolves secretsmanager/ references in the config (nil locally).
	Secrets config.Secrets
	// Now is the clock for expiry decisions; nil means time.Now (tests move it).
	Now func() time.Time
	// Getenv reads the environment fallbacks of provider credentials
	// (ANTHROPIC_API_KEY, GOOGLE_APPLICATION_CREDENTIALS, AWS_REGION, ...);
	// nil reads the process environment.
	Getenv func(string) string
	// Batches, when set, adjusts the batch engine's options (tests: smaller
	// chunks, shorter runs and leases).
	Batches func(*batches.Options)
	// Metrics records the measurements (pkg/metrics); nil records none.
	Metrics *metrics.Metrics
	// Tracer makes the traces (pkg/traces); nil makes none.
	Tracer *traces.Tracer
}

// Services are the capability services the routes call. Building them does
// no I/O, so every function can build the same set cheaply.
type Services struct {
	Settings config.Settings
	Config   *config.Config
	Backend  *store.Backend
	Secrets  config.Secrets
	Auth     *auth.Service
	// Catalog says where a team's log events go — its callbacks and the
	// gateway-wide ones: Events asks it before publishing, Delivery where
	// to send. Callback settings writes drop a team's entry at once.
	Catalog *callbacks.Catalog
	Events  *logevent.Emitter
	// Callbacks manages team callback settings (pkg/callbacks).
	Callbacks *callbacks.Service
	// Delivery delivers log events to the callbacks: the callback-delivery
	// job's handler.
	Delivery *delivery.Deliverer
	// Models routes model calls to deployments (pkg/models).
	Models *models.Router
	// Calls is the call layer every model operation ends its calls through.
	Calls       *modelcall.Calls
	Embeddings  *embeddings.Service
	Moderations *moderations.Service
	// Chat serves chat completions, completions and responses.
	Chat *chat.Service
	// Messages is Anthropic's Messages API over the same router.
	Messages *messages.Service
	// Operations are the model endpoints' operations by OpenAI path: the
	// routes mount them, and the batch worker runs lines through them.
	Operations modelcall.Operations
	// Files serves the Files and Uploads APIs (pkg/files).
	Files *files.Service
	// Passthrough serves /vertex-ai, /bedrock, /anthropic and /gemini.
	Passthrough *passthrough.Service
	// Batches serves the Batch API and runs batches (the batch-worker and
	// batch-sweeper jobs).
	Batches *batches.Service
	// Budgets admits calls against their key's and team's budgets; Counter
	// counts what they spent (the callback-delivery job hands it every
	// log event); Reports reads the counts (pkg/spend).
	Budgets *spend.Budgets
	Pricer  *spend.Pricer
	Counter *spend.Counter
	Reports spend.Reports
	// Metrics records requests, calls and deliveries; nil when off.
	Metrics *metrics.Metrics
	// Tracer makes requests', attempts', lines' and deliveries' spans;
	// nil when off.
	Tracer *traces.Tracer

	// edge is the middleware every route's handler runs in.
	edge *middleware.Chain
}

// NewServices builds the services over deps, each once its dependencies
// are built and handed to its constructor: auth; the callbacks' catalog, the
// pricer and the emitter that asks them; the callbacks, their delivery and
// spend; the models and their operations; files, then the batch engine that
// reads through it; passthrough; the middleware.
func NewServices(deps Deps) (*Services, error) {
	if deps.Backend == nil {
		return nil, errors.New("server: a storage backend is required")
	}
	if deps.Config == nil {
		deps.Config = &config.Config{}
	}
	if deps.Getenv == nil {
		deps.Getenv = os.Getenv
	}
	a, err := auth.NewService(deps.Backend.Records, deps.Backend.Limiter, deps.MasterKey, auth.Options{
		CacheTTL:         deps.Settings.KeyCacheTTL,
		NegativeCacheTTL: deps.Settings.KeyNegativeCacheTTL,
		ResolveMasterKey: deps.ResolveMasterKey,
	})
	if err != nil {
		return nil, err
	}
	s := &Services{
		Settings: deps.Settings, Config: deps.Config, Backend: deps.Backend, Secrets: deps.Secrets,
		Auth: a, Metrics: deps.Metrics, Tracer: deps.Tracer,
	}
	if err := s.buildEvents(deps); err != nil {
		return nil, err
	}
	if err := s.buildCallbacks(deps); err != nil {
		return nil, err
	}
	s.buildSpend(deps)
	// One client, so model calls and passthrough share one connection pool.
	client := providers.NewHTTPClient()
	client.Transport = deps.Tracer.Transport(client.Transport)
	if err := s.buildModels(deps, client); err != nil {
		return nil, err
	}
	s.buildFilesAndBatches(deps)
	if s.Passthrough, err = passthrough.New(passthrough.Options{
		Config: deps.Config, Secrets: deps.Secrets, Getenv: deps.Getenv, Client: client,
		Limits: a, Records: deps.Backend.Records, Events: s.Events, AWSDefaultChain: bedrock.SDKDefaultChain, MaxBody: deps.Settings.MaxFileSize,
	}); err != nil {
		return nil, err
	}
	s.edge = middleware.New(middleware.Deps{Auth: a, Budgets: s.Budgets, Metrics: deps.Metrics, Tracer: deps.Tracer, Now: deps.Now})
	return s, nil
}

// buildEvents builds the catalog of who listens to log events, the pricer
// of every event, and the emitter that asks them both.
func (s *Services) buildEvents(deps Deps) error {
	gateway, err := callbacks.GatewayCallbacks(deps.Config, deps.Getenv)
	if err != nil {
		return err
	}
	s.Catalog = callbacks.NewCatalog(deps.Backend.Records, deps.Backend.Sealer, callbacks.CatalogOptions{
		TTL: deps.Settings.CallbackCacheTTL, Now: deps.Now, Gateway: gateway,
		Resolve: func(ctx context.Context, v string) (string, error) { return deps.Config.Resolve(ctx, deps.Secrets, v) },
	})
	table, err := spend.ShippedTable()
	if err != nil {
		return err
	}
	if s.Pricer, err = spend.NewPricer(table, deps.Config); err != nil {
		return err
	}
	s.Events = logevent.NewEmitter(deps.Backend.Bus, deps.Backend.Blobs, s.Catalog, int(deps.Settings.ClaimCheckThreshold))
	s.Events.SetPricer(s.Pricer)
	if deps.Metrics != nil {
		s.Events.Observe(deps.Metrics)
	}
	if deps.Tracer.On() {
		s.Events.Observe(deps.Tracer)
	}
	return nil
}

// buildCallbacks builds the callback settings service and the delivery
// worker.
func (s *Services) buildCallbacks(deps Deps) error {
	guard, err := callbacks.NewGuard(deps.Config.CallbackSettings.AllowHosts)
	if err != nil {
		return err
	}
	accounts := callbacks.NewServiceAccounts(deps.Settings.ServiceAccountDir, guard)
	if s.Callbacks, err = callbacks.NewService(callbacks.Deps{
		Records: deps.Backend.Records, Sealer: deps.Backend.Sealer, Teams: s.Auth, Catalog: s.Catalog,
		Guard: guard, Accounts: accounts, Now: deps.Now,
	}); err != nil {
		return err
	}
	var recorder delivery.Recorder
	if deps.Metrics != nil {
		recorder = deps.Metrics
	}
	s.Delivery, err = delivery.New(delivery.Deps{
		Catalog: s.Catalog, Records: deps.Backend.Records, Blobs: deps.Backend.Blobs, DeadLetters: deps.Backend.DeliveryDeadLetters,
		Recorder: recorder, Tracer: deps.Tracer,
		Open: delivery.NewOpener(delivery.OpenerDeps{
			Client: guard.Client(), GatewayClient: callbacks.GatewayClient(), Accounts: accounts,
			GCSEndpoint: gcsbucket.Endpoint(deps.Getenv),
		}),
	}, delivery.Options{Now: deps.Now})
	return err
}

// buildSpend builds the budgets, the spend counter and the reports.
func (s *Services) buildSpend(deps Deps) {
	s.Budgets = spend.NewBudgets(deps.Backend.Records, spend.BudgetOptions{Now: deps.Now, Alerts: s.Events})
	s.Counter = spend.NewCounter(deps.Backend.Records, s.Auth, spend.CounterOptions{Now: deps.Now})
	s.Reports = spend.Reports{Records: deps.Backend.Records, Names: s.Auth}
}

// lineAdmitter admits a batch line as the HTTP edge admits a request: the
// key's and team's rate limits, then their budgets.
type lineAdmitter struct{ s *Services }

func (a lineAdmitter) Admit(ctx context.Context, p auth.Principal) error {
	_, end, err := a.AdmitCall(ctx, p)
	end()
	return err
}

// AdmitCall admits a line and reserves its estimated cost against its
// budgets until its log event is priced (modelcall.CallAdmitter).
func (a lineAdmitter) AdmitCall(ctx context.Context, p auth.Principal) (context.Context, func(), error) {
	if err := a.s.Auth.Admit(ctx, p); err != nil {
		return ctx, func() {}, err
	}
	ctx, err := a.s.Budgets.Admit(ctx, p)
	return ctx, func() { spend.Settle(ctx) }, err
}

// buildModels builds the router over the provider registry, the call layer,
// and the model operations on them.
func (s *Services) buildModels(deps Deps, client *http.Client) error {
	opts := models.Options{
		Config: deps.Config, Secrets: deps.Secrets, Getenv: deps.Getenv, Limiter: deps.Backend.Limiter,
		KeyTokens: s.Auth, Providers: vendors.Providers(vendors.Deps{Client: client, AWSDefaultChain: bedrock.SDKDefaultChain}),
	}
	if deps.Metrics != nil {
		opts.Observer = deps.Metrics
	}
	router, err := models.NewRouter(opts)
	if err != nil {
		return err
	}
	s.Models = router
	s.Calls = modelcall.New(s.Events, router)
	s.Embeddings = embeddings.New(router, s.Calls)
	s.Moderations = moderations.New(router, s.Calls, deps.Config)
	s.Chat = chat.New(router, s.Calls)
	s.Messages = messages.New(router, s.Calls)
	s.Operations = modelcall.Operations{
		"/v1/embeddings":       s.Embeddings.Create,
		"/v1/moderations":      s.Moderations.Create,
		"/v1/chat/completions": s.Chat.Chat,
		"/v1/completions":      s.Chat.Completions,
		"/v1/responses":        s.Chat.Responses,
		"/v1/messages":         s.Messages.Messages,
	}
	return checkOperations(s.Operations)
}

// checkOperations holds the model operations to the batch endpoints
// (batchinput.Endpoints, their one declaration): a batch line's url names
// an operation, so a path with no operation, or an operation no batch may
// name, is a wiring mistake caught at start-up.
func checkOperations(ops modelcall.Operations) error {
	declared := batchinput.Endpoints()
	built := slices.Sorted(maps.Keys(ops))
	slices.Sort(declared)
	if !slices.Equal(built, declared) {
		return fmt.Errorf("server: the model operations %v are not the batch endpoints %v (pkg/batchinput)", built, declared)
	}
	return nil
}

// buildFilesAndBatches builds the files service — which asks the batch
// records (batches.Inputs) which files running batches read — then the
// batch engine over it and the model operations, native batches included.
func (s *Services) buildFilesAndBatches(deps Deps) {
	s.Files = files.NewService(deps.Backend.Records, deps.Backend.Blobs, files.Options{
		MaxFileSize: deps.Settings.MaxFileSize, MaxLineBytes: int(deps.Settings.JSONBodyLimit), Now: deps.Now,
		Batches: batches.Inputs{Records: deps.Backend.Records},
	})
	opts := batches.Options{
		Windows:     deps.Settings.BatchCompletionWindows,
		Concurrency: deps.Settings.BatchConcurrency,
		// The embedded backend's lock makes this process its only one.
		SingleProcess: deps.Settings.Backend == config.BackendLocal,
		MaxLineBytes:  int(deps.Settings.JSONBodyLimit),
		Now:           deps.Now,
	}
	if deps.Batches != nil {
		deps.Batches(&opts)
	}
	s.Batches = batches.NewService(batches.Deps{
		Records: deps.Backend.Records, Blobs: deps.Backend.Blobs, Work: deps.Backend.Work,
		Files: s.Files, Keys: s.Auth, Admit: lineAdmitter{s}, Operations: s.Operations, Models: s.Models,
		Tracer: deps.Tracer,
		Prices: s.Pricer, Budget: s.Budgets,
		Native: &batches.NativeDeps{Deployments: s.Models, Store: batchStore{deps.Backend.Blobs}, Events: s.Events},
	}, opts)
	deps.Metrics.WatchBatchLinesWaiting(s.Batches.LinesWaiting)
}

// batchStore is the blob store as a provider's batch API sees it: with its
// objects' s3:// URIs when it is an S3 bucket.
type batchStore struct{ store.Blobs }

func (b batchStore) S3URI(key string) (string, bool) {
	if u, ok := b.Blobs.(interface{ S3URI(string) (string, bool) }); ok {
		return u.S3URI(key)
	}
	return "", false
}
