package messages

import (
	"encoding/json"
	"testing"
)

// TestParametersMatchEncodingJSON: the event's parameters, written member
// by member, are what encoding/json writes for them as a map (the form the
// event carried before).
func TestParametersMatchEncodingJSON(t *testing.T) {
	for name, tc := range map[string]struct {
		body string
		want map[string]any
	}{
		"every parameter": {
			`{"model":"m","max_tokens":2048,"messages":[{"role":"user","content":"hi"}],"stream":true,"stop_sequences":["<end>","&"],` +
				`"temperature":0.2,"top_p":1e-7,"top_k":-0,"tools":[{"name":"f","input_schema":{"type":"object"}}],"tool_choice":{"type":"auto"},` +
				`"thinking":{"type":"enabled","budget_tokens":1024}}`,
			map[string]any{"max_tokens": int64(2048), "stream": true, "stop_sequences": []string{"<end>", "&"}, "temperature": 0.2,
				"top_p": 1e-7, "top_k": int64(0), "tools": 1, "tool_choice": "auto", "thinking": "enabled"},
		},
		"max_tokens only": {`{"model":"m","max_tokens":10,"messages":[{"role":"user","content":"hi"}]}`, map[string]any{"max_tokens": int64(10)}},
	} {
		t.Run(name, func(t *testing.T) {
			mc, err := parseCall([]byte(tc.body))
			if err != nil {
				t.Fatal(err)
			}
			want, err := json.Marshal(tc.want)
			if err != nil {
				t.Fatal(err)
			}
			if got := parameters(&mc.parsed); string(got) != string(want) {
				t.Errorf("parameters:\n got %s\nwant %s", got, want)
			}
		})
	}
}
