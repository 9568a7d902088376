// Package langfuse delivers log events to Langfuse through its batch
// ingestion API: POST {host}/api/public/ingestion with HTTP Basic auth
// (public key : secret key) and a body {"batch":[event, ...]}, each event an
// envelope {id, type, timestamp, body}. Every log event becomes a
// trace-create and a generation-create, the way LiteLLM's Langfuse logger
// records a call. Langfuse answers 207 with per-event successes and
// errors; it deduplicates envelopes by id, and sluice's ids are derived
// from the log event's id, so a redelivered event is not recorded twice.
package langfuse

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/sluice-gateway/sluice/pkg/callbacks"
	"github.com/sluice-gateway/sluice/pkg/jsonscan"
	"github.com/sluice-gateway/sluice/pkg/logevent"
)

// Limits of one ingestion request. Langfuse refuses batches over 3.5 MB.
const (
	MaxBatchBytes  = 3 << 20
	MaxBatchEvents = 200 // log events (two envelopes each)
	// maxContentBytes bounds an event's input or output; larger ones are
	// replaced by a note so the event still fits a batch.
	maxContentBytes = 1 << 20
	// maxAnswerBytes bounds how much of an answer is read.
	maxAnswerBytes = 1 << 20
)

// Client sends to one Langfuse project.
type Client struct {
	http *http.Client
	url  string
	auth string
	// limits, MaxBatchBytes and maxContentBytes unless a test lowers them
	maxBatchBytes, maxContent int
	// bodies are request bodies to reuse (a batch is tens of KB to a few
	// MB, written every few milliseconds under load); answers, the
	// buffers the answers are read into (two successes an event, a few
	// KB). Both from the Buffers given to New.
	bodies, answers freeList
}

// New returns a client for the project of publicKey at host (a base URL such
// as https://cloud.langfuse.com, already checked by the settings service).
// Its request bodies and answer buffers come from buffers, which clients
// share; nil: each request allocates its own.
func New(httpClient *http.Client, host, publicKey, secretKey string, buffers *Buffers) *Client {
	c := &Client{
		http:          httpClient,
		url:           strings.TrimRight(host, "/") + "/api/public/ingestion",
		auth:          "Basic " + base64.StdEncoding.EncodeToString([]byte(publicKey+":"+secretKey)),
		maxBatchBytes: MaxBatchBytes, maxContent: maxContentBytes,
	}
	if buffers != nil {
		c.bodies, c.answers = buffers.bodies, buffers.answers
	}
	return c
}

// Buffers lends request bodies and answer buffers to the clients that
// share it: free lists of at most n each, not sync.Pools, which every
// garbage collection empties — and a busy gateway collects every few
// milliseconds, so a batch body of hundreds of KB was allocated afresh,
// growing by doubling, for nearly every request. One Buffers for all the
// process's clients bounds what idle destinations keep.
type Buffers struct {
	bodies, answers freeList
}

// NewBuffers returns free lists that keep at most n bodies and n answer
// buffers.
func NewBuffers(n int) *Buffers {
	return &Buffers{bodies: make(freeList, n), answers: make(freeList, n)}
}

// freeList is a bounded list of buffers to reuse. A nil one keeps none: its
// channel is never ready.
type freeList chan *[]byte

// maxKeptBuffer bounds the buffers a freeList keeps: a batch's limit and room.
const maxKeptBuffer = MaxBatchBytes + MaxBatchBytes/2

func (f freeList) get() *[]byte {
	select {
	case p := <-f:
		return p
	default:
		return new([]byte)
	}
}

func (f freeList) put(p *[]byte) {
	if cap(*p) > maxKeptBuffer {
		return
	}
	select {
	case f <- p:
	default:
	}
}

// Envelope ids: unique per log event and kind, stable across redeliveries
// (Langfuse deduplicates on them).
func traceEnvelopeID(ev *logevent.Event) string      { return ev.ID + "-trace" }
func generationEnvelopeID(ev *logevent.Event) string { return ev.ID + "-generation" }

