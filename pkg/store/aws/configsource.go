package awsstore

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	s3types "github.com/aws/aws-sdk-go-v2/service/s3/types"
	"github.com/aws/aws-sdk-go-v2/service/ssm"
	ssmtypes "github.com/aws/aws-sdk-go-v2/service/ssm/types"

	"github.com/sluice-gateway/sluice/pkg/store"
)

// maxConfigBytes bounds a configuration document: a model list is a few
// kilobytes; anything near this is a wrong location.
const maxConfigBytes = 8 << 20

// FetchConfig reads the configuration document at location:
// "s3://bucket/key" (an S3 object) or "ssm:NAME" (an SSM parameter such as
// ssm:/sluice/prod/config, decrypted when it is a SecureString). Anything
// else is an error: file paths are the config package's business. A missing
// object or parameter wraps store.ErrNotFound.
func FetchConfig(ctx context.Context, cfg aws.Config, location string) ([]byte, error) {
	switch {
	case strings.HasPrefix(location, "s3://"):
		bucket, key, ok := strings.Cut(strings.TrimPrefix(location, "s3://"), "/")
		if !ok || bucket == "" || key == "" {
			return nil, fmt.Errorf("config %s: want s3://bucket/key", location)
		}
		return fetchS3(ctx, newS3Client(cfg), bucket, key)
	case strings.HasPrefix(location, "ssm:"):
		name := strings.TrimPrefix(location, "ssm:")
		if name == "" {
			return nil, fmt.Errorf("config %s: want ssm:/parameter/name", location)
		}
		return fetchSSM(ctx, ssm.NewFromConfig(cfg), name)
	}
	return nil, fmt.Errorf("config %s: not an s3:// or ssm: location", location)
}

func fetchS3(ctx context.Context, client *s3.Client, bucket, key string) ([]byte, error) {
	out, err := client.GetObject(ctx, &s3.GetObjectInput{Bucket: &bucket, Key: &key})
	if err != nil {
		var noKey *s3types.NoSuchKey
		var noBucket *s3types.NoSuchBucket
		if errors.As(err, &noKey) || errors.As(err, &noBucket) {
			return nil, wrapAs(store.ErrNotFound, err, "config s3://%s/%s", bucket, key)
		}
		return nil, wrap(err, "config s3://%s/%s", bucket, key)
	}
	defer out.Body.Close()
	b, err := io.ReadAll(io.LimitReader(out.Body, maxConfigBytes+1))
	if err != nil {
		return nil, wrap(err, "config s3://%s/%s: read", bucket, key)
	}
	if len(b) > maxConfigBytes {
		return nil, fmt.Errorf("config s3://%s/%s: larger than %d bytes", bucket, key, maxConfigBytes)
	}
	return b, nil
}

func fetchSSM(ctx context.Context, client *ssm.Client, name string) ([]byte, error) {
	out, err := client.GetParameter(ctx, &ssm.GetParameterInput{Name: &name, WithDecryption: aws.Bool(true)})
	if err != nil {
		var notFound *ssmtypes.ParameterNotFound
		if errors.As(err, &notFound) {
			return nil, wrapAs(store.ErrNotFound, err, "config ssm:%s", name)
		}
		return nil, wrap(err, "config ssm:%s", name)
	}
	return []byte(aws.ToString(out.Parameter.Value)), nil
}
