package callbacks

import (
	"context"
	"errors"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/sluice-gateway/sluice/pkg/config"
	"github.com/sluice-gateway/sluice/pkg/store"
)

func parseConfig(t *testing.T, doc string) *config.Config {
	t.Helper()
	cfg, err := config.Parse([]byte(doc), func(string) string { return "" })
	if err != nil {
		t.Fatal(err)
	}
	return cfg
}

func env(kv ...string) func(string) string {
	m := map[string]string{}
	for i := 0; i+1 < len(kv); i += 2 {
		m[kv[i]] = kv[i+1]
	}
	return func(k string) string { return m[k] }
}

func TestGatewayCallbacksTakeLiteLLMsVariables(t *testing.T) {
	cfg := parseConfig(t, `
litellm_settings:
  success_callback: ["langfuse", "prometheus"]
  failure_callback: gcs_bucket
  callbacks: [langsmith]
environment_variables:
  LANGSMITH_API_KEY: secretsmanager/sluice/providers#langsmith
  LANGSMITH_PROJECT: gateway
`)
	got, err := GatewayCallbacks(cfg, env(
		"LANGFUSE_PUBLIC_KEY", "pk-lf", "LANGFUSE_SECRET_KEY", "sk-lf", "LANGFUSE_HOST", "https://lf.example",
		"GCS_BUCKET_NAME", "logs/sluice", "GCS_PATH_SERVICE_ACCOUNT", "/etc/sa.json",
		"LANGSMITH_API_KEY", "overridden by environment_variables"))
	if err != nil {
		t.Fatal(err)
	}
	want := []Callback{
		{Name: Langfuse, Type: TypeSuccess, Gateway: true, Vars: map[string]string{
			VarLangfusePublicKey: "pk-lf", VarLangfuseSecretKey: "sk-lf", VarLangfuseHost: "https://lf.example"}},
		{Name: GCSBucket, Type: TypeFailure, Gateway: true, Vars: map[string]string{
			VarGCSBucketName: "logs/sluice", VarGCSServiceAccount: "/etc/sa.json"}},
		{Name: LangSmith, Type: TypeSuccessAndFailure, Gateway: true, Vars: map[string]string{
			VarLangSmithAPIKey: "secretsmanager/sluice/providers#langsmith", VarLangSmithProject: "gateway"}},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
	if got[0].ID() != "gateway:langfuse#success" {
		t.Errorf("ID = %q", got[0].ID())
	}
}

func TestGatewayCallbacksWithoutCredentialsAreRefused(t *testing.T) {
	cfg := parseConfig(t, "litellm_settings:\n  success_callback: [langfuse]\n  failure_callback: [gcs_bucket]\n")
	_, err := GatewayCallbacks(cfg, env("LANGFUSE_PUBLIC_KEY", "pk"))
	if err == nil {
		t.Fatal("no error")
	}
	for _, want := range []string{"litellm_settings.success_callback names langfuse, but LANGFUSE_SECRET_KEY is not set",
		"litellm_settings.failure_callback names gcs_bucket, but GCS_BUCKET_NAME and GCS_PATH_SERVICE_ACCOUNT is not set"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not say %q", err, want)
		}
	}
}

// countingRecords counts the queries that reach the table.
type countingRecords struct {
	store.Records
	queries atomic.Int32
	fail    error
}

func (c *countingRecords) Query(ctx context.Context, q store.Query) (store.Page, error) {
	c.queries.Add(1)
	if c.fail != nil {
		return store.Page{}, c.fail
	}
	return c.Records.Query(ctx, q)
}

func TestGatewayCallbacksListenForEveryTeamWithoutReadingIt(t *testing.T) {
	h := newHarness(t)
	r := &countingRecords{Records: h.records}
	gw := []Callback{{Name: Langfuse, Type: TypeFailure, Gateway: true, Vars: map[string]string{}}}
	c := NewCatalog(r, h.sealer, CatalogOptions{TTL: time.Minute, Gateway: gw})
	ctx := context.Background()
	if ok, err := c.Listening(ctx, "any", "failure"); err != nil || !ok {
		t.Errorf("failure: %v %v", ok, err)
	}
	if r.queries.Load() != 0 {
		t.Errorf("%d queries: a gateway callback answers without the team's records", r.queries.Load())
	}
	if ok, _ := c.Listening(ctx, "any", "success"); ok {
		t.Error("a gateway-wide failure callback listens to successes")
	}
	if _, err := h.svc.Add(ctx, h.admin, "team-a", langfuseCallback(TypeSuccess), ""); err != nil {
		t.Fatal(err)
	}
	cbs, err := c.For(ctx, "team-a")
	if err != nil {
		t.Fatal(err)
	}
	var ids []string
	for _, cb := range cbs {
		ids = append(ids, cb.ID())
	}
	if diff := cmp.Diff([]string{"gateway:langfuse#failure", "langfuse#success"}, ids); diff != "" {
		t.Errorf("For (-want +got):\n%s", diff)
	}
	if cbs, _ := c.For(ctx, ""); len(cbs) != 1 || !cbs[0].Gateway {
		t.Errorf("an event without a team goes to %+v", cbs)
	}
}

func TestCatalogReadFailuresAreNotCached(t *testing.T) {
	h := newHarness(t)
	r := &countingRecords{Records: h.records, fail: store.ErrUnavailable}
	c := NewCatalog(r, h.sealer, CatalogOptions{TTL: time.Minute})
	if _, err := c.Listening(context.Background(), "team-a", "success"); !errors.Is(err, store.ErrUnavailable) {
		t.Errorf("%v", err)
	}
	r.fail = nil
	if _, err := c.Listening(context.Background(), "team-a", "success"); err != nil || r.queries.Load() != 2 {
		t.Errorf("a failure was cached: %v, %d queries", err, r.queries.Load())
	}
}

func TestOpenResolvesAGatewayCallbacksReferences(t *testing.T) {
	h := newHarness(t)
	resolve := func(_ context.Context, v string) (string, error) {
		if ref, ok := strings.CutPrefix(v, "secretsmanager/"); ok {
			return "resolved:" + ref, nil
		}
		return v, nil
	}
	c := NewCatalog(h.records, h.sealer, CatalogOptions{Resolve: resolve})
	cb := Callback{Name: LangSmith, Type: TypeSuccess, Gateway: true, Vars: map[string]string{
		VarLangSmithAPIKey: "secretsmanager/p#ls", VarLangSmithProject: "p"}}
	got, err := c.Open(context.Background(), cb)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(map[string]string{VarLangSmithAPIKey: "resolved:p#ls", VarLangSmithProject: "p"}, got); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
	if cb.Vars[VarLangSmithAPIKey] != "secretsmanager/p#ls" {
		t.Error("Open changed the callback's vars")
	}
}
