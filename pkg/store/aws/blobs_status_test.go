package awsstore_test

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/sluice-gateway/sluice/pkg/store"
	awsstore "github.com/sluice-gateway/sluice/pkg/store/aws"
)

// s3Refusing is an S3 endpoint that answers every object read the way S3
// answers a key it does not have: 404 NoSuchKey to a caller that may list
// the bucket, 403 AccessDenied to one that may not (HEAD answers carry no
// body, as S3's do).
func s3Refusing(t *testing.T, status int) *awsstore.Blobs {
	t.Helper()
	code := map[int]string{http.StatusNotFound: "NoSuchKey", http.StatusForbidden: "AccessDenied"}[status]
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("x-amz-request-id", "0123456789ABCDEF")
		if r.Method == http.MethodHead {
			w.WriteHeader(status)
			return
		}
		w.Header().Set("Content-Type", "application/xml")
		w.WriteHeader(status)
		w.Write([]byte(`<?xml version="1.0" encoding="UTF-8"?>` + "\n" +
			`<Error><Code>` + code + `</Code><Message>` + http.StatusText(status) + `</Message><Key>files/file-abc</Key><RequestId>0123456789ABCDEF</RequestId><HostId>host</HostId></Error>`))
	}))
	t.Cleanup(srv.Close)
	client := s3.New(s3.Options{
		Region:           "us-east-1",
		BaseEndpoint:     aws.String(srv.URL),
		UsePathStyle:     true,
		Credentials:      credentials.NewStaticCredentialsProvider("AKIDEXAMPLE", "secret", ""),
		RetryMaxAttempts: 1,
	})
	return awsstore.NewBlobs(client, "bucket", "files/")
}

// TestBlobsMissingObjectStatus: S3's 404 for a missing object is
// store.ErrNotFound (a 404 to the client) on both reads; S3's 403 — the
// function may not list the bucket, or may not read the key — is not: it
// is a deployment fault, reported as one (a 500), never as a missing file.
func TestBlobsMissingObjectStatus(t *testing.T) {
	ctx := context.Background()
	for _, tc := range []struct {
		status   int
		notFound bool
	}{
		{http.StatusNotFound, true},
		{http.StatusForbidden, false},
	} {
		b := s3Refusing(t, tc.status)
		_, getErr := b.Get(ctx, "file-abc", 0, -1)
		_, sizeErr := b.Size(ctx, "file-abc")
		for op, err := range map[string]error{"Get": getErr, "Size": sizeErr} {
			switch {
			case err == nil:
				t.Errorf("%d: %s: no error", tc.status, op)
			case errors.Is(err, store.ErrNotFound) != tc.notFound:
				t.Errorf("%d: %s: errors.Is(ErrNotFound) = %v, want %v: %v", tc.status, op, !tc.notFound, tc.notFound, err)
			case errors.Is(err, store.ErrUnavailable):
				t.Errorf("%d: %s: reported as the store being unavailable: %v", tc.status, op, err)
			case tc.status == http.StatusForbidden && !strings.Contains(err.Error(), "403"):
				t.Errorf("%d: %s: the error does not say S3 refused access: %v", tc.status, op, err)
			}
		}
	}
}
