package awsstore_test

import (
	"context"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	awsconfig "github.com/aws/aws-sdk-go-v2/config"

	awsstore "github.com/sluice-gateway/sluice/pkg/store/aws"
)

// S3 is addressed by path whenever its endpoint is overridden — for every
// service (AWS_ENDPOINT_URL, in cfg.BaseEndpoint) or for S3 alone
// (AWS_ENDPOINT_URL_S3, which the SDK resolves from cfg's config sources) —
// and by virtual host on AWS's own endpoints.
func TestS3PathStyleFollowsTheEndpoint(t *testing.T) {
	load := func(t *testing.T) aws.Config {
		t.Helper()
		cfg, err := awsconfig.LoadDefaultConfig(context.Background(), awsconfig.WithRegion("us-east-1"))
		if err != nil {
			t.Fatal(err)
		}
		return cfg
	}
	for _, tc := range []struct {
		name string
		env  map[string]string
		want bool
	}{
		{"AWS's endpoints", nil, false},
		{"every service overridden", map[string]string{"AWS_ENDPOINT_URL": "http://127.0.0.1:1"}, true},
		{"S3 overridden", map[string]string{"AWS_ENDPOINT_URL_S3": "http://127.0.0.1:1"}, true},
		{"S3 overridden, overrides ignored", map[string]string{"AWS_ENDPOINT_URL_S3": "http://127.0.0.1:1", "AWS_IGNORE_CONFIGURED_ENDPOINT_URLS": "true"}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			for _, k := range []string{"AWS_ENDPOINT_URL", "AWS_ENDPOINT_URL_S3", "AWS_IGNORE_CONFIGURED_ENDPOINT_URLS", "AWS_PROFILE"} {
				t.Setenv(k, tc.env[k])
			}
			t.Setenv("AWS_CONFIG_FILE", t.TempDir()+"/none")
			if got := awsstore.PathStyle(load(t)); got != tc.want {
				t.Errorf("path-style = %v, want %v", got, tc.want)
			}
		})
	}
}
