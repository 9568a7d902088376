package awsstore

import (
	"os"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/kms"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/sns"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
)

// clients are the service clients one Backend (or one Provision) uses.
// Endpoints come from cfg: the SDK resolves AWS_ENDPOINT_URL and
// AWS_ENDPOINT_URL_<SERVICE> itself when cfg comes from config.LoadDefaultConfig.
type clients struct {
	db  *dynamodb.Client
	s3  *s3.Client
	sqs *sqs.Client
	sns *sns.Client
	kms *kms.Client
}

func newClients(cfg aws.Config) clients {
	return clients{
		db:  dynamodb.NewFromConfig(cfg),
		s3:  newS3Client(cfg),
		sqs: sqs.NewFromConfig(cfg),
		sns: sns.NewFromConfig(cfg),
		kms: kms.NewFromConfig(cfg),
	}
}

// newS3Client returns an S3 client for cfg, using path-style addressing when
// the endpoint is overridden: an emulator on 127.0.0.1 cannot serve
// virtual-hosted buckets (bucket.127.0.0.1 does not resolve).
func newS3Client(cfg aws.Config) *s3.Client {
	return s3.NewFromConfig(cfg, func(o *s3.Options) {
		o.UsePathStyle = endpointOverridden(cfg)
	})
}

// endpointOverridden reports whether S3 requests go somewhere other than
// AWS's own endpoints: config.LoadDefaultConfig puts AWS_ENDPOINT_URL (and
// a shared-config endpoint_url) in cfg.BaseEndpoint; the S3 client itself
// reads AWS_ENDPOINT_URL_S3.
func endpointOverridden(cfg aws.Config) bool {
	if cfg.BaseEndpoint != nil && *cfg.BaseEndpoint != "" {
		return true
	}
	return os.Getenv("AWS_ENDPOINT_URL_S3") != "" && os.Getenv("AWS_IGNORE_CONFIGURED_ENDPOINT_URLS") != "true"
}
