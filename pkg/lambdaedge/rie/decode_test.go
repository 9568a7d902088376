package rie

import (
	"net/http"
	"strings"
	"testing"
)

func TestDecodeHTTP(t *testing.T) {
	for _, tc := range []struct {
		name     string
		streamed bool
		payload  string
		status   int
		header   http.Header
		body     string
		wantErr  bool
	}{
		{name: "buffered", payload: `{"statusCode":201,"headers":{"A":"1"},"multiValueHeaders":{"B":["2","3"]},"body":"hi"}`,
			status: 201, header: http.Header{"A": {"1"}, "B": {"2", "3"}}, body: "hi"},
		{name: "buffered base64", payload: `{"statusCode":200,"body":"/wA=","isBase64Encoded":true}`, status: 200, header: http.Header{}, body: "\xff\x00"},
		{name: "multiValueHeaders win", payload: `{"statusCode":200,"headers":{"A":"x"},"multiValueHeaders":{"A":["y"]}}`, status: 200, header: http.Header{"A": {"y"}}},
		{name: "streamed", streamed: true, payload: `{"statusCode":200,"headers":{"Content-Type":"text/plain"}}` + "\x00\x00\x00\x00\x00\x00\x00\x00" + "body\x00bytes",
			status: 200, header: http.Header{"Content-Type": {"text/plain"}}, body: "body\x00bytes"},
		{name: "streamed without delimiter", streamed: true, payload: `{"statusCode":200}body`, wantErr: true},
		{name: "no status", payload: `{"body":"x"}`, wantErr: true},
		{name: "not JSON", payload: `nope`, wantErr: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r, err := DecodeHTTP(tc.streamed, []byte(tc.payload))
			if tc.wantErr {
				if err == nil {
					t.Errorf("decoded %+v", r)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if r.Status != tc.status || string(r.Body) != tc.body || len(r.Header) != len(tc.header) {
				t.Errorf("got %d %v %q", r.Status, r.Header, r.Body)
			}
			for k, v := range tc.header {
				if strings.Join(r.Header.Values(k), ",") != strings.Join(v, ",") {
					t.Errorf("%s = %q, want %q", k, r.Header.Values(k), v)
				}
			}
		})
	}
}
