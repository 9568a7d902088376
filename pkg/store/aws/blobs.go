package awsstore

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"strconv"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/feature/s3/manager"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	s3types "github.com/aws/aws-sdk-go-v2/service/s3/types"

	"github.com/sluice-gateway/sluice/pkg/store"
)

// Upload tuning. The upload manager buffers (Concurrency+1) parts per
// upload, so a Put holds about 15 MiB however large the object: a 100 MB
// file streams through in 5 MiB parts. 5 MiB is S3's minimum part size.
const (
	uploadPartSize    = manager.MinUploadPartSize
	uploadConcurrency = 2
)

// Blobs implements store.Blobs and store.Presigner on an S3 bucket, every
// key under a fixed prefix.
type Blobs struct {
	s3       *s3.Client
	presign  *s3.PresignClient
	uploader *manager.Uploader
	bucket   string
	prefix   string
}

var (
	_ store.Blobs     = (*Blobs)(nil)
	_ store.Presigner = (*Blobs)(nil)
)

// NewBlobs returns the blob adapter for bucket; keys are stored as
// prefix+key (prefix may be "").
func NewBlobs(client *s3.Client, bucket, prefix string) *Blobs {
	return &Blobs{
		s3:      client,
		presign: s3.NewPresignClient(client),
		uploader: manager.NewUploader(client, func(u *manager.Uploader) {
			u.PartSize = uploadPartSize
			u.Concurrency = uploadConcurrency
		}),
		bucket: bucket,
		prefix: prefix,
	}
}

// Put streams r to S3: one PutObject when r ends within the first part,
// else a multipart upload that S3 makes visible only on completion (and
// that the manager aborts on error).
func (b *Blobs) Put(ctx context.Context, key string, r io.Reader) (int64, error) {
	cr := &countingReader{r: r}
	_, err := b.uploader.Upload(ctx, &s3.PutObjectInput{
		Bucket: &b.bucket,
		Key:    aws.String(b.prefix + key),
		Body:   cr, // not a Seeker: the manager reads it part by part
	})
	if err != nil {
		return 0, wrap(err, "s3 put %s", key)
	}
	return cr.n, nil
}

// Get streams length bytes from offset (length < 0: to the end). A range
// starting at or past the end reads as empty, as a file would.
func (b *Blobs) Get(ctx context.Context, key string, offset, length int64) (io.ReadCloser, error) {
	if offset < 0 {
		return nil, fmt.Errorf("s3 get %s: negative offset %d", key, offset)
	}
	if length == 0 {
		if _, err := b.Size(ctx, key); err != nil {
			return nil, err
		}
		return io.NopCloser(bytes.NewReader(nil)), nil
	}
	in := &s3.GetObjectInput{Bucket: &b.bucket, Key: aws.String(b.prefix + key)}
	switch {
	case length > 0:
		in.Range = aws.String("bytes=" + strconv.FormatInt(offset, 10) + "-" + strconv.FormatInt(offset+length-1, 10))
	case offset > 0:
		in.Range = aws.String("bytes=" + strconv.FormatInt(offset, 10) + "-")
	}
	out, err := b.s3.GetObject(ctx, in)
	if err != nil {
		if apiCode(err) == "InvalidRange" {
			// The object exists (else NoSuchKey) but ends before offset.
			return io.NopCloser(bytes.NewReader(nil)), nil
		}
		return nil, b.notFound(err, "s3 get %s", key)
	}
	return out.Body, nil
}

// Size reads an object's length with HeadObject.
func (b *Blobs) Size(ctx context.Context, key string) (int64, error) {
	out, err := b.s3.HeadObject(ctx, &s3.HeadObjectInput{Bucket: &b.bucket, Key: aws.String(b.prefix + key)})
	if err != nil {
		return 0, b.notFound(err, "s3 head %s", key)
	}
	return aws.ToInt64(out.ContentLength), nil
}

// Delete removes an object; S3 answers a missing key with success too.
func (b *Blobs) Delete(ctx context.Context, key string) error {
	_, err := b.s3.DeleteObject(ctx, &s3.DeleteObjectInput{Bucket: &b.bucket, Key: aws.String(b.prefix + key)})
	if err != nil {
		return b.notFound(err, "s3 delete %s", key)
	}
	return nil
}

// PresignGet returns a URL that reads the object without credentials until
// ttl passes.
func (b *Blobs) PresignGet(ctx context.Context, key string, ttl time.Duration) (string, error) {
	req, err := b.presign.PresignGetObject(ctx, &s3.GetObjectInput{Bucket: &b.bucket, Key: aws.String(b.prefix + key)},
		s3.WithPresignExpires(ttl))
	if err != nil {
		return "", fmt.Errorf("s3 presign %s: %w", key, err)
	}
	return req.URL, nil
}

// notFound wraps err, as store.ErrNotFound when S3 says the key is missing.
func (b *Blobs) notFound(err error, format string, args ...any) error {
	var noKey *s3types.NoSuchKey
	var notFound *s3types.NotFound
	if errors.As(err, &noKey) || errors.As(err, &notFound) {
		return wrapAs(store.ErrNotFound, err, format, args...)
	}
	return wrap(err, format, args...)
}

// countingReader counts the bytes read through it.
type countingReader struct {
	r io.Reader
	n int64
}

func (c *countingReader) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	c.n += int64(n)
	return n, err
}

// S3URI is key's s3:// URI (a provider's batch job reads and writes there).
func (b *Blobs) S3URI(key string) (string, bool) {
	return "s3://" + b.bucket + "/" + b.prefix + key, true
}
