package callbacks

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/sluice-gateway/sluice/pkg/store"
)

func TestAddRefusesBadSettings(t *testing.T) {
	h := newHarness(t)
	lf := func(kv ...string) AddCallback {
		return AddCallback{CallbackName: Langfuse, CallbackType: TypeSuccess, CallbackVars: vars(kv...)}
	}
	withRaw := func(in AddCallback, k, raw string) AddCallback {
		in.CallbackVars[k] = json.RawMessage(raw)
		return in
	}
	good := []string{VarLangfusePublicKey, "pk", VarLangfuseSecretKey, "sk"}
	host := func(h string) AddCallback { return lf(append(good, VarLangfuseHost, h)...) }
	for _, tc := range []struct {
		name  string
		in    AddCallback
		param string
	}{
		{"no name", AddCallback{CallbackType: TypeSuccess, CallbackVars: vars()}, "callback_name"},
		{"unknown name", AddCallback{CallbackName: "datadog", CallbackType: TypeSuccess, CallbackVars: vars()}, "callback_name"},
		{"no type", AddCallback{CallbackName: Langfuse, CallbackVars: vars(good...)}, "callback_type"},
		{"unknown type", AddCallback{CallbackName: Langfuse, CallbackType: "always", CallbackVars: vars(good...)}, "callback_type"},
		{"no vars", AddCallback{CallbackName: Langfuse, CallbackType: TypeSuccess}, "callback_vars"},
		{"unknown var", lf(append(good, "langfuse_region", "eu")...), "callback_vars.langfuse_region"},
		{"another family's var", lf(append(good, VarLangSmithAPIKey, "ls")...), "callback_vars." + VarLangSmithAPIKey},
		{"langfuse without secret", lf(VarLangfusePublicKey, "pk"), "callback_vars." + VarLangfuseSecretKey},
		{"langfuse without public key", lf(VarLangfuseSecret, "sk"), "callback_vars." + VarLangfusePublicKey},
		{"langsmith without key", AddCallback{CallbackName: LangSmith, CallbackType: TypeFailure, CallbackVars: vars(VarLangSmithProject, "p")}, "callback_vars." + VarLangSmithAPIKey},
		{"gcs without account", AddCallback{CallbackName: GCSBucket, CallbackType: TypeSuccess, CallbackVars: vars(VarGCSBucketName, "logs")}, "callback_vars." + VarGCSServiceAccount},
		{"gcs without bucket", AddCallback{CallbackName: GCSBucket, CallbackType: TypeSuccess, CallbackVars: vars(VarGCSServiceAccount, "{}")}, "callback_vars." + VarGCSBucketName},
		{"bad bucket", AddCallback{CallbackName: GCSBucket, CallbackType: TypeSuccess, CallbackVars: vars(VarGCSBucketName, "Bad_Bucket", VarGCSServiceAccount, "{}")}, "callback_vars." + VarGCSBucketName},
		{"bad bucket prefix", AddCallback{CallbackName: GCSBucket, CallbackType: TypeSuccess, CallbackVars: vars(VarGCSBucketName, "logs/../x", VarGCSServiceAccount, "{}")}, "callback_vars." + VarGCSBucketName},
		{"aliases differ", lf(append(good, VarLangfuseSecret, "other")...), "callback_vars." + VarLangfuseSecret},
		{"empty value", lf(VarLangfusePublicKey, " ", VarLangfuseSecretKey, "sk"), "callback_vars." + VarLangfusePublicKey},
		{"array value", withRaw(lf(good...), VarLangfuseHost, `["https://a"]`), "callback_vars." + VarLangfuseHost},
		{"object value", withRaw(lf(good...), VarLangfusePublicKey, `{"k":1}`), "callback_vars." + VarLangfusePublicKey},
		{"control character", lf(VarLangfusePublicKey, "pk\x00", VarLangfuseSecretKey, "sk"), "callback_vars." + VarLangfusePublicKey},
		{"too long", lf(VarLangfusePublicKey, string(bytes.Repeat([]byte("p"), maxVarBytes+1)), VarLangfuseSecretKey, "sk"), "callback_vars." + VarLangfusePublicKey},
		{"turn off not a bool", lf(append(good, VarTurnOffMessageLogging, "maybe")...), "callback_vars." + VarTurnOffMessageLogging},
		{"host plain http", host("http://public.example"), "callback_vars." + VarLangfuseHost},
		{"host other scheme", host("ftp://public.example"), "callback_vars." + VarLangfuseHost},
		{"host relative", host("cloud.langfuse.com"), "callback_vars." + VarLangfuseHost},
		{"host with user", host("https://u:p@public.example"), "callback_vars." + VarLangfuseHost},
		{"host with query", host("https://public.example/?x=1"), "callback_vars." + VarLangfuseHost},
		{"host metadata IP", host("https://169.254.169.254"), "callback_vars." + VarLangfuseHost},
		{"host metadata name", host("https://metadata.internal"), "callback_vars." + VarLangfuseHost},
		{"host resolving to private", host("https://intranet.example"), "callback_vars." + VarLangfuseHost},
		{"host private", host("https://10.0.0.1"), "callback_vars." + VarLangfuseHost},
		{"host loopback not allow-listed", host("https://127.0.0.2:8443"), "callback_vars." + VarLangfuseHost},
		{"host IPv6 loopback", host("https://[::1]:8443"), "callback_vars." + VarLangfuseHost},
		{"host IPv4-mapped loopback", host("https://[::ffff:127.0.0.2]"), "callback_vars." + VarLangfuseHost},
		{"host unspecified", host("https://0.0.0.0"), "callback_vars." + VarLangfuseHost},
		{"langsmith base private", AddCallback{CallbackName: LangSmith, CallbackType: TypeSuccess, CallbackVars: vars(VarLangSmithAPIKey, "k", VarLangSmithBaseURL, "https://192.168.1.1")}, "callback_vars." + VarLangSmithBaseURL},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := h.svc.Add(context.Background(), h.admin, "team-a", tc.in, "")
			if status, param := apiErr(err); status != http.StatusBadRequest || param != tc.param {
				t.Errorf("err = %v (status %d, param %q), want 400 naming %q", err, status, param, tc.param)
			}
		})
	}
	if got, err := h.svc.Get(context.Background(), h.admin, "team-a"); err != nil || len(got.Callbacks) != 0 {
		t.Errorf("after refusals: callbacks %+v, %v; want none stored", got, err)
	}
}

