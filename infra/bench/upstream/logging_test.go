package main

import (
	"net/http"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// The Langfuse sink answers each envelope by its own id (not the ids
// nested in its body) and counts the envelopes.
func TestLangfuseIngestionAnswersEachEnvelope(t *testing.T) {
	ts := newTestServer(t, options{})
	batch := `{"batch":[
		{"id":"ev-1-trace","type":"trace-create","body":{"id":"trace-1","metadata":{"id":"x"}}},
		{"type":"generation-create","body":{"id":"gen-1"},"id":"ev-1-generation"}]}`
	resp, err := http.Post(ts.URL+"/api/public/ingestion", "application/json", strings.NewReader(batch))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusMultiStatus {
		t.Fatalf("status %d, want 207", resp.StatusCode)
	}
	var got struct {
		Successes []struct {
			ID     string `json:"id"`
			Status int    `json:"status"`
		} `json:"successes"`
	}
	mustUnmarshal(t, readAll(t, resp), &got)
	want := []struct {
		ID     string `json:"id"`
		Status int    `json:"status"`
	}{{"ev-1-trace", 201}, {"ev-1-generation", 201}}
	if diff := cmp.Diff(want, got.Successes); diff != "" {
		t.Errorf("successes (-want +got):\n%s", diff)
	}
	var st statsSnapshot
	stats, err := http.Get(ts.URL + "/_bench/stats")
	if err != nil {
		t.Fatal(err)
	}
	defer stats.Body.Close()
	mustUnmarshal(t, readAll(t, stats), &st)
	if st.LoggingEvents != 2 {
		t.Errorf("logging events %d, want 2", st.LoggingEvents)
	}
}

func TestLangfuseIngestionRefusesWhatIsNotABatch(t *testing.T) {
	ts := newTestServer(t, options{})
	for _, body := range []string{`{"batch":[{"id":"a"}`, `{"batch":[{"type":"trace-create"}]}`, `{"batch":[{"id":7}]}`, `[]`} {
		resp, err := http.Post(ts.URL+"/api/public/ingestion", "application/json", strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusBadRequest {
			t.Errorf("%s: status %d, want 400", body, resp.StatusCode)
		}
	}
}