// content bounds an input or output: past max bytes it becomes a note.
func content(raw json.RawMessage, max int) json.RawMessage {
	if len(raw) <= max {
		return raw
	}
	note, _ := json.Marshal(fmt.Sprintf("[omitted by sluice: %d bytes, more than a Langfuse batch may carry]", len(raw)))
	return note
}

// stampLayout is how envelopes write a time: UTC, to the microsecond.
const stampLayout = "2006-01-02T15:04:05.000000Z"

// appendStamp appends the time of a log event's epoch seconds as a JSON
// string in stampLayout; no time (0) is now. It writes the digits itself:
// time.Format reads its layout on every call, and every delivered event
// carries two or three stamps.
func appendStamp(b []byte, sec float64) []byte {
	t := callbacks.EventTime(sec)
	if t.IsZero() {
		t = time.Now().UTC()
	}
	year, month, day := t.Date()
	if year < 0 || year > 9999 {
		b = append(b, '"')
		return append(t.AppendFormat(b, stampLayout), '"')
	}
	hour, minute, second := t.Clock()
	b = append(b, '"')
	b = appendDigits(b, year, 4)
	b = appendDigits(append(b, '-'), int(month), 2)
	b = appendDigits(append(b, '-'), day, 2)
	b = appendDigits(append(b, 'T'), hour, 2)
	b = appendDigits(append(b, ':'), minute, 2)
	b = appendDigits(append(b, ':'), second, 2)
	b = appendDigits(append(b, '.'), t.Nanosecond()/1000, 6)
	return append(b, 'Z', '"')
}

// appendDigits appends v (≥ 0) as exactly n decimal digits.
func appendDigits(b []byte, v, n int) []byte {
	b = append(b, "000000"[:n]...)
	for i := len(b) - 1; i >= len(b)-n; i-- {
		b[i] = byte('0' + v%10)
		v /= 10
	}
	return b
}

// IngestionError is one refused envelope.
type IngestionError struct {
	ID      string          `json:"id"`
	Status  int             `json:"status"`
	Message string          `json:"message,omitempty"`
	Error   json.RawMessage `json:"error,omitempty"`
}

// Send delivers events, in as few requests as the batch limits allow, and
// returns one error per event (nil: Langfuse accepted both its envelopes).
// The envelopes are written straight into the request body.
func (c *Client) Send(ctx context.Context, events []*logevent.Event) []error {
	errs := make([]error, len(events))
	var members []int // indexes of the events in body
	buf := c.bodies.get()
	defer func() { c.bodies.put(buf) }()
	if want := bodySizeHint(events, c.maxBatchBytes); cap(*buf) < want {
		*buf = make([]byte, 0, want) // one allocation, not a doubling series
	}
	body := startBatch((*buf)[:0])
	for i, ev := range events {
		mark := len(body)
		if len(members) > 0 {
			body = append(body, ',')
		}
		var err error
		if body, err = appendEnvelopes(body, ev, c.maxContent); err != nil {
			errs[i] = callbacks.Permanent(fmt.Errorf("encode log event %s for Langfuse: %w", ev.ID, err))
			body = body[:mark]
			continue
		}
		if len(members) > 0 && (len(body)+batchTail > c.maxBatchBytes || len(members) == MaxBatchEvents) {
			// Full: send what came before, and start the next batch with
			// this event's envelopes.
			encoded := append([]byte(nil), body[mark+1:]...)
			c.post(ctx, endBatch(body[:mark], len(members)), members, events, errs)
			body, members = append(startBatch(body[:0]), encoded...), nil
		}
		members = append(members, i)
	}
	if len(members) > 0 {
		body = endBatch(body, len(members))
		c.post(ctx, body, members, events, errs)
	}
	*buf = body
	return errs
}

// bodySizeHint is about the size of the batches of events, up to limit:
// each event's raw members twice (trace and generation) and the rest of
// its two envelopes.
func bodySizeHint(events []*logevent.Event, limit int) int {
	n := 64
	for _, ev := range events {
		n += 2*(len(ev.Messages)+len(ev.Response)) + 2048
		if n >= limit {
			return limit + batchTail
		}
	}
	return n
}

