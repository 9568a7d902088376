package anthropic

import (
	"context"
	"net/http"
	"testing"

	"github.com/sluice-gateway/sluice/pkg/models"
)

func TestKeyTravelsAsXAPIKey(t *testing.T) {
	c, err := models.Resolver{}.Key(context.Background(), Key, "sk-ant", "")
	if err != nil || c.APIBase != DefaultAPIBase {
		t.Fatalf("%+v, %v", c, err)
	}
	h := http.Header{}
	c.Authorize(h)
	if h.Get("X-Api-Key") != "sk-ant" || len(h) != 1 {
		t.Errorf("%v", h)
	}
}