func TestAddAcceptsValueForms(t *testing.T) {
	h := newHarness(t)
	in := langfuseCallback(TypeSuccess)
	in.CallbackVars[VarTurnOffMessageLogging] = json.RawMessage(`true`)
	in.CallbackVars[VarLangfuseHost] = json.RawMessage(`"http://127.0.0.1:3000/"`) // allow-listed: http is fine
	got, err := h.svc.Add(context.Background(), h.admin, "team-a", in, "")
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]string{VarLangfusePublicKey: "pk-lf-public", VarLangfuseSecretKey: Masked,
		VarLangfuseHost: "http://127.0.0.1:3000", VarTurnOffMessageLogging: "true"}
	if diff := cmp.Diff(want, got.Callbacks[0].Vars); diff != "" {
		t.Errorf("stored vars (-want +got):\n%s", diff)
	}
}

func TestAddDuplicateNameAndType(t *testing.T) {
	h := newHarness(t)
	ctx := context.Background()
	if _, err := h.svc.Add(ctx, h.teamA, "team-a", langfuseCallback(TypeSuccess), ""); err != nil {
		t.Fatal(err)
	}
	_, err := h.svc.Add(ctx, h.teamA, "team-a", langfuseCallback(TypeSuccess), "")
	if status, _ := apiErr(err); status != http.StatusBadRequest {
		t.Fatalf("duplicate: err = %v, want 400", err)
	}
	// Another type of the same destination is another callback.
	got, err := h.svc.Add(ctx, h.teamA, "team-a", langfuseCallback(TypeFailure), "")
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]string{Langfuse}, got.FailureCallbacks); diff != "" || len(got.Callbacks) != 2 {
		t.Errorf("after a second type: %+v", got)
	}
}

