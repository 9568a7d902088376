package embeddings

import (
	"encoding/json"
	"testing"

	"github.com/sluice-gateway/sluice/pkg/oai"
)

// TestParametersMatchEncodingJSON: the event's parameters, written member
// by member, are what encoding/json writes for them as a map (the form the
// event carried before); none is nil, which the event omits.
func TestParametersMatchEncodingJSON(t *testing.T) {
	every := &oai.EmbeddingRequest{EncodingFormat: "base64", Dimensions: 256, User: "a<b>&c"}
	want, err := json.Marshal(map[string]any{"encoding_format": "base64", "dimensions": 256, "user": "a<b>&c"})
	if err != nil {
		t.Fatal(err)
	}
	if got := parameters(every); string(got) != string(want) {
		t.Errorf("parameters:\n got %s\nwant %s", got, want)
	}
	if got := parameters(&oai.EmbeddingRequest{}); got != nil {
		t.Errorf("no parameters: %s, want none", got)
	}
}
