// Package awscloud opens sluice's AWS backend from the environment: the
// storage adapters (pkg/store/aws), the S3/SSM config sources and Secrets
// Manager. It is apart from pkg/gateway so that a binary links the AWS SDK's
// service clients only when it passes Open to gateway.WithAWS: every Lambda
// function does, the local process only when built with -tags aws. Their
// packages build large schema and endpoint tables at init, which would
// otherwise stay in every local process's heap for the garbage collector to
// scan, used or not.
package awscloud

import (
	"context"
	"fmt"

	awsconfig "github.com/aws/aws-sdk-go-v2/config"

	"github.com/sluice-gateway/sluice/pkg/gateway"
	awsstore "github.com/sluice-gateway/sluice/pkg/store/aws"
)

// Open opens the AWS adapters over the resources named in the environment
// read through getenv (SLUICE_TABLE, SLUICE_BUCKET, ...), with endpoints from
// the SDK's standard AWS_ENDPOINT_URL* variables, and the Secrets Manager and
// S3/SSM config sources that come with them.
func Open(ctx context.Context, getenv func(string) string) (gateway.Cloud, error) {
	cfg, err := awsconfig.LoadDefaultConfig(ctx)
	if err != nil {
		return gateway.Cloud{}, fmt.Errorf("load AWS configuration: %w", err)
	}
	res, err := awsstore.ResourcesFromEnv(getenv)
	if err != nil {
		return gateway.Cloud{}, err
	}
	b, err := awsstore.Open(ctx, cfg, res)
	if err != nil {
		return gateway.Cloud{}, fmt.Errorf("open AWS backend: %w", err)
	}
	return gateway.Cloud{
		Backend: b,
		Fetch: func(ctx context.Context, location string) ([]byte, error) {
			return awsstore.FetchConfig(ctx, cfg, location)
		},
		Secrets: awsstore.NewSecretStore(cfg),
	}, nil
}
