package messages

import (
	"bytes"
	"encoding/json"
	"io"
	"reflect"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/sluice-gateway/sluice/pkg/api"
	"github.com/sluice-gateway/sluice/pkg/jsonscan"
	"github.com/sluice-gateway/sluice/pkg/logevent"
	"github.com/sluice-gateway/sluice/pkg/providers/anthropic"
	"github.com/sluice-gateway/sluice/pkg/sse"
)

// FuzzParse: Parse and ParseHead never panic and refuse with a 400 only;
// Parse accepts only JSON objects encoding/json reads, what it accepts
// ParseHead accepts with the same head (what a native call is routed and
// logged by), and it translates for the chat seam or is refused with a 400.
func FuzzParse(f *testing.F) {
	for _, s := range []string{
		`{"model":"m","max_tokens":10,"messages":[{"role":"user","content":"Hi"}]}`,
		`{"model":"m","max_tokens":10,"system":"s","messages":[{"role":"user","content":[{"type":"image","source":{"type":"url","url":"https://x/a.png"}}]}]}`,
		`{"model":"m","max_tokens":10,"messages":[{"role":"assistant","content":[{"type":"tool_use","id":"a","name":"f","input":{"x":1}}]},{"role":"user","content":[{"type":"tool_result","tool_use_id":"a","content":"ok"}]}],"tools":[{"name":"f","input_schema":{"type":"object"}}],"tool_choice":{"type":"any"}}`,
		`{"model":"m","max_tokens":5000,"messages":[],"thinking":{"type":"enabled","budget_tokens":1024},"stream":true,"metadata":{"user_id":"u"}}`,
		`{"model":"m","max_tokens":1,"messages":[{"role":"user","content":[{"type":"web_search_tool_result","tool_use_id":"x","content":{"a":1}}]}]}`,
		`{"model":1}`, `[]`, `{`, `null`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		h, herr := ParseHead(body)
		if herr != nil {
			if e := api.AsError(herr); e.Status != 400 {
				t.Fatalf("head: status %d for %q: %v", e.Status, body, herr)
			}
		}
		if herr == nil && h.asIs && json.Valid(body) {
			// A body forwarded as it came is the one a rebuild would send
			// (the head delimits messages, system and tools without
			// checking them: invalid, both go to Anthropic as they are).
			rebuilt, err := anthropic.MessagesBody(body, h.Model, nil)
			var a, b any
			if err != nil || json.Unmarshal(body, &a) != nil || json.Unmarshal(rebuilt, &b) != nil || !reflect.DeepEqual(a, b) {
				t.Fatalf("forwarded as it came, %q differs from its rebuild %q (%v)", body, rebuilt, err)
			}
		}
		p, err := Parse(body)
		if err != nil {
			if e := api.AsError(err); e.Status != 400 {
				t.Fatalf("status %d for %q: %v", e.Status, body, err)
			}
			return
		}
		var v map[string]any
		if json.Unmarshal(body, &v) != nil {
			t.Fatalf("accepted what encoding/json refuses: %q", body)
		}
		if herr != nil {
			t.Fatalf("Parse accepts what ParseHead refuses (%v): %q", herr, body)
		}
		if h.Model != p.Model || h.MaxTokens != p.MaxTokens || h.Stream != p.Stream || h.tools != len(p.Tools) ||
			(h.Metadata == nil) != (p.Metadata == nil) || h.Metadata != nil && h.Metadata.UserID != p.Metadata.UserID ||
			(h.MockResponse == nil) != (p.MockResponse == nil) || !bytes.Equal(h.RawMessages, p.RawMessages) {
			t.Fatalf("the head differs from the whole request's for %q:\n%+v\n%+v", body, h.Request, p.Request)
		}
		if _, err := p.Chat(); err != nil {
			if e := api.AsError(err); e.Status != 400 {
				t.Fatalf("translation failed with %d for %q: %v", e.Status, body, err)
			}
		}
	})
}

