package store_test

import (
	"bytes"
	"maps"
	"testing"
	"unicode/utf8"

	"github.com/sluice-gateway/sluice/pkg/store"
)

func TestEventRoundTrip(t *testing.T) {
	for _, e := range []store.Event{
		{Attributes: map[string]string{"team": "t1", "status": "success"}, Body: []byte(`{"a":"<b>&</b>"}`)},
		{Body: []byte{0xff, 0, '"', '\\'}},
		{Attributes: map[string]string{"k": ""}},
		{},
	} {
		b := store.EncodeEvent(e)
		if !utf8.Valid(b) {
			t.Fatalf("encoding of %q is not UTF-8 text", e.Body)
		}
		got, err := store.DecodeEvent(store.Message{ID: "m", Body: b})
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got.Body, e.Body) || !maps.Equal(got.Attributes, e.Attributes) {
			t.Fatalf("round trip of %+v gave %+v", e, got)
		}
	}
}

func TestEventEncodingIsReadable(t *testing.T) {
	got := string(store.EncodeEvent(store.Event{Attributes: map[string]string{"team": "t1"}, Body: []byte(`{"x":"<y>"}`)}))
	want := `{"attributes":{"team":"t1"},"body":"{\"x\":\"<y>\"}"}`
	if got != want {
		t.Fatalf("EncodeEvent = %s, want %s", got, want)
	}
}

func TestDecodeEventRejectsGarbage(t *testing.T) {
	for _, body := range []string{"", "not json", `{"body":"a","body_base64":"YQ=="}`, `{"attributes":{"a":1}}`} {
		if _, err := store.DecodeEvent(store.Message{ID: "m", Body: []byte(body)}); err == nil {
			t.Fatalf("DecodeEvent(%q) succeeded", body)
		}
	}
}