func TestTeamAccess(t *testing.T) {
	h := newHarness(t)
	ctx := context.Background()
	if _, err := h.svc.Add(ctx, h.teamA, "team-a", langfuseCallback(TypeSuccess), ""); err != nil {
		t.Fatalf("a team key on its own team: %v", err)
	}
	for name, call := range map[string]func() error{
		"add": func() error {
			_, err := h.svc.Add(ctx, h.teamB, "team-a", langfuseCallback(TypeFailure), "")
			return err
		},
		"get":     func() error { _, err := h.svc.Get(ctx, h.teamB, "team-a"); return err },
		"delete":  func() error { _, err := h.svc.Delete(ctx, h.teamB, "team-a", Langfuse, ""); return err },
		"disable": func() error { _, err := h.svc.DisableLogging(ctx, h.teamB, "team-a", ""); return err },
		"audit":   func() error { _, err := h.svc.Audit(ctx, h.teamB, "team-a", 0, ""); return err },
		"unknown team (admin)": func() error {
			_, err := h.svc.Add(ctx, h.admin, "team-zz", langfuseCallback(TypeSuccess), "")
			return err
		},
	} {
		if status, _ := apiErr(call()); status != http.StatusNotFound {
			t.Errorf("%s: status %d, want 404", name, status)
		}
	}
	if got, err := h.svc.Get(ctx, h.admin, "team-a"); err != nil || len(got.Callbacks) != 1 {
		t.Errorf("admin reads team-a: %+v, %v", got, err)
	}
}

func TestSecretsSealedAndMasked(t *testing.T) {
	h := newHarness(t)
	ctx := context.Background()
	ls := AddCallback{CallbackName: LangSmith, CallbackType: TypeSuccessAndFailure, CallbackVars: vars(
		VarLangSmithAPIKey, "lsv2_pt_secret_api_key", VarLangSmithProject, "proj")}
	added, err := h.svc.Add(ctx, h.admin, "team-a", ls, "")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := h.svc.Add(ctx, h.admin, "team-a", langfuseCallback(TypeSuccess), ""); err != nil {
		t.Fatal(err)
	}
	got, err := h.svc.Get(ctx, h.teamA, "team-a")
	if err != nil {
		t.Fatal(err)
	}
	want := &TeamCallbacks{
		TeamID:           "team-a",
		SuccessCallbacks: []string{Langfuse, LangSmith},
		FailureCallbacks: []string{LangSmith},
		CallbackVars: map[string]string{VarLangfusePublicKey: "pk-lf-public", VarLangfuseSecretKey: Masked,
			VarLangfuseHost: "https://cloud.langfuse.com", VarLangSmithAPIKey: Masked, VarLangSmithProject: "proj"},
		Callbacks: []View{
			{Name: Langfuse, Type: TypeSuccess, Vars: map[string]string{VarLangfusePublicKey: "pk-lf-public", VarLangfuseSecretKey: Masked, VarLangfuseHost: "https://cloud.langfuse.com"},
				Delivery: &Delivery{}},
			{Name: LangSmith, Type: TypeSuccessAndFailure, Vars: map[string]string{VarLangSmithAPIKey: Masked, VarLangSmithProject: "proj"},
				Delivery: &Delivery{}},
		},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("GET (-want +got):\n%s", diff)
	}
	for name, v := range map[string]any{"POST answer": added, "GET answer": got} {
		b, _ := json.Marshal(v)
		if bytes.Contains(b, []byte("secret_api_key")) || bytes.Contains(b, []byte("very-secret")) {
			t.Errorf("%s shows a secret: %s", name, b)
		}
	}
	// At rest, the secrets are sealed.
	page, err := h.records.Query(ctx, store.Query{PK: "TEAM#team-a", SKPrefix: "CALLBACK#", Limit: 10})
	if err != nil {
		t.Fatal(err)
	}
	for _, rec := range page.Records {
		if bytes.Contains(rec.Body, []byte("secret_api_key")) || bytes.Contains(rec.Body, []byte("very-secret")) {
			t.Errorf("record %s holds a secret in clear: %s", rec.Key.SK, rec.Body)
		}
	}
	// The delivery side opens them.
	cbs, err := h.catalog.For(ctx, "team-a")
	if err != nil {
		t.Fatal(err)
	}
	opened, err := h.catalog.Open(ctx, cbs[1])
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(map[string]string{VarLangSmithAPIKey: "lsv2_pt_secret_api_key", VarLangSmithProject: "proj"}, opened); diff != "" {
		t.Errorf("opened vars (-want +got):\n%s", diff)
	}
}

