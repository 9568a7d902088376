package oai

import (
	"io"

	"github.com/sluice-gateway/sluice/pkg/sse"
)

// ChunkStream is the body of a translated stream: a pull reader that asks
// its source for one provider event's output at a time (OpenAI chunk
// events, already in the wire format) and hands it out, so that each Read
// returns what one provider event produced and the call layer flushes it to
// the client as it arrives. Memory is one event's output, reused: it does
// not grow with the stream.
//
// An error from the source is returned once the bytes before it are read.
// An *api.Error names the failure (a provider's in-band error event): the
// call layer writes it as the stream's final OpenAI error event; any other
// error reads as the provider's answer cut off.
type ChunkStream struct {
	next   func(dst []byte) ([]byte, error)
	closer io.Closer
	buf    []byte
	off    int
	err    error
}

// maxKeptOutput is the largest output buffer a ChunkStream keeps between
// events; one a rare large event grew beyond it is let go.
const maxKeptOutput = 64 << 10

// NewChunkStream returns the stream whose next provider event's output next
// appends to dst (and returns). next returns io.EOF after the last output
// (with it, or on a call of its own); output with an error is read before
// the error. closer (nil: none) is closed by Close: the provider's body.
func NewChunkStream(next func(dst []byte) ([]byte, error), closer io.Closer) *ChunkStream {
	return &ChunkStream{next: next, closer: closer}
}

// Read returns what is left of the current event's output, or the next
// event's.
func (s *ChunkStream) Read(p []byte) (int, error) {
	for s.off >= len(s.buf) {
		if s.err != nil {
			return 0, s.err
		}
		if cap(s.buf) > maxKeptOutput {
			s.buf = nil
		}
		s.buf, s.err = s.next(s.buf[:0])
		s.off = 0
	}
	n := copy(p, s.buf[s.off:])
	s.off += n
	return n, nil
}

// Close closes the provider's body.
func (s *ChunkStream) Close() error {
	if s.closer == nil {
		return nil
	}
	return s.closer.Close()
}

// StreamTranslator turns a provider's server-sent events into OpenAI chunk
// events (see NewSSEStream).
type StreamTranslator interface {
	// Event appends the output of one provider event to dst: zero or more
	// chunk events. It returns io.EOF after the provider's last event (its
	// own end marker: Anthropic's message_stop, …); End follows.
	Event(dst []byte, ev sse.Event) ([]byte, error)
	// End appends what ends the stream — the finish chunks not yet sent,
	// the usage chunk, data: [DONE] — or, when the provider's stream
	// stopped before it was complete, returns the error saying so.
	End(dst []byte) ([]byte, error)
}

// NewSSEStream returns the ChunkStream translating the provider's event
// stream body (read with sse.Reader within lim) through t. A failure to
// read the provider's stream (cut, over a limit, the connection) is
// returned as it is, after the output before it.
func NewSSEStream(body io.ReadCloser, lim sse.Limits, t StreamTranslator) *ChunkStream {
	rd := sse.NewReader(body, lim)
	ended := false
	return NewChunkStream(func(dst []byte) ([]byte, error) {
		if ended {
			return dst, io.EOF
		}
		ev, err := rd.Next()
		switch {
		case err == io.EOF:
			ended = true
			out, err := t.End(dst)
			if err == nil {
				err = io.EOF
			}
			return out, err
		case err != nil:
			return dst, err
		}
		out, err := t.Event(dst, ev)
		if err == io.EOF {
			ended = true
			out, err = t.End(out)
			if err == nil {
				err = io.EOF
			}
		}
		return out, err
	}, body)
}
