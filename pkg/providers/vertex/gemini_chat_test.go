package vertex

import (
	"context"
	"errors"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/sluice-gateway/sluice/pkg/api"
	"github.com/sluice-gateway/sluice/pkg/config"
	"github.com/sluice-gateway/sluice/pkg/models"
	"github.com/sluice-gateway/sluice/pkg/oai"
	"github.com/sluice-gateway/sluice/pkg/providers"
	"github.com/sluice-gateway/sluice/pkg/providers/embedbatch/embedtest"
	"github.com/sluice-gateway/sluice/pkg/providers/gemini/geminitest"
	"github.com/sluice-gateway/sluice/pkg/providers/google/googletest"
	"github.com/sluice-gateway/sluice/pkg/providers/providertest"
)

// geminiUpstream is a fake Vertex AI serving Gemini models, taking only
// tokens ts minted.
func geminiUpstream(t *testing.T, ts *googletest.TokenServer) *providertest.Upstream {
	return providertest.NewUpstream(t, geminitest.Handler(func(r *http.Request) bool {
		token, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
		return ok && ts.Valid(token)
	}))
}

func openChat(t *testing.T, ts *googletest.TokenServer, base, model string) models.Chatter {
	t.Helper()
	p := config.Params{Model: "vertex_ai/" + model, APIBase: base, VertexProject: "acme-prod", VertexLocation: "europe-west4",
		VertexCredentials: ts.ServiceAccountJSON("sa-project")}
	ep, err := New(providers.NewHTTPClient()).Open(context.Background(), config.Deployment{ModelName: "g", Params: p}, embedtest.NoSecrets)
	if err != nil {
		t.Fatal(err)
	}
	return ep.(models.Chatter)
}

func chat(t *testing.T, c models.Chatter, body string) (*models.Answer, error) {
	t.Helper()
	req, err := oai.ParseChatRequest([]byte(body))
	if err != nil {
		t.Fatal(err)
	}
	return c.Chat(context.Background(), req)
}

func TestGeminiChat(t *testing.T) {
	ts := googletest.NewTokenServer(t)
	up := geminiUpstream(t, ts)
	c := openChat(t, ts, up.URL, "gemini-2.5-flash")
	ans, err := chat(t, c, `{"model":"g","messages":[{"role":"user","content":[{"type":"text","text":"What is in it?"},
		{"type":"image_url","image_url":{"url":"gs://acme-media/cat.jpeg"}},{"type":"file","file":{"file_id":"gs://acme-media/report.pdf"}}]}]}`)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(ans.Body)
	ans.Body.Close()
	if !strings.Contains(string(body), `"content":"`+geminitest.Hello+`"`) {
		t.Errorf("answer %s", body)
	}
	got := up.Last(t)
	providertest.AssertRequest(t, got, providertest.Want{
		Method: "POST", Path: "/v1beta1/projects/acme-prod/locations/europe-west4/publishers/google/models/gemini-2.5-flash:generateContent",
		Header: map[string]string{"X-Goog-Api-Key": ""},
		Body: `{"contents":[{"role":"user","parts":[{"text":"What is in it?"},
			{"fileData":{"mimeType":"image/jpeg","fileUri":"gs://acme-media/cat.jpeg"}},
			{"fileData":{"mimeType":"application/pdf","fileUri":"gs://acme-media/report.pdf"}}]}]}`,
	})
	if token, _ := strings.CutPrefix(got.Header.Get("Authorization"), "Bearer "); !ts.Valid(token) {
		t.Errorf("Authorization %q is not a token the service account got", got.Header.Get("Authorization"))
	}

	ans, err = chat(t, c, `{"model":"g","messages":[{"role":"user","content":"Hi"}],"stream":true}`)
	if err != nil {
		t.Fatal(err)
	}
	reads, err := providertest.Reads(ans.Body)
	ans.Body.Close()
	if err != nil || len(reads) != 3 || !strings.HasSuffix(reads[2], "data: [DONE]\n\n") {
		t.Errorf("stream %q, %v", reads, err)
	}
	providertest.AssertRequest(t, up.Last(t), providertest.Want{
		Path: "/v1beta1/projects/acme-prod/locations/europe-west4/publishers/google/models/gemini-2.5-flash:streamGenerateContent", Query: "alt=sse",
	})
	if ts.Issued() != 1 {
		t.Errorf("%d tokens minted for two calls, want 1 (cached)", ts.Issued())
	}
}

func TestGeminiChatURL(t *testing.T) {
	ts := googletest.NewTokenServer(t)
	creds := ts.ServiceAccountJSON("sa-project")
	for _, tc := range []struct{ location, model, want string }{
		{"us-central1", "gemini-2.5-pro", "https://us-central1-aiplatform.googleapis.com/v1beta1/projects/sa-project/locations/us-central1/publishers/google/models/gemini-2.5-pro"},
		{"global", "gemini-3-pro-preview", "https://aiplatform.googleapis.com/v1beta1/projects/sa-project/locations/global/publishers/google/models/gemini-3-pro-preview"},
		{"eu", "gemini-2.5-flash", "https://aiplatform.eu.rep.googleapis.com/v1beta1/projects/sa-project/locations/eu/publishers/google/models/gemini-2.5-flash"},
		{"us-east5", "4965075652664360960", "https://us-east5-aiplatform.googleapis.com/v1beta1/projects/sa-project/locations/us-east5/endpoints/4965075652664360960"},
	} {
		p := config.Params{Model: "vertex_ai/" + tc.model, VertexCredentials: creds, VertexLocation: tc.location}
		ep, err := New(providers.NewHTTPClient()).Open(context.Background(), config.Deployment{ModelName: "g", Params: p}, embedtest.NoSecrets)
		if err != nil {
			t.Fatal(err)
		}
		if got := ep.(*endpoint).geminiURL(); got != tc.want {
			t.Errorf("%s %s: %s, want %s", tc.location, tc.model, got, tc.want)
		}
	}
}

func TestGeminiChatFailures(t *testing.T) {
	ts := googletest.NewTokenServer(t)
	up := geminiUpstream(t, ts)
	hello := `{"model":"g","messages":[{"role":"user","content":"Hi"}]}`

	// The Gemini API reads no gs:// URIs; Vertex AI needs a file's type.
	var ae *api.Error
	_, err := chat(t, openChat(t, ts, up.URL, "gemini-2.5-flash"), `{"model":"g","messages":[{"role":"user","content":[{"type":"image_url","image_url":{"url":"gs://b/picture"}}]}]}`)
	if !errors.As(err, &ae) || ae.Status != 400 || ae.Param != "messages[0].content[0].image_url.url" {
		t.Errorf("a file of no known type: %v, want a 400 naming it", err)
	}

	_, err = chat(t, openChat(t, ts, up.URL, "gemini-2.5-flash"), `{"model":"g","messages":[{"role":"user","content":"`+geminitest.Invalid+`"}]}`)
	var pe *models.ProviderError
	if !errors.As(err, &pe) || pe.Provider != Name || pe.Status != 400 || pe.Code != "INVALID_ARGUMENT" || pe.Message != "Request contains an invalid argument." {
		t.Errorf("refused by Google: %v", err)
	}

	ts.SetUnavailable(true)
	_, err = chat(t, openChat(t, ts, up.URL, "gemini-2.5-flash"), hello)
	if !errors.As(err, &ae) || ae.Status != 502 || !strings.Contains(ae.Message, "access token") {
		t.Errorf("no token: %v, want a 502 saying so", err)
	}
	if n := up.Count(); n != 1 {
		t.Errorf("%d calls reached Vertex AI, want 1", n)
	}
}
