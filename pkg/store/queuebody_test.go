package store

import (
	"bytes"
	"testing"
)

func TestQueueBodies(t *testing.T) {
	for _, tc := range []struct {
		name     string
		in       []byte
		encoding string
	}{
		{"json travels as it is", []byte(`{"batch_id":"batch_1","chunk":3}`), ""},
		{"empty", []byte{}, "empty"},
		{"binary", []byte{0, 1, 2, 0xff}, "base64"},
		{"a control character SQS refuses", []byte("a\x01b"), "base64"},
		{"tabs and newlines are text", []byte("a\tb\r\nc"), ""},
	} {
		body, enc := EncodeQueueBody(tc.in)
		if enc != tc.encoding || body == "" {
			t.Errorf("%s: encoded %q as %q", tc.name, body, enc)
		}
		back, err := DecodeQueueBody(body, enc)
		if err != nil || !bytes.Equal(back, tc.in) {
			t.Errorf("%s: decoded %q, %v", tc.name, back, err)
		}
	}
	for _, bad := range [][2]string{{"%%%", "base64"}, {"x", "gzip"}} {
		if _, err := DecodeQueueBody(bad[0], bad[1]); err == nil {
			t.Errorf("%q (%s) decoded", bad[0], bad[1])
		}
	}
}

// FuzzQueueBody: every body survives the round trip, and what is sent as
// is is text SQS takes.
func FuzzQueueBody(f *testing.F) {
	f.Add([]byte(`{"a":1}`))
	f.Add([]byte{0xef, 0xbf, 0xbe})
	f.Fuzz(func(t *testing.T, b []byte) {
		body, enc := EncodeQueueBody(b)
		if body == "" || enc == "" && !sqsText([]byte(body)) {
			t.Fatalf("%q sent as %q (%q)", b, body, enc)
		}
		back, err := DecodeQueueBody(body, enc)
		if err != nil || !bytes.Equal(back, b) {
			t.Fatalf("%q came back as %q, %v", b, back, err)
		}
	})
}
