package server_test

import (
	"encoding/json"
	"net/http"
	"testing"

	"github.com/sluice-gateway/sluice/pkg/api"
	"github.com/sluice-gateway/sluice/pkg/gateway/gatewaytest"
)

// TestBarePrefixesAnswerJSON: a passthrough prefix without a path after it
// is an unknown route in the OpenAI error shape, never a redirect with an
// HTML body.
func TestBarePrefixesAnswerJSON(t *testing.T) {
	gatewaytest.Run(t, gatewaytest.Options{}, func(t *testing.T, g *gatewaytest.Gateway) {
		_, key := g.TeamKey()
		client := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
		for _, prefix := range []string{"/anthropic", "/gemini", "/vertex-ai", "/vertex_ai", "/bedrock"} {
			for _, method := range []string{"GET", "POST", "PUT", "DELETE", "PATCH"} {
				req, _ := http.NewRequest(method, g.URL+prefix, nil)
				req.Header.Set("Authorization", "Bearer "+key)
				resp, err := client.Do(req)
				if err != nil {
					t.Fatal(err)
				}
				var b api.Body
				err = json.NewDecoder(resp.Body).Decode(&b)
				resp.Body.Close()
				if resp.StatusCode != http.StatusNotFound || resp.Header.Get("Content-Type") != "application/json" ||
					resp.Header.Get("Location") != "" || err != nil || b.Error.Code == nil || *b.Error.Code != "not_found" {
					t.Errorf("%s %s: %d %s Location=%q, %+v %v", method, prefix, resp.StatusCode,
						resp.Header.Get("Content-Type"), resp.Header.Get("Location"), b, err)
				}
			}
		}
	})
}
