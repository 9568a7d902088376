package store

import (
	"bytes"
	"encoding/json"
	"maps"
	"testing"
	"unicode/utf8"
)

// FuzzDecodeEvent holds the decoder's fast path to encoding/json's reading
// of the same bytes: the same events accepted, the same values.
func FuzzDecodeEvent(f *testing.F) {
	f.Add([]byte(`{"attributes":{"team_id":"t1","status":"success"},"body":"{\"id\":\"req_1\",\"x\":\"a\\u2028b\\n\"}"}`))
	f.Add([]byte(`{"body_base64":"AAEC"}`))
	f.Add([]byte(`{"Body":"x","attributes":null}`))
	f.Add([]byte(`{"body":"\ud83d\ude00","attributes":{"a":"b","a":"c"}}`))
	f.Fuzz(func(t *testing.T, doc []byte) {
		if len(doc) > 0 && doc[0] == binaryEventV1 {
			return // the binary form: FuzzEventBinary
		}
		m := Message{ID: "m", Body: doc}
		fast, ferr := DecodeEvent(m)
		ref, rerr := decodeEventJSON(m)
		if (ferr == nil) != (rerr == nil) {
			t.Fatalf("%q: fast err %v, encoding/json err %v", doc, ferr, rerr)
		}
		if ferr == nil && (!bytes.Equal(fast.Body, ref.Body) || !maps.Equal(fast.Attributes, ref.Attributes)) {
			t.Fatalf("%q: fast %+v, encoding/json %+v", doc, fast, ref)
		}
	})
}

// FuzzEncodeEvent: what EncodeEvent writes is the JSON encoding/json reads
// back as the event, and UTF-8 text.
func FuzzEncodeEvent(f *testing.F) {
	f.Add("team_id", "t1", []byte(`{"id":"a","x":"<b>&\u2028"}`))
	f.Add("k\x00", "\"v\\", []byte{0xff, 0x00})
	f.Fuzz(func(t *testing.T, k, v string, body []byte) {
		if !utf8.ValidString(k) || !utf8.ValidString(v) {
			return // attribute names and values are text
		}
		enc := EncodeEvent(Event{Attributes: map[string]string{k: v}, Body: body})
		if !utf8.Valid(enc) || !json.Valid(enc) {
			t.Fatalf("%q is not valid JSON text", enc)
		}
		ref, err := decodeEventJSON(Message{Body: enc})
		if err != nil || ref.Attributes[k] != v || !bytes.Equal(ref.Body, body) && len(body) > 0 {
			t.Fatalf("%q reads back as %+v (%v)", enc, ref, err)
		}
	})
}

// FuzzEventBinary: EncodeEventBinary's form reads back as the event, and
// any bytes in that form decode or fail without panicking or reading past
// the message.
func FuzzEventBinary(f *testing.F) {
	f.Add("team_id", "t1", "status", "success", []byte(`{"id":"a"}`), []byte{binaryEventV1, 1, 1, 'k', 9, 'v'})
	f.Add("", "", "a", "", []byte{}, []byte{binaryEventV1, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01})
	f.Fuzz(func(t *testing.T, k1, v1, k2, v2 string, body, garbage []byte) {
		attrs := map[string]string{k1: v1, k2: v2}
		e := Event{Attributes: attrs, Body: body}
		got, err := DecodeEvent(Message{ID: "m", Body: EncodeEventBinary(e)})
		if err != nil {
			t.Fatalf("round trip: %v", err)
		}
		if !maps.Equal(got.Attributes, attrs) || !bytes.Equal(got.Body, body) {
			t.Fatalf("round trip of %+v gave %+v", e, got)
		}
		if len(garbage) > 0 {
			garbage[0] = binaryEventV1
			_, _ = DecodeEvent(Message{ID: "m", Body: garbage})
		}
	})
}
