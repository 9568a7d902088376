// Command provision creates (or finds) the AWS resources of one sluice
// deployment and prints them as SLUICE_*=value lines, the environment the
// functions read (awsstore.ResourcesFromEnv):
//
//	AWS_ENDPOINT_URL=http://127.0.0.1:PORT go run ./infra/provision -prefix sluice-local
//
// It uses the standard AWS configuration (AWS_REGION, credentials,
// AWS_ENDPOINT_URL for an emulator). Running it again changes nothing.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"time"

	"github.com/aws/aws-sdk-go-v2/config"

	awsstore "github.com/sluice-gateway/sluice/pkg/store/aws"
)

func main() {
	prefix := flag.String("prefix", "sluice-local", "resource name prefix: 3-40 characters of [a-z0-9-]")
	timeout := flag.Duration("timeout", 2*time.Minute, "give up after this long")
	flag.Parse()
	if err := run(*prefix, *timeout); err != nil {
		fmt.Fprintln(os.Stderr, "provision:", err)
		os.Exit(1)
	}
}

func run(prefix string, timeout time.Duration) error {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	cfg, err := config.LoadDefaultConfig(ctx)
	if err != nil {
		return fmt.Errorf("load AWS configuration: %w", err)
	}
	if cfg.Region == "" {
		return errors.New("no AWS region: set AWS_REGION (us-east-1 for moto_server)")
	}
	res, err := awsstore.Provision(ctx, cfg, prefix)
	if err != nil {
		return err
	}
	for _, line := range res.Env() {
		fmt.Println(line)
	}
	return nil
}