// FuzzStream: any chunk stream — the chat seam's relay of a provider's
// bytes — translates without a panic into events whose data is JSON, or
// stops with an error; the meter reads any bytes without a panic.
func FuzzStream(f *testing.F) {
	for _, s := range []string{
		"data: {\"id\":\"c\",\"choices\":[{\"index\":0,\"delta\":{\"content\":\"Hi\"}}]}\n\ndata: [DONE]\n\n",
		"data: {\"choices\":[{\"delta\":{\"reasoning_content\":\"r\",\"tool_calls\":[{\"index\":0,\"id\":\"a\",\"function\":{\"name\":\"f\",\"arguments\":\"{\"}}]},\"finish_reason\":\"tool_calls\"}]}\n\ndata: {\"choices\":[],\"usage\":{\"prompt_tokens\":1}}\n\ndata: [DONE]\n\n",
		"data: {\"choices\":[{\"delta\":{\"tool_calls\":[{\"index\":3,\"function\":{\"arguments\":\"x\"}}]}}]}\n\n",
		"data: nope\n\n", "event: x\n\n", "",
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, in []byte) {
		out, _ := io.ReadAll(Stream(io.NopCloser(bytes.NewReader(in)), "m"))
		m := newStreamMeter()
		m.Write(out)
		var ev logevent.Event
		m.End(&ev)
		p := sse.NewParser(sse.Limits{}, func(e sse.Event) {
			if !json.Valid(e.Data) {
				t.Fatalf("event %s data is not JSON: %q", e.Type, e.Data)
			}
		})
		p.Write(out)
		p.End()
		jm := newJSONMeter(-1, true)
		jm.Write(in)
		jm.End(&ev)
	})
}

// FuzzJSONMeter holds the native answer's meter, which reads usage and
// stop_reason without reflection, to encoding/json: for any answer it
// accepts what a decode of those two members by encoding/json accepts,
// with the same counts and stop reason — whether it keeps the answer or
// reads it in the one write that brings it.
func FuzzJSONMeter(f *testing.F) {
	for _, s := range []string{
		`{"id":"msg_1","type":"message","content":[{"type":"text","text":"Hi"}],"stop_reason":"end_turn","usage":{"input_tokens":12,"output_tokens":3,"cache_read_input_tokens":4}}`,
		`{"stop_reason":null,"usage":null}`, `{"usage":{"INPUT_TOKENS":2,"output_tokens":null}}`,
		`{"usage":{"input_tokens":1.5}}`, `{"usage":[1]}`, `{"stop_reason":1}`, `{"stop_reason":"a\u00e9"}`,
		`{"usage":{"input_tokens":1},"usage":{"output_tokens":2}}`, `[]`, `{`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, in []byte) {
		m := newJSONMeter(-1, true)
		m.Write(in)
		var ev logevent.Event
		u, err := m.End(&ev)

		direct := newJSONMeter(int64(len(in)), false)
		direct.Write(in)
		var dev logevent.Event
		du, derr := direct.End(&dev)
		if du != u || (derr == nil) != (err == nil) || dev.FinishReason != ev.FinishReason || dev.Response != nil {
			t.Fatalf("read in place %+v %q %v, kept %+v %q %v, for %q", du, dev.FinishReason, derr, u, ev.FinishReason, err, in)
		}

		var (
			want Usage
			stop string
		)
		// The members as jsonscan delimits them (the meter checks the
		// answer's structure, not the values it keeps), the two decoded
		// by encoding/json.
		wantErr := jsonscan.Members(in, func(name, v []byte) error {
			switch {
			case jsonscan.Null(v):
			case string(name) == "usage":
				return json.Unmarshal(v, &want)
			case string(name) == "stop_reason":
				return json.Unmarshal(v, &stop)
			}
			return nil
		})
		if (err == nil) != (wantErr == nil) {
			t.Fatalf("meter error %v, encoding/json's %v, for %q", err, wantErr, in)
		}
		if err == nil && (u != toOAI(want) || ev.FinishReason != stop) {
			t.Fatalf("meter read %+v %q, encoding/json %+v %q, for %q", u, ev.FinishReason, toOAI(want), stop, in)
		}
	})
}

