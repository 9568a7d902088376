package logevent

import (
	"bytes"
	"encoding/json"
	"reflect"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
)

// filled is an Event with every field, nested ones included, set (found by
// reflection: a field added to Event is filled too).
func filled(t *testing.T) *Event {
	ev := new(Event)
	var fill func(v reflect.Value, path string)
	fill = func(v reflect.Value, path string) {
		switch v.Kind() {
		case reflect.String:
			v.SetString(path + " \"<é>\n")
		case reflect.Bool:
			v.SetBool(true)
		case reflect.Int, reflect.Int64:
			v.SetInt(int64(len(path)))
		case reflect.Float64:
			v.SetFloat(1795342530.104 + float64(len(path)))
		case reflect.Struct:
			for i := range v.NumField() {
				fill(v.Field(i), path+"."+v.Type().Field(i).Name)
			}
		case reflect.Pointer:
			v.Set(reflect.New(v.Type().Elem()))
			fill(v.Elem(), path)
		case reflect.Slice:
			if v.Type() == reflect.TypeOf(json.RawMessage(nil)) {
				v.SetBytes([]byte(`{"raw":["` + path + `",1.5,null]}`))
				return
			}
			v.Set(reflect.MakeSlice(v.Type(), 2, 2))
			for i := range 2 {
				fill(v.Index(i), path)
			}
		case reflect.Map:
			v.Set(reflect.ValueOf(map[string]any{"temperature": 0.5, "user": path}))
		default:
			t.Fatalf("%s: fill a %s", path, v.Kind())
		}
	}
	fill(reflect.ValueOf(ev).Elem(), "Event")
	return ev
}

// TestCodecCoversEveryField: every field of Event is written by the
// encoder and read by the fast decoder, as encoding/json would.
func TestCodecCoversEveryField(t *testing.T) {
	ev := filled(t)
	enc, err := appendEvent(nil, ev)
	if err != nil {
		t.Fatal(err)
	}
	var ref Event
	if err := json.Unmarshal(enc, &ref); err != nil {
		t.Fatalf("%s: %v", enc, err)
	}
	if diff := cmp.Diff(ev, &ref); diff != "" {
		t.Errorf("encoding/json reads the encoding differently (-event +read): a field is not encoded\n%s", diff)
	}
	var fast Event
	if err := readEvent(enc, &fast); err != nil {
		t.Fatalf("the fast path refuses the encoder's output (a field it does not read?): %v", err)
	}
	if diff := cmp.Diff(ev, &fast); diff != "" {
		t.Errorf("fast decoding (-event +read):\n%s", diff)
	}
	std, _ := json.Marshal(ev)
	var fromStd Event
	if err := readEvent(std, &fromStd); err != nil || !cmp.Equal(ev, &fromStd) {
		t.Errorf("encoding/json's own encoding: %v\n%s", err, cmp.Diff(ev, &fromStd))
	}
}

// TestCodecKeepsZeroValues: omitted and zero fields read back as they were.
func TestCodecKeepsZeroValues(t *testing.T) {
	for _, ev := range []*Event{{ID: "a"}, {ID: "b", RequestTags: []string{}, Metadata: Metadata{RequestID: "r"}}} {
		enc, err := appendEvent(nil, ev)
		if err != nil {
			t.Fatal(err)
		}
		got, err := decodeEvent(enc)
		if err != nil || !cmp.Equal(ev, got, cmpopts.EquateEmpty()) {
			t.Errorf("%s: %v\n%s", enc, err, cmp.Diff(ev, got))
		}
	}
}

// FuzzDecodeEvent holds the decoder to encoding/json: the same documents
// accepted, read the same.
func FuzzDecodeEvent(f *testing.F) {
	ev := &Event{ID: "req_1", Status: StatusFailure, Messages: json.RawMessage(`["hi"]`), RequestTags: []string{"x"},
		Metadata: Metadata{UserAPIKeyTeamID: "t"}, ErrorInformation: &ErrorInfo{ErrorCode: "400"}, Passthrough: &Passthrough{StatusCode: 200}}
	seed, _ := appendEvent(nil, ev)
	f.Add(seed)
	f.Add([]byte(`{"id":"a","ID":"b","total_tokens":1e3}`))
	f.Add([]byte(`{"id":"a","metadata":null,"request_tags":[null],"startTime":-0.5e-7}`))
	f.Fuzz(func(t *testing.T, doc []byte) {
		got, err := decodeEvent(doc)
		var ref Event
		rerr := json.Unmarshal(doc, &ref)
		if (err == nil) != (rerr == nil) {
			t.Fatalf("%q: decodeEvent err %v, encoding/json err %v", doc, err, rerr)
		}
		if err != nil {
			return
		}
		if diff := cmp.Diff(&ref, got); diff != "" {
			t.Fatalf("%q (-encoding/json +decodeEvent):\n%s", doc, diff)
		}
		if enc, err := appendEvent(nil, got); err == nil {
			again, err := decodeEvent(enc)
			if err != nil || !cmp.Equal(got, again, cmpopts.EquateEmpty()) {
				t.Fatalf("re-encoded %s: %v", enc, err)
			}
		}
	})
}

