package logevent

import (
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
	if err := decodeFast(enc, &fast); err != nil {
		t.Fatalf("the fast path refuses the encoder's output (a field it does not read?): %v", err)
	}
	if diff := cmp.Diff(ev, &fast); diff != "" {
		t.Errorf("fast decoding (-event +read):\n%s", diff)
	}
	std, _ := json.Marshal(ev)
	var fromStd Event
	if err := decodeFast(std, &fromStd); err != nil || !cmp.Equal(ev, &fromStd) {
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
