package gateway

import (
	"context"
	"fmt"

	"github.com/sluice-gateway/sluice/pkg/config"
	"github.com/sluice-gateway/sluice/pkg/store"
	"github.com/sluice-gateway/sluice/pkg/store/local"
)

// opened is a backend with the cloud services that come with it.
type opened struct {
	backend *store.Backend
	fetch   config.Source  // nil: the config is a plain path
	secrets config.Secrets // nil: no secret store
}

// openBackend opens the storage backend settings name; getenv names the
// AWS resources (SLUICE_TABLE, ...).
func openBackend(ctx context.Context, s config.Settings, getenv func(string) string) (opened, error) {
	switch s.Backend {
	case config.BackendAWS:
		return openAWS(ctx, getenv)
	default:
		b, err := local.Open(s.DataDir, local.Options{Deliveries: local.QueueOptions{Visibility: local.DeliveryVisibility}})
		if err != nil {
			return opened{}, fmt.Errorf("open local store in %s: %w", s.DataDir, err)
		}
		return opened{backend: b}, nil
	}
}
