package oai

import (
	"encoding/json"
	"errors"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/sluice-gateway/sluice/pkg/api"
)

// forwardedIntact checks that out, what Forward made of body, is JSON with
// model set to "gpt-x" and the client's members as they came, but for
// stream_options when the gateway asked for usage.
func forwardedIntact(t *testing.T, body, out []byte, usageAsked bool) {
	t.Helper()
	var got, in map[string]any
	if err := json.Unmarshal(out, &got); err != nil {
		t.Fatalf("Forward gave invalid JSON %q from %q", out, body)
	}
	json.Unmarshal(body, &in)
	if got["model"] != "gpt-x" {
		t.Fatalf("model %v", got["model"])
	}
	delete(in, "model")
	delete(got, "model")
	if usageAsked {
		if opts, _ := got["stream_options"].(map[string]any); opts["include_usage"] != true {
			t.Fatalf("stream_options %v", got["stream_options"])
		}
		delete(in, "stream_options")
		delete(got, "stream_options")
	}
	if diff := cmp.Diff(in, got); diff != "" {
		t.Fatalf("Forward changed the body (-in +out):\n%s\n%q", diff, body)
	}
}

// refusedWith400 checks that a parser's error is a client error.
func refusedWith400(t *testing.T, err error) {
	t.Helper()
	var ae *api.Error
	if !errors.As(err, &ae) || ae.Status != 400 {
		t.Fatalf("error %v is not a 400", err)
	}
}

func FuzzParseCompletionRequest(f *testing.F) {
	for _, s := range []string{
		`{"model":"gpt-3.5-turbo-instruct","prompt":"Say this is a test","max_tokens":7,"temperature":0}`,
		`{"model":"m","prompt":["a","b"],"stream":true,"stream_options":{"include_usage":true},"logit_bias":{"50256":-100}}`,
		`{"model":"m","prompt":[[1,2],[3]],"stream":true,"echo":true}`,
		`{"model":"m","prompt":null}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		r, err := ParseCompletionRequest(body)
		if err != nil {
			refusedWith400(t, err)
			return
		}
		if !json.Valid(body) || r.Model == "" || len(r.Prompt) == 0 || !json.Valid(r.Prompt) {
			t.Fatalf("accepted %q (model %q, prompt %q)", body, r.Model, r.Prompt)
		}
		for _, usage := range []bool{false, true} {
			forwardedIntact(t, body, r.Forward("gpt-x", usage), usage && r.Stream)
		}
	})
}

func FuzzParseResponsesRequest(f *testing.F) {
	for _, s := range []string{
		`{"model":"gpt-4o","input":"Write a haiku"}`,
		`{"model":"m","input":[{"role":"user","content":[{"type":"input_text","text":"hi"}]}],"stream":true,"tools":[]}`,
		`{"model":"m","previous_response_id":"resp_1"}`,
		`{"model":"m","input":7}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		r, err := ParseResponsesRequest(body)
		if err != nil {
			refusedWith400(t, err)
			return
		}
		if !json.Valid(body) || r.Model == "" || (r.Input != nil && !json.Valid(r.Input)) {
			t.Fatalf("accepted %q (model %q, input %q)", body, r.Model, r.Input)
		}
		forwardedIntact(t, body, r.Forward("gpt-x"), false)
	})
}