// FuzzChatAnswer holds the translated answer's reader to encoding/json:
// what it reads without reflection, encoding/json decodes without an error
// to the same; the rest goes to encoding/json.
func FuzzChatAnswer(f *testing.F) {
	for _, s := range []string{
		string(benchChatAnswer),
		`{"id":"c","choices":[{"message":{"content":null,"tool_calls":[{"id":"a","type":"function","function":{"name":"f","arguments":"{}"}}]},"finish_reason":"tool_calls"}],"usage":{"prompt_tokens":1,"prompt_tokens_details":{"cached_tokens":1}}}`,
		`{"id":"c","choices":[{"message":{"content":"a\nb\u00e9","refusal":"no","reasoning_content":"r"}},null],"usage":null}`,
		`{"ID":"c","choices":[]}`, `{"id":"a","id":"b"}`, `{"choices":[{"Message":{}}]}`, `{"choices":[{"message":{"CONTENT":"x"}}]}`,
		`{"choices":null,"id":null}`, `{"choices":[{"message":{"content":1}}]}`, `{"usage":{"prompt_tokens":"1"}}`, "{\"id\":\"\xff\"}", `[]`,
		`{"choices":[{"message":{"content":"a\u00"}}]}`, `{"choices":[nul]}`, `{"id":"c"} x`, `{"choices":[{"message":{"content":"x"},"finish_reason":"stop"},]}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, in []byte) {
		var got chatAnswer
		valid, ok := readChatAnswer(in, &got)
		if valid && !json.Valid(in) {
			t.Fatalf("%q checked as JSON, which encoding/json refuses", in)
		}
		if !ok || !jsonscan.Valid(in) {
			return
		}
		var want chatAnswer
		if err := json.Unmarshal(in, &want); err != nil {
			t.Fatalf("read %q, which encoding/json refuses: %v", in, err)
		}
		if !reflect.DeepEqual(got, want) {
			t.Fatalf("read %q as %+v, encoding/json as %+v", in, got, want)
		}
	})
}

// FuzzDecodeRequest holds decodeRequest, which reads a request's messages
// without reflection, to encoding/json: what it decodes, json.Unmarshal
// decodes without error into the same Request.
func FuzzDecodeRequest(f *testing.F) {
	for _, s := range []string{
		`{"model":"m","max_tokens":10,"system":"s","messages":[{"role":"user","content":"Hi \u00e9\n"}]}`,
		`{"model":"m","max_tokens":10,"system":[{"type":"text","text":"s"}],"messages":[{"role":"user","content":[{"type":"text","text":"a"},{"type":"image","source":{"type":"url","url":"https://x/a.png"}}]},{"role":"assistant","content":"b"}]}`,
		`{"model":"m","max_tokens":10,"messages":[{"role":"assistant","content":[{"type":"tool_use","id":"a","name":"f","input":{"x":1}}]},{"role":"user","content":[{"type":"tool_result","tool_use_id":"a","content":"ok"}]}],"tools":[{"name":"f","input_schema":{"type":"object"}}],"tool_choice":{"type":"any"}}`,
		`{"model":"m","messages":[],"messages":[{"role":"user","content":"x"}]}`,
		`{"model":"m","messages":[{"ROLE":"user","content":"x"}]}`, `{"Model":"m","messages":[]}`,
		`{"messages":[{"role":null,"content":"x"}],"mock_response":null,"temperature":1e0}`,
		`{"messages":[{"role":"user","content":null}],"system":null}`, `{"messages":null}`,
		`{"messages":[1]}`, `{"model":1}`, `{"tools":[{"name":"a"}],"tools":[{"description":"b"}]}`,
		`{"container":"c","messages":[]}`, `[]`, `{`, `null`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		var fast Request
		if !decodeRequest(body, &fast) {
			return
		}
		var want Request
		if err := json.Unmarshal(body, &want); err != nil {
			t.Fatalf("decodeRequest read %q, encoding/json refuses it: %v", body, err)
		}
		for _, r := range []*Request{&fast, &want} {
			if jsonscan.Null(r.MockResponse) {
				r.MockResponse = nil // decodeWhole's, for both
			}
		}
		if diff := cmp.Diff(want, fast); diff != "" {
			t.Fatalf("decodeRequest(%q) differs from encoding/json's (-want +got):\n%s", body, diff)
		}
	})
}
