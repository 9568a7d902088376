// Package sse reads and writes server-sent events (the WHATWG HTML
// standard's text/event-stream): the format of OpenAI's, Anthropic's and
// Gemini's streamed answers.
//
// Two readers share one decoder. A Parser is pushed bytes as they go by and
// calls back with each event — what a relay that must not hold the stream
// up needs (the passthrough's usage meter). A Reader pulls events from an
// io.Reader one at a time — what a stream translator needs. Both follow the
// standard: lines end in CRLF, LF or CR; a line starting with ':' is a
// comment; "data" lines accumulate, joined by LF; an empty line dispatches
// the event, unless it has no data; a leading byte-order mark is dropped.
// Both bound what they hold: a line longer than Limits.MaxLine or an event
// carrying more than Limits.MaxEvent of data is never buffered whole.
package sse

import (
	"bytes"
	"errors"
	"fmt"
	"io"
)

// Default limits.
const (
	DefaultMaxLine  = 1 << 20
	DefaultMaxEvent = 4 << 20
)

// Errors of a stream.
var (
	// ErrTooLarge: a line or an event was over its limit. A Parser skips
	// the event; a Reader returns this error.
	ErrTooLarge = errors.New("sse: line or event over its limit")
	// ErrTruncated: the stream ended inside an event (no empty line after
	// its last field). It wraps io.ErrUnexpectedEOF.
	ErrTruncated = fmt.Errorf("sse: stream ended inside an event: %w", io.ErrUnexpectedEOF)
)

// Limits bound what a Parser or Reader holds. Zero values take the defaults.
type Limits struct {
	// MaxLine is the longest line, its terminator excluded.
	MaxLine int
	// MaxEvent is the most data one event may carry (its data lines
	// joined).
	MaxEvent int
}

func (l Limits) withDefaults() Limits {
	if l.MaxLine <= 0 {
		l.MaxLine = DefaultMaxLine
	}
	if l.MaxEvent <= 0 {
		l.MaxEvent = DefaultMaxEvent
	}
	return l
}

// Event is one dispatched event. Its slices belong to the Parser or Reader
// that produced it and are valid until the next call into it.
type Event struct {
	// Type is the event field; empty means the default type, "message".
	Type []byte
	// Data is the data lines joined by LF.
	Data []byte
	// ID is the last event id the stream set (it carries over to later
	// events, as the standard says).
	ID []byte
}

// decoder is the standard's line and field processing, shared by Parser and
// Reader.
type decoder struct {
	lim Limits

	line     []byte // a line begun in an earlier chunk
	lineOver bool   // the line in progress is over MaxLine: skip to its end
	cr       bool   // the last line ended with CR: a LF next is part of its break
	started  bool   // the first line (and its byte-order mark) is behind

	typ       []byte
	data      []byte
	hasData   bool
	id        []byte
	pending   bool // a field since the last dispatch: ending now cuts an event
	eventOver bool // this event is over a limit: drop it

	// emit receives each event (a Parser's); without it, the event is kept
	// in ev and feed stops right after it (a Reader's).
	emit    func(Event)
	ev      Event
	got     bool
	dropped int
}

var bom = []byte("\xef\xbb\xbf")

// feed processes p and returns how many bytes it consumed: all of them,
// unless dispatch asked to stop.
func (d *decoder) feed(p []byte) int {
	total := len(p)
	for len(p) > 0 {
		if d.cr {
			d.cr = false
			if p[0] == '\n' {
				p = p[1:]
				continue
			}
		}
		i := bytes.IndexByte(p, '\n')
		scope := p
		if i >= 0 {
			scope = p[:i]
		}
		if j := bytes.IndexByte(scope, '\r'); j >= 0 {
			i = j
			d.cr = true
		}
		if i < 0 {
			d.partial(p)
			return total
		}
		line := p[:i]
		p = p[i+1:]
		if len(d.line) > 0 || d.lineOver {
			d.partial(line)
			line = d.line
		}
		over := d.lineOver || len(line) > d.lim.MaxLine
		d.line, d.lineOver = d.line[:0], false
		if over {
			d.skipLine()
			continue
		}
		if !d.process(line) {
			return total - len(p)
		}
	}
	return total
}

// partial keeps the start of a line whose end is in a later chunk.
func (d *decoder) partial(p []byte) {
	if d.lineOver {
		return
	}
	if len(d.line)+len(p) > d.lim.MaxLine {
		d.line, d.lineOver = d.line[:0], true
		return
	}
	d.line = append(d.line, p...)
}

// skipLine accounts for a line dropped for its length: it may have been a
// data line, so its event is incomplete and is dropped too.
func (d *decoder) skipLine() {
	d.started = true
	d.pending, d.eventOver = true, true
}

// process handles one line; it returns false when dispatch asked to stop.
func (d *decoder) process(line []byte) bool {
	if !d.started {
		d.started = true
		line = bytes.TrimPrefix(line, bom)
	}
	if len(line) == 0 {
		return d.end()
	}
	if line[0] == ':' {
		return true // a comment
	}
	field, value := line, []byte(nil)
	if k := bytes.IndexByte(line, ':'); k >= 0 {
		field, value = line[:k], line[k+1:]
		if len(value) > 0 && value[0] == ' ' {
			value = value[1:]
		}
	}
	switch string(field) {
	case "data":
		d.pending = true
		if d.eventOver {
			return true
		}
		n := len(d.data) + len(value)
		if d.hasData {
			n++
		}
		if n > d.lim.MaxEvent {
			d.eventOver = true
			return true
		}
		if d.data == nil {
			d.data = make([]byte, 0, min(max(len(value), 512), d.lim.MaxEvent)) // most events fit: one allocation
		}
		if d.hasData {
			d.data = append(d.data, '\n')
		}
		d.data = append(d.data, value...)
		d.hasData = true
	case "event":
		d.pending = true
		if d.typ == nil {
			d.typ = make([]byte, 0, max(len(value), 32))
		}
		d.typ = append(d.typ[:0], value...)
	case "id":
		d.pending = true
		if bytes.IndexByte(value, 0) < 0 {
			d.id = append(d.id[:0], value...)
		}
	case "retry":
		d.pending = true // a reconnection hint: nothing to a reader of one stream
	}
	return true
}

