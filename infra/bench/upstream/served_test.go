package main

import (
	"net/http"
	"testing"
	"time"
)

func TestServedRecordsEachRequestInsideTheClientsCall(t *testing.T) {
	const latency, interval, chunks = 30 * time.Millisecond, 5 * time.Millisecond, 5
	ts := newTestServer(t, options{recordServed: true, latency: latency, streamInterval: interval, streamChunks: chunks})
	for _, tc := range []struct {
		path, body, route string
		atLeast           time.Duration
	}{
		{"/v1/chat/completions", `{"model":"m","stream":true,"messages":[{"role":"user","content":"hi"}]}`, "openai.chat", latency + (chunks-1)*interval},
		{"/v1/messages", `{"model":"m","max_tokens":5,"messages":[{"role":"user","content":"hi"}]}`, "anthropic.messages", latency},
	} {
		t.Run(tc.route, func(t *testing.T) {
			sent := time.Now()
			readAll(t, post(t, ts.URL+tc.path, tc.body))
			got := time.Now()
			a := served(t, ts.URL)
			if len(a.Served) != 1 || a.Dropped != 0 {
				t.Fatalf("served %+v, want one record", a)
			}
			r := a.Served[0]
			if r.Route != tc.route {
				t.Errorf("route %q, want %q", r.Route, tc.route)
			}
			// The record is stamped once its last write returned, which the
			// client may see a few µs before: only the start is ordered.
			if r.ReceivedUnixNS < sent.UnixNano() || r.ReceivedUnixNS > got.UnixNano() || r.DoneUnixNS < r.ReceivedUnixNS {
				t.Errorf("record %d..%d does not start inside the client's call %d..%d", r.ReceivedUnixNS, r.DoneUnixNS, sent.UnixNano(), got.UnixNano())
			}
			if slack := 5 * time.Millisecond; r.ServedNS < int64(tc.atLeast) || r.ServedNS > int64(got.Sub(sent)+slack) {
				t.Errorf("served %v, want between the provider's own %v and the client's %v", time.Duration(r.ServedNS), tc.atLeast, got.Sub(sent))
			}
		})
	}
}

func TestServedTakeClears(t *testing.T) {
	ts := newTestServer(t, options{recordServed: true})
	for range 3 {
		readAll(t, post(t, ts.URL+"/v1/embeddings", `{"model":"m","input":"a"}`))
	}
	if a := served(t, ts.URL); len(a.Served) != 3 {
		t.Fatalf("first read: %d records, want 3", len(a.Served))
	}
	if a := served(t, ts.URL); len(a.Served) != 0 || a.Served == nil {
		t.Fatalf("second read: %+v, want an empty list", a)
	}
}

func TestServedOffByDefault(t *testing.T) {
	ts := newTestServer(t, options{})
	readAll(t, post(t, ts.URL+"/v1/embeddings", `{"model":"m","input":"a"}`))
	resp, err := http.Get(ts.URL + "/_bench/served")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusNotFound {
		t.Errorf("status %d, want 404 without -record-served", resp.StatusCode)
	}
}

func TestServedLogIsBounded(t *testing.T) {
	var l servedLog
	for range maxServed + 3 {
		l.add("openai.chat", time.Now())
	}
	if a := l.take(); len(a.Served) != maxServed || a.Dropped != 3 {
		t.Fatalf("kept %d, dropped %d; want %d and 3", len(a.Served), a.Dropped, maxServed)
	}
	if a := l.take(); len(a.Served) != 0 || a.Dropped != 0 {
		t.Fatalf("after a take: kept %d, dropped %d; want none", len(a.Served), a.Dropped)
	}
}

// served reads (and clears) the upstream's /_bench/served.
func served(t *testing.T, base string) servedAnswer {
	t.Helper()
	resp, err := http.Get(base + "/_bench/served")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("GET /_bench/served: %s", resp.Status)
	}
	var a servedAnswer
	mustUnmarshal(t, readAll(t, resp), &a)
	return a
}
