package main

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

func TestTakeServed(t *testing.T) {
	for _, tc := range []struct {
		name    string
		status  int
		body    string
		want    int
		wantErr string
	}{
		{"records", http.StatusOK, `{"served":[{"route":"openai.chat","received_unix_ns":1,"done_unix_ns":3,"served_ns":2}],"dropped":0}`, 1, ""},
		{"none", http.StatusOK, `{"served":[],"dropped":0}`, 0, ""},
		{"dropped records cannot be matched", http.StatusOK, `{"served":[],"dropped":2}`, 0, "2 serve records dropped"},
		{"an upstream without -record-served", http.StatusNotFound, `{"error":{"message":"serve records are off"}}`, 0, "answered 404"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				if r.Method != http.MethodGet || r.URL.Path != "/_bench/served" {
					http.NotFound(w, r)
					return
				}
				w.Header().Set("Content-Type", "application/json")
				w.WriteHeader(tc.status)
				_, _ = w.Write([]byte(tc.body))
			}))
			defer srv.Close()
			up := &upstream{url: srv.URL, client: srv.Client()}
			got, err := up.takeServed(context.Background())
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("error %v, want one saying %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if len(got) != tc.want {
				t.Fatalf("%d records, want %d", len(got), tc.want)
			}
			if tc.want == 1 && (got[0] != serveRecord{Route: "openai.chat", ReceivedUnixNS: 1, DoneUnixNS: 3, ServedNS: 2}) {
				t.Errorf("record %+v", got[0])
			}
		})
	}
}
