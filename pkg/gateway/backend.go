package gateway

import (
	"context"
	"errors"
	"fmt"

	"github.com/sluice-gateway/sluice/pkg/config"
	"github.com/sluice-gateway/sluice/pkg/store"
	"github.com/sluice-gateway/sluice/pkg/store/local"
)

// Cloud is a backend with the cloud services that come with it.
type Cloud struct {
	Backend *store.Backend
	Fetch   config.Source  // nil: the config is a plain path
	Secrets config.Secrets // nil: no secret store
}

// OpenCloud opens the AWS backend over the resources named in the
// environment read through getenv (pkg/gateway/awscloud.Open).
type OpenCloud func(ctx context.Context, getenv func(string) string) (Cloud, error)

// errNoAWS is SLUICE_BACKEND=aws in a binary that does not link the AWS
// backend: the local process built without -tags aws.
var errNoAWS = errors.New("SLUICE_BACKEND=aws: this binary is built without the AWS backend (build the local process with -tags aws, as make run-aws does)")

// openBackend opens the storage backend settings name: the embedded one, or
// the AWS one through openAWS (nil: not linked); getenv names the AWS
// resources (SLUICE_TABLE, ...).
func openBackend(ctx context.Context, s config.Settings, getenv func(string) string, openAWS OpenCloud) (Cloud, error) {
	switch s.Backend {
	case config.BackendAWS:
		if openAWS == nil {
			return Cloud{}, errNoAWS
		}
		return openAWS(ctx, getenv)
	default:
		b, err := local.Open(s.DataDir, local.Options{Deliveries: local.QueueOptions{Visibility: local.DeliveryVisibility}})
		if err != nil {
			return Cloud{}, fmt.Errorf("open local store in %s: %w", s.DataDir, err)
		}
		return Cloud{Backend: b}, nil
	}
}
