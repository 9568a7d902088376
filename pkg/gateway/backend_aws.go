package gateway

import (
	"context"
	"fmt"

	awsconfig "github.com/aws/aws-sdk-go-v2/config"

	awsstore "github.com/sluice-gateway/sluice/pkg/store/aws"
)

// openAWS opens the AWS adapters over the resources named in the environment
// read through getenv (SLUICE_TABLE, SLUICE_BUCKET, ...), with endpoints from the SDK's standard
// AWS_ENDPOINT_URL* variables, and the Secrets Manager and S3/SSM config
// sources that come with them.
func openAWS(ctx context.Context, getenv func(string) string) (opened, error) {
	cfg, err := awsconfig.LoadDefaultConfig(ctx)
	if err != nil {
		return opened{}, fmt.Errorf("load AWS configuration: %w", err)
	}
	res, err := awsstore.ResourcesFromEnv(getenv)
	if err != nil {
		return opened{}, err
	}
	b, err := awsstore.Open(ctx, cfg, res)
	if err != nil {
		return opened{}, fmt.Errorf("open AWS backend: %w", err)
	}
	return opened{
		backend: b,
		fetch: func(ctx context.Context, location string) ([]byte, error) {
			return awsstore.FetchConfig(ctx, cfg, location)
		},
		secrets: awsstore.NewSecretStore(cfg),
	}, nil
}
