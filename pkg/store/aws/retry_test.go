package awsstore_test

import (
	"context"
	"errors"
	"io"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/google/go-cmp/cmp"

	"github.com/sluice-gateway/sluice/pkg/store"
	awsstore "github.com/sluice-gateway/sluice/pkg/store/aws"
	"github.com/sluice-gateway/sluice/pkg/store/aws/awstest"
)

// lostAnswers passes requests on, but for the first `lose` PutItem calls it
// drops the service's answer after the write was applied and reports a 500
// instead, as a connection reset or a gateway error would: the SDK retries.
type lostAnswers struct {
	next aws.HTTPClient
	lose atomic.Int32
	sent atomic.Int32 // PutItem requests that reached the service
}

func (l *lostAnswers) Do(r *http.Request) (*http.Response, error) {
	if r.Header.Get("X-Amz-Target") != "DynamoDB_20120810.PutItem" {
		return l.next.Do(r)
	}
	resp, err := l.next.Do(r)
	l.sent.Add(1)
	if err != nil || l.lose.Add(-1) < 0 {
		return resp, err
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	_ = resp.Body.Close()
	body := `{"__type":"com.amazonaws.dynamodb.v20120810#InternalServerError","message":"answer lost"}`
	return &http.Response{
		StatusCode: http.StatusInternalServerError, Status: "500 Internal Server Error", Proto: "HTTP/1.1", ProtoMajor: 1, ProtoMinor: 1,
		Header:  http.Header{"Content-Type": {"application/x-amz-json-1.0"}},
		Body:    io.NopCloser(strings.NewReader(body)),
		Request: r, ContentLength: int64(len(body)),
	}, nil
}

// A create-if-absent whose first attempt was applied but whose answer was
// lost succeeds on the SDK's retry instead of failing its own condition
// (which turned a freshly created team into a 409).
func TestCreateSurvivesLostAnswer(t *testing.T) {
	cfg := awstest.Config(t)
	lossy := &lostAnswers{next: cfg.HTTPClient}
	lossy.lose.Store(1)
	cfg.HTTPClient = lossy
	recs := awsstore.NewRecords(dynamodb.NewFromConfig(cfg), newTable(t, cfg))
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()

	rec := store.Record{Key: store.Key{PK: "TEAM#t1", SK: "TEAM"}, Body: []byte(`{"team_id":"t1","created_at":"2026-11-27T06:00:00.123Z"}`)}
	if err := recs.Put(ctx, rec, store.Cond{Absent: true}); err != nil {
		t.Fatalf("create with a lost first answer: %v", err)
	}
	if got := lossy.sent.Load(); got != 2 {
		t.Fatalf("PutItem reached the service %d times, want 2 (the lost answer, then the SDK's retry)", got)
	}
	got, err := recs.Get(ctx, rec.Key)
	if err != nil {
		t.Fatal(err)
	}
	rec.Version = 1
	if diff := cmp.Diff(rec, got); diff != "" {
		t.Errorf("stored record (-want +got):\n%s", diff)
	}
	// A second writer of a different record under the same key still conflicts.
	other := rec
	other.Body = []byte(`{"team_id":"t1","created_at":"2026-11-27T06:00:01.456Z"}`)
	if err := recs.Put(ctx, other, store.Cond{Absent: true}); !errors.Is(err, store.ErrConditionFailed) {
		t.Fatalf("create over another writer's record: %v, want ErrConditionFailed", err)
	}
}
