package callbacks

import (
	"encoding/json"
	"maps"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/sluice-gateway/sluice/pkg/api"
	"github.com/sluice-gateway/sluice/pkg/auth"
)

// serve mounts the handlers as the route table will, acting as p.
func (h *harness) serve(t *testing.T, p auth.Principal) *httptest.Server {
	t.Helper()
	hs := Handlers{Service: h.svc, JSONLimit: 1 << 20}
	mux := http.NewServeMux()
	for pattern, fn := range map[string]func(http.ResponseWriter, *http.Request) error{
		"POST /team/{team_id}/callback":                   hs.Add,
		"GET /team/{team_id}/callback":                    hs.Get,
		"DELETE /team/{team_id}/callback/{callback_name}": hs.Delete,
		"POST /team/{team_id}/disable_logging":            hs.DisableLogging,
		"GET /team/{team_id}/audit":                       hs.Audit,
	} {
		mux.HandleFunc(pattern, func(w http.ResponseWriter, r *http.Request) {
			r = r.WithContext(auth.WithPrincipal(r.Context(), p))
			if err := fn(w, r); err != nil {
				api.WriteError(w, r, err)
			}
		})
	}
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	return srv
}

func call(t *testing.T, method, url, body string, header map[string]string) (int, map[string]any) {
	t.Helper()
	req, err := http.NewRequest(method, url, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	for k, v := range header {
		req.Header.Set(k, v)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var out map[string]any
	if err := json.NewDecoder(resp.Body).Decode(&out); err != nil {
		t.Fatalf("%s %s: answer is not JSON: %v", method, url, err)
	}
	return resp.StatusCode, out
}

func TestHandlersLiteLLMShapes(t *testing.T) {
	h := newHarness(t)
	srv := h.serve(t, h.teamA)
	base := srv.URL + "/team/team-a"
	body := `{"callback_name":"langfuse","callback_type":"success","callback_vars":{"langfuse_public_key":"pk-1","langfuse_secret_key":"sk-lf-secret","langfuse_host":"https://cloud.langfuse.com"}}`
	status, out := call(t, http.MethodPost, base+"/callback", body, map[string]string{"litellm-changed-by": "migrated-user"})
	wantData := map[string]any{
		"team_id": "team-a", "success_callbacks": []any{"langfuse"}, "failure_callbacks": []any{},
		"callback_vars": map[string]any{"langfuse_public_key": "pk-1", "langfuse_secret_key": Masked, "langfuse_host": "https://cloud.langfuse.com"},
		"callbacks": []any{map[string]any{"callback_name": "langfuse", "callback_type": "success",
			"callback_vars": map[string]any{"langfuse_public_key": "pk-1", "langfuse_secret_key": Masked, "langfuse_host": "https://cloud.langfuse.com"}}},
	}
	if diff := cmp.Diff(map[string]any{"status": "success", "data": wantData}, out); status != http.StatusOK || diff != "" {
		t.Errorf("POST: %d (-want +got):\n%s", status, diff)
	}
	status, out = call(t, http.MethodGet, base+"/callback", "", nil)
	// GET adds each callback's delivery health: none yet.
	getData := maps.Clone(wantData)
	getData["callbacks"] = []any{map[string]any{"callback_name": "langfuse", "callback_type": "success",
		"callback_vars": map[string]any{"langfuse_public_key": "pk-1", "langfuse_secret_key": Masked, "langfuse_host": "https://cloud.langfuse.com"},
		"delivery":      map[string]any{"delivered": 0.0, "retrying": 0.0, "dead_lettered": 0.0, "last_error": "", "last_error_at": nil, "last_delivered_at": nil}}}
	if diff := cmp.Diff(map[string]any{"status": "success", "data": getData}, out); status != http.StatusOK || diff != "" {
		t.Errorf("GET: %d (-want +got):\n%s", status, diff)
	}
	h.clock.Add(time.Second)
	status, out = call(t, http.MethodPost, base+"/disable_logging", "", map[string]string{"sluice-changed-by": "ops", "litellm-changed-by": "ignored"})
	want := map[string]any{"status": "success", "message": "Logging disabled for team team-a", "data": map[string]any{
		"team_id": "team-a", "success_callbacks": []any{}, "failure_callbacks": []any{}, "callback_vars": map[string]any{}, "callbacks": []any{}}}
	if diff := cmp.Diff(want, out); status != http.StatusOK || diff != "" {
		t.Errorf("disable_logging: %d (-want +got):\n%s", status, diff)
	}
	status, out = call(t, http.MethodGet, base+"/audit?limit=10", "", nil)
	data, _ := out["data"].([]any)
	if status != http.StatusOK || out["object"] != "list" || len(data) != 2 {
		t.Fatalf("audit: %d %v", status, out)
	}
	var by []any
	for _, e := range data {
		by = append(by, e.(map[string]any)["changed_by"])
	}
	if diff := cmp.Diff([]any{"ops", "migrated-user"}, by); diff != "" {
		t.Errorf("changed_by, newest first (-want +got):\n%s", diff)
	}
}

func TestHandlersRefuseBadRequests(t *testing.T) {
	h := newHarness(t)
	srv := h.serve(t, h.teamA)
	for _, tc := range []struct {
		name, method, path, body string
		header                   map[string]string
		status                   int
		param                    any
	}{
		{"not JSON", http.MethodPost, "/team/team-a/callback", `{"callback_name":`, nil, 400, nil},
		{"vars not an object", http.MethodPost, "/team/team-a/callback", `{"callback_name":"langfuse","callback_type":"success","callback_vars":"x"}`, nil, 400, "callback_vars"},
		{"changed-by too long", http.MethodPost, "/team/team-a/disable_logging", "", map[string]string{"sluice-changed-by": strings.Repeat("x", 300)}, 400, "sluice-changed-by"},
		{"audit limit not a number", http.MethodGet, "/team/team-a/audit?limit=ten", "", nil, 400, "limit"},
		{"audit limit zero", http.MethodGet, "/team/team-a/audit?limit=0", "", nil, 400, "limit"},
		{"delete unknown name", http.MethodDelete, "/team/team-a/callback/datadog", "", nil, 400, "callback_name"},
		{"another team", http.MethodGet, "/team/team-b/callback", "", nil, 404, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			status, out := call(t, tc.method, srv.URL+tc.path, tc.body, tc.header)
			e, _ := out["error"].(map[string]any)
			if status != tc.status || e == nil || e["param"] != tc.param {
				t.Errorf("%d %v, want %d naming %v", status, out, tc.status, tc.param)
			}
		})
	}
}
