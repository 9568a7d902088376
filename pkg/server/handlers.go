package server

import (
	"net/http"
	"slices"

	"github.com/sluice-gateway/sluice/pkg/api"
	"github.com/sluice-gateway/sluice/pkg/auth"
	"github.com/sluice-gateway/sluice/pkg/batches"
	"github.com/sluice-gateway/sluice/pkg/callbacks"
	"github.com/sluice-gateway/sluice/pkg/files"
	"github.com/sluice-gateway/sluice/pkg/modelcall"
	"github.com/sluice-gateway/sluice/pkg/ui"
)

// The route table's handlers over the services: the capabilities' own HTTP
// shells, and the few routes small enough to have none.

func (s *Services) callbacksAPI() callbacks.Handlers {
	return callbacks.Handlers{Service: s.Callbacks, JSONLimit: s.Settings.JSONBodyLimit}
}

func (s *Services) batchesAPI() batches.Handlers {
	return batches.Handlers{Service: s.Batches, JSONLimit: s.Settings.JSONBodyLimit}
}

func (s *Services) admin() auth.Handlers {
	return auth.Handlers{Service: s.Auth, JSONLimit: s.Settings.JSONBodyLimit, Spend: s.Budgets}
}

// page serves the admin page's embedded assets (pkg/ui).
func (s *Services) page() HandlerFunc {
	h, err := ui.New()
	if err != nil {
		return func(http.ResponseWriter, *http.Request) error { return err }
	}
	return h.Serve
}

func (s *Services) filesAPI() files.Handlers {
	return files.Handlers{Service: s.Files, JSONLimit: s.Settings.JSONBodyLimit}
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

// metricsPage serves GET /metrics: the process's instruments in the
// Prometheus text format. A Lambda function has no process worth scraping
// (each container counts its own calls): it writes its measurements as EMF
// lines, and this says so.
func (s *Services) metricsPage(w http.ResponseWriter, r *http.Request) error {
	switch {
	case s.Metrics == nil:
		return api.NotFound("Metrics are off on this gateway (SLUICE_METRICS=false).")
	case s.Metrics.EMF():
		return api.NotFound("In the cloud sluice's metrics are in CloudWatch, namespace %s (Embedded Metric Format in each function's log group); there is no /metrics to scrape.", s.Metrics.Namespace())
	}
	s.Metrics.Handler().ServeHTTP(w, r)
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

// call is the route handler of the model operation at path (a key of
// Operations): the one HTTP shell of every model endpoint.
func (s *Services) call(path string) HandlerFunc {
	op, ok := s.Operations[path]
	if !ok {
		panic("server: no model operation for " + path) // the route table names an operation that is not built
	}
	return modelcall.Handler(op, s.Settings.JSONBodyLimit)
}
