// Package gcsbucket delivers log events to a Google Cloud Storage bucket:
// one JSON object per event (the StandardLoggingPayload-compatible log
// event itself), uploaded through the JSON API
// (POST {endpoint}/upload/storage/v1/b/{bucket}/o?uploadType=media&name=...)
// with an OAuth2 access token minted from the team's service account.
//
// Objects are named {prefix}{YYYY-MM-DD}/{event id}, the date being the
// call's start (UTC), and uploaded with ifGenerationMatch=0: a redelivered
// event finds its object already there (412) and counts as delivered, so a
// bucket never holds an event twice.
package gcsbucket

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"time"

	"github.com/sluice-gateway/sluice/pkg/callbacks"
	"github.com/sluice-gateway/sluice/pkg/logevent"
)

// DefaultEndpoint is the Cloud Storage JSON API.
const DefaultEndpoint = "https://storage.googleapis.com"

// EmulatorHostVar points the client at an emulator ("host:port", over
// plain http), as it does Google's own client libraries.
const EmulatorHostVar = "STORAGE_EMULATOR_HOST"

// Endpoint returns the JSON API base: the emulator named by
// STORAGE_EMULATOR_HOST when set, else DefaultEndpoint.
func Endpoint(getenv func(string) string) string {
	h := strings.TrimSpace(getenv(EmulatorHostVar))
	switch {
	case h == "":
		return DefaultEndpoint
	case strings.Contains(h, "://"):
		return strings.TrimRight(h, "/")
	}
	return "http://" + h
}

// Tokens mints access tokens (google.TokenSource does).
type Tokens interface {
	AccessToken(ctx context.Context) (string, error)
}

// uploadConcurrency bounds the uploads of one Send in flight.
const uploadConcurrency = 8

// Client uploads to one bucket.
type Client struct {
	http     *http.Client
	endpoint string
	bucket   string
	prefix   string // "" or a path ending in "/"
	tokens   Tokens
}

// New returns a client for bucketName, which may carry an object prefix
// after the bucket ("team-logs/sluice/prod", as LiteLLM accepts it).
func New(httpClient *http.Client, endpoint, bucketName string, tokens Tokens) *Client {
	bucket, prefix, _ := strings.Cut(bucketName, "/")
	if prefix = strings.Trim(prefix, "/"); prefix != "" {
		prefix += "/"
	}
	return &Client{http: httpClient, endpoint: strings.TrimRight(endpoint, "/"), bucket: bucket, prefix: prefix, tokens: tokens}
}

// ObjectName is where an event is stored: {prefix}{YYYY-MM-DD}/{event id}.
func (c *Client) ObjectName(ev *logevent.Event) string {
	day := callbacks.EventTime(ev.StartTime)
	if day.IsZero() {
		day = time.Now().UTC()
	}
	return c.prefix + day.Format("2006-01-02") + "/" + ev.ID
}

// Send uploads each event as its own object, a few at a time, and returns
// one error per event (nil: the object is in the bucket).
func (c *Client) Send(ctx context.Context, events []*logevent.Event) []error {
	errs := make([]error, len(events))
	token, err := c.tokens.AccessToken(ctx)
	if err != nil {
		err = fmt.Errorf("GCS access token: %w", err)
		for i := range errs {
			errs[i] = err
		}
		return errs
	}
	sem := make(chan struct{}, uploadConcurrency)
	var wg sync.WaitGroup
	for i, ev := range events {
		sem <- struct{}{}
		wg.Go(func() {
			defer func() { <-sem }()
			errs[i] = c.upload(ctx, token, ev)
		})
	}
	wg.Wait()
	return errs
}

func (c *Client) upload(ctx context.Context, token string, ev *logevent.Event) error {
	body, err := json.Marshal(ev)
	if err != nil {
		return callbacks.Permanent(fmt.Errorf("encode log event %s: %w", ev.ID, err))
	}
	q := url.Values{"uploadType": {"media"}, "name": {c.ObjectName(ev)}, "ifGenerationMatch": {"0"}}
	u := c.endpoint + "/upload/storage/v1/b/" + url.PathEscape(c.bucket) + "/o?" + q.Encode()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, u, bytes.NewReader(body))
	if err != nil {
		return callbacks.Permanent(fmt.Errorf("GCS request: %w", err))
	}
	req.Header.Set("Authorization", "Bearer "+token)
	req.Header.Set("Content-Type", "application/json")
	resp, err := c.http.Do(req)
	if err != nil {
		return fmt.Errorf("GCS upload of %s: %w", ev.ID, err)
	}
	defer callbacks.Drain(resp)
	switch {
	case resp.StatusCode/100 == 2:
		return nil
	case resp.StatusCode == http.StatusPreconditionFailed:
		return nil // the object exists: an earlier delivery stored it
	}
	return callbacks.ResponseError("GCS", resp)
}
