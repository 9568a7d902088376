package server

import (
	"errors"
	"net/http"
	"slices"

	"github.com/sluice-gateway/sluice/pkg/api"
	"github.com/sluice-gateway/sluice/pkg/auth"
	"github.com/sluice-gateway/sluice/pkg/config"
	"github.com/sluice-gateway/sluice/pkg/logevent"
	"github.com/sluice-gateway/sluice/pkg/store"
)

// Deps is what a process brings to build its services: settings, the parsed
// config, and the storage backend.
type Deps struct {
	Settings config.Settings
	Config   *config.Config
	Backend  *store.Backend
	// MasterKey is the resolved master key.
	MasterKey string
	// Secrets resolves secretsmanager/ references in the config (nil locally).
	Secrets config.Secrets
}

// Services are the capability services the routes call. Building them does
// no I/O, so every function can build the same set cheaply.
type Services struct {
	Settings config.Settings
	Config   *config.Config
	Backend  *store.Backend
	Secrets  config.Secrets
	Auth     *auth.Service
	Events   *logevent.Emitter
}

// NewServices builds the services over deps.
func NewServices(deps Deps) (*Services, error) {
	if deps.Backend == nil {
		return nil, errors.New("server: a storage backend is required")
	}
	if deps.Config == nil {
		deps.Config = &config.Config{}
	}
	a, err := auth.NewService(deps.Backend.Records, deps.Backend.Limiter, deps.MasterKey, auth.Options{
		CacheTTL:         deps.Settings.KeyCacheTTL,
		NegativeCacheTTL: deps.Settings.KeyNegativeCacheTTL,
	})
	if err != nil {
		return nil, err
	}
	return &Services{
		Settings: deps.Settings,
		Config:   deps.Config,
		Backend:  deps.Backend,
		Secrets:  deps.Secrets,
		Auth:     a,
		// Nobody listens until team callbacks exist.
		Events: logevent.NewEmitter(deps.Backend.Bus, deps.Backend.Blobs, nil, int(deps.Settings.ClaimCheckThreshold)),
	}, nil
}

func (s *Services) admin() auth.Handlers {
	return auth.Handlers{Service: s.Auth, JSONLimit: s.Settings.JSONBodyLimit}
}

var healthy = map[string]string{"status": "healthy"}

func (s *Services) liveliness(w http.ResponseWriter, r *http.Request) error {
	api.WriteJSON(w, http.StatusOK, healthy)
	return nil
}

func (s *Services) readiness(w http.ResponseWriter, r *http.Request) error {
	if s.Backend.Ping != nil {
		if err := s.Backend.Ping(r.Context()); err != nil {
			e := api.Unavailable("Not ready: the storage backend does not answer.")
			e.Err = err
			return e
		}
	}
	api.WriteJSON(w, http.StatusOK, healthy)
	return nil
}

// model is an entry of GET /v1/models.
type model struct {
	ID      string `json:"id"`
	Object  string `json:"object"`
	Created int64  `json:"created"`
	OwnedBy string `json:"owned_by"`
}

// listModels serves GET /v1/models: the configured model names the key may use.
func (s *Services) listModels(w http.ResponseWriter, r *http.Request) error {
	p := auth.FromContext(r.Context())
	var names []string
	for _, d := range s.Config.ModelList {
		if p.AllowsModel(d.ModelName) && !slices.Contains(names, d.ModelName) {
			names = append(names, d.ModelName)
		}
	}
	data := make([]model, 0, len(names))
	for _, n := range names {
		data = append(data, model{ID: n, Object: "model", OwnedBy: "sluice"})
	}
	api.WriteJSON(w, http.StatusOK, map[string]any{"object": "list", "data": data})
	return nil
}
