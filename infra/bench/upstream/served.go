package main

import (
	"encoding/json"
	"net/http"
	"sync"
	"time"
)

// maxServed bounds the serve records kept between two reads of
// GET /_bench/served; later ones are counted as dropped.
const maxServed = 10000

// serveRecord is one request as the upstream served it: from the handler
// taking it (its headers read) to its last byte written and flushed, the
// provider's own time (latency, chunk pauses) included. The wall-clock
// instants let a client on the same machine place the record inside its
// own call (infra/sizing subtracts ServedNS from what it waited).
type serveRecord struct {
	Route          string `json:"route"`
	ReceivedUnixNS int64  `json:"received_unix_ns"`
	DoneUnixNS     int64  `json:"done_unix_ns"`
	ServedNS       int64  `json:"served_ns"` // monotonic, not Done − Received
}

// servedAnswer is the JSON answer of GET /_bench/served.
type servedAnswer struct {
	Served  []serveRecord `json:"served"`
	Dropped int           `json:"dropped"`
}

// servedLog keeps serve records (only with -record-served: a load run
// would pay a lock a request for records nobody reads).
type servedLog struct {
	mu      sync.Mutex
	records []serveRecord
	dropped int
}

func (l *servedLog) add(route string, received time.Time) {
	done := time.Now()
	rec := serveRecord{Route: route, ReceivedUnixNS: received.UnixNano(), DoneUnixNS: done.UnixNano(), ServedNS: int64(done.Sub(received))}
	l.mu.Lock()
	defer l.mu.Unlock()
	if len(l.records) >= maxServed {
		l.dropped++
		return
	}
	l.records = append(l.records, rec)
}

// take returns the records kept since the last take, in the order the
// requests finished, and clears them.
func (l *servedLog) take() servedAnswer {
	l.mu.Lock()
	defer l.mu.Unlock()
	a := servedAnswer{Served: l.records, Dropped: l.dropped}
	if a.Served == nil {
		a.Served = []serveRecord{}
	}
	l.records, l.dropped = nil, 0
	return a
}

// benchServed answers GET /_bench/served: the serve records since the last
// call, which it clears (404 without -record-served).
func (s *server) benchServed(w http.ResponseWriter, _ *http.Request) {
	if s.served == nil {
		writeError(w, familyOpenAI, http.StatusNotFound, "serve records are off: start the upstream with -record-served")
		return
	}
	body, err := json.Marshal(s.served.take())
	if err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	writeBody(w, http.StatusOK, body)
}