// batchTail bounds what endBatch appends.
const batchTail = 96

func startBatch(b []byte) []byte { return append(b, `{"batch":[`...) }

// endBatch closes a batch of events log events (two envelopes each).
func endBatch(b []byte, events int) []byte {
	b = append(b, `],"metadata":{"batch_size":`...)
	b = strconv.AppendInt(b, int64(2*events), 10)
	return append(b, `,"sdk_integration":"sluice","sdk_name":"sluice"}}`...)
}

// post sends one batch and sets the errors of its members.
func (c *Client) post(ctx context.Context, body []byte, members []int, events []*logevent.Event, errs []error) {
	fail := func(err error) {
		for _, i := range members {
			errs[i] = err
		}
	}
	// The body's buffer is reused once the transport is done with it,
	// which it says by closing the body — possibly after Do returns.
	reader := &requestBody{Reader: bytes.NewReader(body), closed: make(chan struct{})}
	defer reader.wait()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, c.url, reader)
	if err != nil {
		reader.Close()
		fail(callbacks.Permanent(fmt.Errorf("Langfuse request: %w", err)))
		return
	}
	req.ContentLength = int64(len(body))
	req.Header.Set("Authorization", c.auth)
	req.Header.Set("Content-Type", "application/json")
	resp, err := c.http.Do(req)
	if err != nil {
		fail(fmt.Errorf("Langfuse ingestion: %w", err))
		return
	}
	defer resp.Body.Close()
	if resp.StatusCode/100 != 2 {
		fail(callbacks.ResponseError("Langfuse", resp))
		return
	}
	answer := c.answers.get()
	defer c.answers.put(answer)
	refused, err := readErrors(io.LimitReader(resp.Body, maxAnswerBytes), answer)
	if err != nil {
		if resp.StatusCode == http.StatusMultiStatus {
			// A 207 says some envelopes may have failed, but not which:
			// send them all again (Langfuse deduplicates the others).
			fail(fmt.Errorf("Langfuse ingestion answered 207 with an unreadable body: %w", err))
		}
		return
	}
	if len(refused) == 0 {
		return
	}
	byEnvelope := make(map[string]int, 2*len(members))
	for _, i := range members {
		byEnvelope[traceEnvelopeID(events[i])] = i
		byEnvelope[generationEnvelopeID(events[i])] = i
	}
	for _, e := range refused {
		i, ok := byEnvelope[e.ID]
		if !ok || errs[i] != nil && callbacks.IsPermanent(errs[i]) {
			continue
		}
		msg := e.Message
		if msg == "" {
			msg = string(e.Error)
		}
		errs[i] = callbacks.ClassifyStatus(e.Status, &callbacks.StatusError{Destination: "Langfuse", Status: e.Status,
			Message: fmt.Sprintf("envelope %s: %s", e.ID, msg)})
	}
}

// requestBody is a request body that tells when the transport has closed
// it: RoundTrip may close a request's body after it returns.
type requestBody struct {
	*bytes.Reader
	once   sync.Once
	closed chan struct{}
}

func (b *requestBody) Close() error {
	b.once.Do(func() { close(b.closed) })
	return nil
}

func (b *requestBody) wait() { <-b.closed }

// readErrors reads the errors of Langfuse's answer,
// {"successes":[{id, status}, ...], "errors":[{id, status, message, error}, ...]},
// skipping its successes (two per log event) without decoding them. The
// answer is read into buf, which keeps what it grew to.
func readErrors(r io.Reader, buf *[]byte) ([]IngestionError, error) {
	read := bytes.NewBuffer((*buf)[:0])
	_, err := read.ReadFrom(r)
	answer := read.Bytes()
	*buf = answer
	if err != nil {
		return nil, err
	}
	if !jsonscan.Valid(answer) {
		return nil, errors.New("not JSON")
	}
	var refused []IngestionError
	err = jsonscan.Members(answer, func(name, v []byte) error {
		if string(name) != "errors" || jsonscan.Null(v) {
			return nil
		}
		return json.Unmarshal(v, &refused)
	})
	return refused, err
}
