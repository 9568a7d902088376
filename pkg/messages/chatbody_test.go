package messages

import (
	"bytes"
	"encoding/json"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// FuzzChatBody: appendChatBody writes what json.Marshal writes of the same
// chatRequest — byte for byte but for the HTML escapes it leaves out, and
// the same JSON in any case — or declines.
func FuzzChatBody(f *testing.F) {
	for _, s := range []string{
		string(benchRequest),
		// every member the usual form has, so a member of chatRequest the
		// encoder does not write fails here
		`{"model":"m","max_tokens":10,"system":[{"type":"text","text":"a"},{"type":"text","text":"b"}],"messages":[{"role":"user","content":"Hi <b>&amp;</b> \u00e9\u2028\n\u0001"},{"role":"assistant","content":[{"type":"text","text":"x"},{"type":"thinking","thinking":"t","signature":"s"}]}],` +
			`"stream":true,"stop_sequences":["\n\n","END"],"temperature":0.0000001,"top_p":1e21,"top_k":-3,"thinking":{"type":"enabled","budget_tokens":2000},"metadata":{"user_id":"u\"1"},"drop_params":false}`,
		`{"model":"m","max_tokens":0,"messages":[{"role":"assistant","content":[]}],"temperature":-0,"top_p":0.5,"stop_sequences":[]}`,
		`{"model":"m","max_tokens":1,"messages":[{"role":"user","content":[{"type":"text","text":"a"}]}]}`,
		`{"model":"m","max_tokens":1,"messages":[{"role":"assistant","content":[{"type":"tool_use","id":"a","name":"f","input":{}}]},{"role":"user","content":[{"type":"tool_result","tool_use_id":"a","content":"ok"}]}],"tools":[{"name":"f","input_schema":{"type":"object"}}],"tool_choice":{"type":"auto"}}`,
		`{"model":"m","max_tokens":1,"messages":[],"mock_response":"hi"}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		p, err := ParseHead(body)
		if err != nil || p.decode() != nil {
			return
		}
		out, err := p.chatRequest()
		if err != nil {
			return
		}
		fast, ok := appendChatBody(nil, &out)
		if !ok {
			return
		}
		want, err := json.Marshal(out)
		if err != nil {
			t.Fatalf("json.Marshal refuses what appendChatBody wrote as %s: %v", fast, err)
		}
		if !bytes.Contains(want, []byte(`\u003c`)) && !bytes.Contains(want, []byte(`\u003e`)) && !bytes.Contains(want, []byte(`\u0026`)) {
			if !bytes.Equal(fast, want) {
				t.Fatalf("appendChatBody wrote\n%s\njson.Marshal\n%s", fast, want)
			}
			return
		}
		var a, b any
		if err := json.Unmarshal(fast, &a); err != nil {
			t.Fatalf("appendChatBody wrote invalid JSON %s: %v", fast, err)
		}
		if err := json.Unmarshal(want, &b); err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff(b, a); diff != "" {
			t.Fatalf("appendChatBody's JSON differs from json.Marshal's (-want +got):\n%s", diff)
		}
	})
}

// TestChatBodyUsualForm: the bench's request and one with every member of
// the usual form go through appendChatBody; tools do not.
func TestChatBodyUsualForm(t *testing.T) {
	for _, c := range []struct {
		body string
		fast bool
	}{
		{string(benchRequest), true},
		{`{"model":"m","max_tokens":1,"messages":[{"role":"user","content":"a"}],"stream":true,"stop_sequences":["x"],"temperature":1,"top_p":0.5,"top_k":3,"metadata":{"user_id":"u"},"drop_params":true}`, true},
		{`{"model":"m","max_tokens":1,"messages":[{"role":"user","content":[{"type":"image","source":{"type":"url","url":"https://x/a.png"}}]}]}`, false},
		{`{"model":"m","max_tokens":1,"messages":[{"role":"user","content":"a"}],"tools":[{"name":"f","input_schema":{"type":"object"}}]}`, false},
	} {
		p, err := Parse([]byte(c.body))
		if err != nil {
			t.Fatal(err)
		}
		out, err := p.chatRequest()
		if err != nil {
			t.Fatal(err)
		}
		if _, ok := appendChatBody(nil, &out); ok != c.fast {
			t.Errorf("appendChatBody(%s) ok = %v, want %v", c.body, ok, c.fast)
		}
	}
}

// FuzzAnswerJSON: appendAnswer writes what json.Marshal writes in
// AnswerJSON — byte for byte but for the HTML escapes it leaves out, and
// the same JSON in any case — or declines.
func FuzzAnswerJSON(f *testing.F) {
	f.Add(benchChatAnswer)
	f.Add([]byte(`{"id":"c<1>","model":"m&","choices":[{"message":{"role":"assistant","content":"a\u2028\"b\\\u0001"},"finish_reason":"length"}],"usage":{"prompt_tokens":1,"completion_tokens":2,"prompt_tokens_details":{"cached_tokens":1}}}`))
	f.Add([]byte(`{"id":"c","model":"m","choices":[{"message":{"role":"assistant","content":null,"refusal":"no"},"finish_reason":"stop"}]}`))
	f.Add([]byte(`{"id":"c","model":"m","choices":[{"message":{"role":"assistant","content":"x","tool_calls":[{"id":"t","type":"function","function":{"name":"f","arguments":"{}"}}]},"finish_reason":"tool_calls"}]}`))
	f.Fuzz(func(t *testing.T, answer []byte) {
		r, err := FromChat(answer, "m")
		if err != nil {
			return
		}
		fast, ok := appendAnswer(nil, r)
		if !ok {
			return
		}
		want, err := marshalAnswer(r)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Contains(want, []byte(`\u003c`)) && !bytes.Contains(want, []byte(`\u003e`)) && !bytes.Contains(want, []byte(`\u0026`)) {
			if !bytes.Equal(fast, want) {
				t.Fatalf("appendAnswer wrote\n%s\njson.Marshal\n%s", fast, want)
			}
			return
		}
		var a, b any
		if err := json.Unmarshal(fast, &a); err != nil {
			t.Fatalf("appendAnswer wrote invalid JSON %s: %v", fast, err)
		}
		if err := json.Unmarshal(want, &b); err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff(b, a); diff != "" {
			t.Fatalf("appendAnswer's JSON differs from json.Marshal's (-want +got):\n%s", diff)
		}
	})
}

// FuzzChatBodyRaw: appendChatBodyRaw, which translates a request in the
// plain form from its raw strings, writes what the decode, chatRequest and
// appendChatBody write of it, byte for byte, or declines; a request it
// translates is one the decode accepts.
func FuzzChatBodyRaw(f *testing.F) {
	for _, s := range []string{
		string(benchRequest),
		`{"model":"m","max_tokens":4000,"system":"Be <b>\u00e9</b>\n","messages":[{"role":"user","content":"Hi \u2028 é` + "\u2028\u2029" + ` \"q\" \/ \ud83d\ude00"},{"content":"","role":"assistant"}],` +
			`"stream":true,"stop_sequences":["\n\n","END"],"temperature":0.5,"top_p":1,"top_k":3,"thinking":{"type":"enabled","budget_tokens":2000},"metadata":{"user_id":"u\"1"},"drop_params":false}`,
		`{"model":"m","max_tokens":1,"messages":[]}`, `{"model":"m","max_tokens":1,"system":"","messages":[]}`,
		`{"model":"m","max_tokens":1,"system":null,"messages":[{"role":"user","content":"a"}]}`,
		`{"model":"m","max_tokens":1,"messages":[{"role":"user","content":"a","role":"user"}]}`,
		`{"model":"m","max_tokens":1,"messages":[{"role":"robot","content":"a"}]}`,
		`{"model":"m","max_tokens":1,"messages":[{"role":"user","content":[{"type":"text","text":"a"}]}]}`,
		`{"model":"m","max_tokens":1,"messages":[{"role":"user","content":"a"}],"Messages":[]}`,
		`{"model":"m","max_tokens":1,"messages":[{"role":"user","content":"a"}],"container":tru}`,
		`{"model":"m","max_tokens":1,"messages":[{"role":"user","content":"a` + "\x01" + `"}]}`,
		"{\"model\":\"m\",\"max_tokens\":1,\"messages\":[{\"role\":\"user\",\"content\":\"\xff\xfe\"}]}",
		`{"model":"m","max_tokens":1,"messages":[{"role":"user","content":"a"}],"tool_choice":{"type":"auto"}}`,
		`{"model":"m","max_tokens":1,"messages":[{"role":"user","content":"a"}],"mock_response":"hi"}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		p, err := ParseHead(body)
		if err != nil {
			return
		}
		fast, ok := p.appendChatBodyRaw(nil)
		if !ok {
			return
		}
		slow, err := ParseHead(body)
		if err != nil {
			t.Fatal(err)
		}
		if err := slow.decode(); err != nil {
			t.Fatalf("appendChatBodyRaw translated %q, which the decode refuses: %v", body, err)
		}
		out, err := slow.chatRequest()
		if err != nil {
			t.Fatalf("appendChatBodyRaw translated %q, which chatRequest refuses: %v", body, err)
		}
		want, ok := appendChatBody(nil, &out)
		if !ok {
			t.Fatalf("appendChatBodyRaw translated %q, which appendChatBody declines", body)
		}
		if !bytes.Equal(fast, want) {
			t.Fatalf("for %q appendChatBodyRaw wrote\n%s\nthe decode and appendChatBody\n%s", body, fast, want)
		}
	})
}

// TestChatBodyRawTakesTheBenchRequest: the bench's request (a string
// system prompt and a user turn) is translated from its raw strings.
func TestChatBodyRawTakesTheBenchRequest(t *testing.T) {
	p, err := ParseHead(benchRequest)
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := p.appendChatBodyRaw(nil); !ok {
		t.Error("appendChatBodyRaw declines the bench's request")
	}
}