// end dispatches the event the fields so far make, as an empty line does.
func (d *decoder) end() bool {
	ok := true
	switch {
	case d.eventOver:
		d.dropped++
	case d.hasData && d.emit != nil:
		d.emit(Event{Type: d.typ, Data: d.data, ID: d.id})
	case d.hasData:
		d.ev, d.got, ok = Event{Type: d.typ, Data: d.data, ID: d.id}, true, false
	}
	d.typ, d.data = d.typ[:0], d.data[:0]
	d.hasData, d.pending, d.eventOver = false, false, false
	return ok
}

// cut reports whether the stream, ending now, ends inside an event.
func (d *decoder) cut() bool {
	if d.lineOver {
		return true
	}
	if len(d.line) > 0 {
		line := d.line
		if !d.started {
			line = bytes.TrimPrefix(line, bom)
		}
		if len(line) > 0 && line[0] != ':' {
			return true
		}
	}
	return d.pending
}

// Parser is a push decoder: Write it the stream's bytes as they arrive, in
// chunks of any size, and it calls back with each event.
type Parser struct {
	d decoder
}

// NewParser returns a Parser calling emit with each event. emit must not
// keep the event's slices.
func NewParser(lim Limits, emit func(Event)) *Parser {
	p := &Parser{}
	p.d.lim, p.d.emit = lim.withDefaults(), emit
	return p
}

// Write decodes b. It never fails: an event over a limit is skipped (see
// Dropped), and decoding goes on at the next one.
func (p *Parser) Write(b []byte) (int, error) {
	p.d.feed(b)
	return len(b), nil
}

// End ends the stream. When it ended inside an event, the fields read so
// far (the last line too, unterminated) are dispatched — a metering caller
// would rather count a cut stream's last complete event than lose it — and
// ErrTruncated is returned.
func (p *Parser) End() error {
	if !p.d.cut() {
		return nil
	}
	switch {
	case p.d.lineOver:
		p.d.skipLine()
	case len(p.d.line) > 0:
		line := append([]byte(nil), p.d.line...)
		p.d.line = p.d.line[:0]
		p.d.process(line)
	}
	p.d.lineOver = false
	p.d.end()
	return ErrTruncated
}

// Dropped is the number of events skipped for being over a limit.
func (p *Parser) Dropped() int { return p.d.dropped }

// readSize is how much a Reader asks of its source at once.
const readSize = 32 << 10

// Reader is a pull decoder over an io.Reader.
type Reader struct {
	src    io.Reader
	d      decoder
	buf    []byte
	off, n int
	ev     Event
	got    bool
	srcErr error // the source's error, returned once the bytes before it are decoded
	err    error // what Next returns from now on
	empty  int   // reads in a row that returned nothing
}

// NewReader returns a Reader of the stream r.
func NewReader(r io.Reader, lim Limits) *Reader {
	rd := &Reader{src: r}
	rd.d.lim = lim.withDefaults()
	return rd
}

// Next returns the next event. At the end of the stream it returns io.EOF,
// or ErrTruncated when the stream ended inside an event; an event over a
// limit is ErrTooLarge; a failing source's error is returned as it is. After
// an error, Next keeps returning it.
func (r *Reader) Next() (Event, error) {
	if r.err != nil {
		return Event{}, r.err
	}
	for {
		if r.off < r.n {
			dropped := r.d.dropped
			r.off += r.d.feed(r.buf[r.off:r.n])
			if r.d.dropped > dropped {
				r.err = ErrTooLarge
				return Event{}, r.err
			}
			if r.d.got {
				r.d.got = false
				return r.d.ev, nil
			}
			continue
		}
		err := r.srcErr
		if err == nil {
			if r.buf == nil {
				r.buf = make([]byte, readSize)
			}
			var n int
			n, err = r.src.Read(r.buf)
			r.off, r.n = 0, n
			if n > 0 {
				r.srcErr, r.empty = err, 0
				continue
			}
		}
		switch {
		case err == io.EOF:
			r.err = io.EOF
			if r.d.cut() {
				r.err = ErrTruncated
			}
			return Event{}, r.err
		case err != nil:
			r.err = err
			return Event{}, err
		}
		if r.empty++; r.empty == maxEmptyReads {
			r.err = io.ErrNoProgress
			return Event{}, r.err
		}
	}
}

// maxEmptyReads is how many reads returning nothing, and no error, a
// Reader tolerates in a row (bufio's bound).
const maxEmptyReads = 100

// AppendEvent appends an event in the wire format: its type when not empty,
// its data as one data line per line of data, and the empty line that
// dispatches it.
func AppendEvent(dst []byte, typ string, data []byte) []byte {
	if typ != "" {
		dst = append(dst, "event: "...)
		dst = append(dst, typ...)
		dst = append(dst, '\n')
	}
	for {
		i := bytes.IndexAny(data, "\r\n")
		if i < 0 {
			break
		}
		dst = append(dst, "data: "...)
		dst = append(dst, data[:i]...)
		dst = append(dst, '\n')
		if data[i] == '\r' && i+1 < len(data) && data[i+1] == '\n' {
			i++
		}
		data = data[i+1:]
	}
	dst = append(dst, "data: "...)
	dst = append(dst, data...)
	return append(dst, '\n', '\n')
}