func TestSealedSecretsAreBoundToTeamAndCallback(t *testing.T) {
	h := newHarness(t)
	ctx := context.Background()
	if _, err := h.svc.Add(ctx, h.admin, "team-a", langfuseCallback(TypeSuccess), ""); err != nil {
		t.Fatal(err)
	}
	cbs, err := h.catalog.For(ctx, "team-a")
	if err != nil {
		t.Fatal(err)
	}
	for name, moved := range map[string]Callback{
		"another team":     {TeamID: "team-b", Name: Langfuse, Type: TypeSuccess, Sealed: cbs[0].Sealed},
		"another callback": {TeamID: "team-a", Name: Langfuse, Type: TypeFailure, Sealed: cbs[0].Sealed},
	} {
		if _, err := h.catalog.Open(ctx, moved); err == nil {
			t.Errorf("%s: sealed secrets opened", name)
		}
	}
}

func TestDelete(t *testing.T) {
	h := newHarness(t)
	ctx := context.Background()
	for _, in := range []AddCallback{langfuseCallback(TypeSuccess), langfuseCallback(TypeFailure),
		{CallbackName: LangSmith, CallbackType: TypeSuccess, CallbackVars: vars(VarLangSmithAPIKey, "k")}} {
		if _, err := h.svc.Add(ctx, h.teamA, "team-a", in, ""); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := h.svc.Delete(ctx, h.teamA, "team-a", "datadog", ""); func() int { s, _ := apiErr(err); return s }() != http.StatusBadRequest {
		t.Errorf("unknown name: %v, want 400", err)
	}
	if _, err := h.svc.Delete(ctx, h.teamA, "team-a", GCSBucket, ""); func() int { s, _ := apiErr(err); return s }() != http.StatusNotFound {
		t.Errorf("name not configured: %v, want 404", err)
	}
	got, err := h.svc.Delete(ctx, h.teamA, "team-a", Langfuse, "")
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]string{LangSmith}, got.SuccessCallbacks); diff != "" || len(got.Callbacks) != 1 || len(got.FailureCallbacks) != 0 {
		t.Errorf("after delete: %+v", got)
	}
	stored, err := h.svc.Get(ctx, h.teamA, "team-a")
	for i := range got.Callbacks {
		got.Callbacks[i].Delivery = &Delivery{} // GET adds the health; no delivery yet
	}
	if err != nil || cmp.Diff(got, stored) != "" {
		t.Errorf("GET after delete = %+v, %v; want %+v", stored, err, got)
	}
}

func TestDisableLogging(t *testing.T) {
	h := newHarness(t)
	ctx := context.Background()
	for _, typ := range []string{TypeSuccess, TypeFailure} {
		if _, err := h.svc.Add(ctx, h.teamA, "team-a", langfuseCallback(typ), ""); err != nil {
			t.Fatal(err)
		}
	}
	got, err := h.svc.DisableLogging(ctx, h.teamA, "team-a", "")
	if err != nil {
		t.Fatal(err)
	}
	want := &TeamCallbacks{TeamID: "team-a", SuccessCallbacks: []string{}, FailureCallbacks: []string{},
		CallbackVars: map[string]string{}, Callbacks: []View{}}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("answer (-want +got):\n%s", diff)
	}
	if listening, err := h.catalog.Listening(ctx, "team-a", TypeSuccess); err != nil || listening {
		t.Errorf("Listening after disable = %v, %v", listening, err)
	}
	// Disabling a team that logs nowhere is fine (and audited).
	if _, err := h.svc.DisableLogging(ctx, h.teamA, "team-a", ""); err != nil {
		t.Errorf("second disable: %v", err)
	}
}
