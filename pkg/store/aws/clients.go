package awsstore

import (
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
// its endpoint is overridden: an emulator on 127.0.0.1 cannot serve
// virtual-hosted buckets (bucket.127.0.0.1 does not resolve). The client has
// resolved its endpoint by the time its options are applied — cfg's
// BaseEndpoint (AWS_ENDPOINT_URL, a shared-config endpoint_url) or the
// S3-specific one the SDK reads from cfg's config sources
// (AWS_ENDPOINT_URL_S3) — so the adapter reads no environment itself.
func newS3Client(cfg aws.Config) *s3.Client {
	return s3.NewFromConfig(cfg, func(o *s3.Options) {
		o.UsePathStyle = o.BaseEndpoint != nil && *o.BaseEndpoint != ""
	})
}
