// Package awstest gives tests an AWS to run against: a moto_server (or any
// endpoint speaking the AWS APIs) named by SLUICE_TEST_AWS_ENDPOINT, and
// fresh, uniquely named resources on it for every test.
//
// `make test-aws` starts moto_server, sets SLUICE_TEST_AWS_ENDPOINT and
// SLUICE_REQUIRE_AWS=1, and stops moto afterwards. Without the endpoint the
// tests skip, unless SLUICE_REQUIRE_AWS=1 says they must run: then they
// fail, so CI never passes by silently skipping them.
package awstest

import (
	"context"
	"crypto/rand"
	"net/http"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	awshttp "github.com/aws/aws-sdk-go-v2/aws/transport/http"
	"github.com/aws/aws-sdk-go-v2/credentials"

	"github.com/sluice-gateway/sluice/pkg/store"
	awsstore "github.com/sluice-gateway/sluice/pkg/store/aws"
)

// Environment variables the helpers read.
const (
	EndpointEnv = "SLUICE_TEST_AWS_ENDPOINT" // e.g. http://127.0.0.1:PORT
	RequireEnv  = "SLUICE_REQUIRE_AWS"       // "1": a missing endpoint fails the test
)

// Config returns an AWS config pointed at the test endpoint with static
// test credentials in us-east-1. It reads no other AWS setting from the
// environment or ~/.aws, so a developer's real credentials are never used.
func Config(t testing.TB) aws.Config {
	t.Helper()
	endpoint := os.Getenv(EndpointEnv)
	if endpoint == "" {
		msg := EndpointEnv + " is not set: this test needs an AWS emulator. Run `make test-aws`, " +
			"or start one with `infra/moto.sh start` and export " + EndpointEnv + "=<the endpoint it prints>"
		if os.Getenv(RequireEnv) == "1" {
			t.Fatal(msg + " (" + RequireEnv + "=1, so not skipping)")
		}
		t.Skip(msg)
	}
	return aws.Config{
		Region:       "us-east-1",
		Credentials:  credentials.NewStaticCredentialsProvider("test", "test", ""),
		BaseEndpoint: aws.String(endpoint),
		HTTPClient:   &serialDynamoDB{next: awshttp.NewBuildableClient()},
	}
}

// serialDynamoDB sends one DynamoDB request at a time. moto_server serves
// requests on concurrent threads and evaluates a condition and applies the
// write without a lock, so two racing conditional writes can both succeed
// there, which never happens on DynamoDB. Serializing this client's DynamoDB
// calls restores DynamoDB's per-item atomicity for the tests (which use
// their own tables, so other processes cannot interleave); moto is one
// Python process, so little throughput is lost. Other services pass through:
// SQS long polls must not hold anything up.
type serialDynamoDB struct {
	next aws.HTTPClient
	mu   sync.Mutex
}

func (s *serialDynamoDB) Do(r *http.Request) (*http.Response, error) {
	if !strings.HasPrefix(r.Header.Get("X-Amz-Target"), "DynamoDB_") {
		return s.next.Do(r)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	// moto has applied the request once it answers: holding the lock until
	// the response headers arrive is enough.
	return s.next.Do(r)
}

// Prefix returns a fresh resource-name prefix, unique per call (50 random
// bits), valid for awsstore.Provision.
func Prefix() string {
	return "sluicet-" + strings.ToLower(rand.Text()[:10])
}

// Resources provisions a fresh, uniquely named set of resources and deletes
// them when the test ends.
func Resources(t testing.TB) (aws.Config, awsstore.Resources) {
	t.Helper()
	cfg := Config(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	res, err := awsstore.Provision(ctx, cfg, Prefix())
	if err != nil {
		t.Fatalf("awstest: provision: %v", err)
	}
	t.Cleanup(func() { teardown(t, cfg, res) })
	return cfg, res
}

// Backend returns a store.Backend on fresh resources (see Resources).
func Backend(t testing.TB) *store.Backend {
	t.Helper()
	cfg, res := Resources(t)
	b, err := awsstore.Open(context.Background(), cfg, res)
	if err != nil {
		t.Fatalf("awstest: open: %v", err)
	}
	t.Cleanup(func() { _ = b.Close() })
	return b
}