// FuzzAppendEvent holds the encoder to encoding/json: any event
// encoding/json reads, appendEvent writes as encoding/json does — byte for
// byte once both are compacted and HTML-escaped (the fast path skips HTML
// escapes; encoding/json compacts raw members).
func FuzzAppendEvent(f *testing.F) {
	seed, _ := json.Marshal(filled(&testing.T{}))
	f.Add(seed)
	f.Add([]byte(`{"id":"a","messages":[ 1, "<\u2028>" ],"response_cost":1e21,"startTime":-0.5e-7,"request_tags":[]}`))
	f.Add([]byte(`{"budget_alert":{"max_budget":null,"budget_reset_at":7},"passthrough":{"status_code":-1}}`))
	f.Fuzz(func(t *testing.T, doc []byte) {
		var ev Event
		if json.Unmarshal(doc, &ev) != nil {
			return
		}
		want, werr := json.Marshal(&ev)
		got, gerr := appendEvent(nil, &ev)
		if (werr == nil) != (gerr == nil) {
			t.Fatalf("%q: appendEvent err %v, encoding/json err %v", doc, gerr, werr)
		}
		if werr != nil {
			return
		}
		if c, w := normalize(t, got), normalize(t, want); !bytes.Equal(c, w) {
			t.Fatalf("%q:\nappendEvent  %s\nencoding/json %s", doc, c, w)
		}
	})
}

func normalize(t *testing.T, doc []byte) []byte {
	var escaped, compact bytes.Buffer
	json.HTMLEscape(&escaped, doc)
	if err := json.Compact(&compact, escaped.Bytes()); err != nil {
		t.Fatalf("%s: %v", doc, err)
	}
	return compact.Bytes()
}

// BenchmarkCodec compares the generated codec with encoding/json on a
// typical event (a chat call with its messages and answer), encode and
// decode: run with -count and compare the pairs.
func BenchmarkCodec(b *testing.B) {
	ev := &Event{ID: "chatcmpl-8f2c1d", TraceID: "5b8aa5a2d2c872e8", CallType: CallCompletion, ResponseCost: 0.000123,
		Status: StatusSuccess, CustomLLMProvider: "openai", TotalTokens: 57, PromptTokens: 12, CompletionTokens: 45,
		StartTime: 1795342530.104, EndTime: 1795342531.2, CompletionStartTime: 1795342530.5, ResponseTime: 0.396,
		Model: "gpt-4o-mini", ModelGroup: "gpt-4o-mini", APIBase: "https://api.openai.com/v1",
		Metadata:    Metadata{UserAPIKeyHash: "88dc28d0f030c55ed4ab77ed8faf098196cb1c05df778539800c9f1243fe6b4b", UserAPIKeyTeamID: "team-a", RequestID: "req_1"},
		RequestTags: []string{"prod"}, FinishReason: "stop",
		Messages: json.RawMessage(`[{"role":"system","content":"You are terse."},{"role":"user","content":"Say hello in three languages, please."}]`),
		Response: json.RawMessage(`{"id":"chatcmpl-8f2c1d","object":"chat.completion","choices":[{"index":0,"message":{"role":"assistant","content":"Hello, Hola, Bonjour."},"finish_reason":"stop"}],"usage":{"prompt_tokens":12,"completion_tokens":45,"total_tokens":57}}`)}
	doc, err := appendEvent(nil, ev)
	if err != nil {
		b.Fatal(err)
	}
	b.Run("encode/generated", func(b *testing.B) {
		for b.Loop() {
			if _, err := marshal(ev); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("encode/encoding-json", func(b *testing.B) {
		for b.Loop() {
			if _, err := json.Marshal(ev); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("decode/generated", func(b *testing.B) {
		for b.Loop() {
			if _, err := decodeEvent(doc); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("decode/encoding-json", func(b *testing.B) {
		for b.Loop() {
			var got Event
			if err := json.Unmarshal(doc, &got); err != nil {
				b.Fatal(err)
			}
		}
	})
}
