package gateway

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// TestOverrunOnAConnectionsLaneTimesOutThatCallOnly sends two chat calls on
// one HTTP/1 connection to a deployment with a 300 ms timeout: the provider
// sits on the first until its caller goes, and answers the second. The
// first is cut at its deadline (the provider sees its call cancelled) and
// answered 504 upstream_timeout; the second, on the same connection and so
// the same lane, is answered.
func TestOverrunOnAConnectionsLaneTimesOutThatCallOnly(t *testing.T) {
	var calls atomic.Int32
	cancelled := make(chan struct{}, 1)
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		if calls.Add(1) == 1 {
			<-r.Context().Done()
			cancelled <- struct{}{}
			return
		}
		w.Header().Set("Content-Type", "application/json")
		io.WriteString(w, `{"id":"c","object":"chat.completion","created":1,"model":"gpt-4o-mini","choices":[{"index":0,"message":{"role":"assistant","content":"hi"},"finish_reason":"stop"}],"usage":{"prompt_tokens":1,"completion_tokens":1,"total_tokens":2}}`)
	}))
	t.Cleanup(up.Close)
	url, key := benchSluiceWith(t, `model_list:
  - model_name: gpt-4o-mini
    litellm_params: {model: openai/gpt-4o-mini, api_base: `+up.URL+`/v1, api_key: sk-up, timeout: 0.3, max_retries: 0}
`)
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 1}}
	t.Cleanup(client.CloseIdleConnections)
	call := func() (int, string) {
		req, err := http.NewRequest(http.MethodPost, url+"/v1/chat/completions",
			strings.NewReader(`{"model":"gpt-4o-mini","messages":[{"role":"user","content":"hi"}]}`))
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Authorization", "Bearer "+key)
		resp, err := client.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var body struct {
			Error struct {
				Code string `json:"code"`
			} `json:"error"`
		}
		json.NewDecoder(resp.Body).Decode(&body)
		return resp.StatusCode, body.Error.Code
	}

	start := time.Now()
	if status, code := call(); status != http.StatusGatewayTimeout || code != "upstream_timeout" {
		t.Fatalf("first call: %d %q, want 504 upstream_timeout", status, code)
	}
	if took := time.Since(start); took > 5*time.Second {
		t.Errorf("the timed-out call took %v", took)
	}
	select {
	case <-cancelled:
	case <-time.After(5 * time.Second):
		t.Fatal("the provider's call was not cancelled at the deadline")
	}
	if status, _ := call(); status != http.StatusOK {
		t.Errorf("second call on the same connection: %d, want 200", status)
	}
}
