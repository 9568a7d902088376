package main

import (
	"net/http"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// ingestionStatus is one success of the sink's answer.
type ingestionStatus struct {
	ID     string `json:"id"`
	Status int    `json:"status"`
}

// The Langfuse sink answers 207 with a success for each envelope (trace and
// generation, not the ids nested in their bodies) and counts them.
func TestLangfuseIngestionAnswersEachEnvelope(t *testing.T) {
	ts := newTestServer(t, options{})
	batch := `{"batch":[
		{"id":"ev-1-trace","type":"trace-create","body":{"id":"trace-1","input":"say \"type\":\"trace-create\""}},
		{"type":"generation-create","body":{"id":"gen-1"},"id":"ev-1-generation"}],"metadata":{"batch_size":2}}`
	resp, err := http.Post(ts.URL+"/api/public/ingestion", "application/json", strings.NewReader(batch))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusMultiStatus {
		t.Fatalf("status %d, want 207", resp.StatusCode)
	}
	var got struct {
		Successes []ingestionStatus `json:"successes"`
		Errors    []ingestionStatus `json:"errors"`
	}
	mustUnmarshal(t, readAll(t, resp), &got)
	if diff := cmp.Diff([]ingestionStatus{{"0", 201}, {"1", 201}}, got.Successes); diff != "" {
		t.Errorf("successes (-want +got):\n%s", diff)
	}
	if len(got.Errors) != 0 {
		t.Errorf("errors %v, want none", got.Errors)
	}
	if st := benchStats(t, ts.URL); st.LoggingEvents != 2 {
		t.Errorf("logging events %d, want 2", st.LoggingEvents)
	}
}

func TestLangfuseIngestionRefusesWhatIsNotABatch(t *testing.T) {
	ts := newTestServer(t, options{})
	for _, body := range []string{`{"batch":[{"id":"a","type":"trace-create"`, `{"batch":[{"id":"a"}]}`,
		`{"batch":[{"id":"a"}],"metadata":{"batch_size":-1}}`, `{"batch":[{"id":"a"}],"metadata":{"batch_size":x}}`, `[]`, ``} {
		resp, err := http.Post(ts.URL+"/api/public/ingestion", "application/json", strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusBadRequest {
			t.Errorf("%q: status %d, want 400", body, resp.StatusCode)
		}
	}
}
