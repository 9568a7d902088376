package bedrock

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net/http"
	"slices"
	"time"
	"unicode/utf8"

	"github.com/aws/aws-sdk-go-v2/aws/protocol/eventstream"

	"github.com/sluice-gateway/sluice/pkg/api"
	"github.com/sluice-gateway/sluice/pkg/jsonscan"
	"github.com/sluice-gateway/sluice/pkg/models"
	"github.com/sluice-gateway/sluice/pkg/oai"
)

// Bounds of a ConverseStream answer.
const (
	// MaxStreamFrame is the largest event-stream message read: a
	// ConverseStream event is a delta, a few hundred bytes; a longer one
	// ends the stream with an error rather than grow a buffer.
	MaxStreamFrame = 1 << 20
	// maxContentBlocks bounds the content blocks of one answer whose kind
	// is remembered.
	maxContentBlocks = 1 << 12
)

// AWS event-stream framing: a prelude of total length, headers length and
// the prelude's CRC; headers; payload; the message's CRC.
const (
	preludeLen = 12
	minFrame   = preludeLen + 4
)

// frame is one decoded event-stream message; its payload is valid until
// the next read.
type frame struct {
	messageType string // event, exception or error
	eventType   string // messageStart, contentBlockDelta, …
	exception   string // :exception-type
	errorCode   string // :error-code (message type error)
	errorText   string // :error-message
	payload     []byte
}

// frameReader reads an AWS event stream message by message: it frames each
// by its length prelude within MaxStreamFrame, then decodes it (headers,
// payload, both CRCs) with the AWS SDK's decoder. Its buffers are reused.
type frameReader struct {
	r       io.Reader
	dec     *eventstream.Decoder
	buf     []byte
	payload []byte
	br      bytes.Reader
}

// A stream that ended inside a message, or before its answer was complete.
var (
	errCut    = errors.New("bedrock: the event stream ended inside a message")
	errNoStop = errors.New("bedrock: the event stream ended before its messageStop event")
)

// next reads the next message: io.EOF at the end of the stream between
// messages.
func (f *frameReader) next() (frame, error) {
	if cap(f.buf) < preludeLen {
		f.buf = make([]byte, 0, 1024)
	}
	f.buf = f.buf[:preludeLen]
	if _, err := io.ReadFull(f.r, f.buf); err != nil {
		if err == io.ErrUnexpectedEOF {
			err = errCut
		}
		return frame{}, err
	}
	total := binary.BigEndian.Uint32(f.buf)
	headers := binary.BigEndian.Uint32(f.buf[4:])
	if total < minFrame || total > MaxStreamFrame || headers > total-minFrame {
		return frame{}, api.Upstream(nil, "The provider sent an event-stream message of %d bytes (headers %d); sluice reads messages of up to %d bytes.", total, headers, MaxStreamFrame)
	}
	f.buf = slices.Grow(f.buf, int(total)-len(f.buf))[:total]
	if _, err := io.ReadFull(f.r, f.buf[preludeLen:]); err != nil {
		if err == io.EOF || err == io.ErrUnexpectedEOF {
			err = errCut
		}
		return frame{}, err
	}
	f.br.Reset(f.buf)
	msg, err := f.dec.Decode(&f.br, f.payload[:0])
	if err != nil {
		return frame{}, fmt.Errorf("bedrock: decode an event-stream message: %w", err)
	}
	f.payload = msg.Payload
	header := func(name string) string {
		if v := msg.Headers.Get(name); v != nil {
			return v.String()
		}
		return ""
	}
	return frame{
		messageType: header(":message-type"), eventType: header(":event-type"),
		exception: header(":exception-type"), errorCode: header(":error-code"), errorText: header(":error-message"),
		payload: msg.Payload,
	}, nil
}

// eventReader reads an event stream's events, for both streamed actions
// (ConverseStream, InvokeModelWithResponseStream): an exception or error
// message is an error, a message of a later protocol's type is skipped,
// and the first message can be read ahead (prime).
type eventReader struct {
	frameReader
	pending *frame // the first message, read before the answer was handed over
}

func newEventReader(body io.Reader) eventReader {
	return eventReader{frameReader: frameReader{r: body, dec: eventstream.NewDecoder()}}
}

// prime reads the first message before the answer is handed over, so that
// an exception Bedrock sends first (a throttle, an overloaded model) is a
// *models.ProviderError the router can retry, not a stream that failed.
// action names the call in its errors.
func (e *eventReader) prime(action string) error {
	f, err := e.frameReader.next()
	switch {
	case err == io.EOF:
		return &models.ProviderError{Provider: Name, Status: http.StatusOK, Message: "answered " + action + " with an empty event stream"}
	case err != nil:
		var ae *api.Error
		if errors.As(err, &ae) {
			return &models.ProviderError{Provider: Name, Status: http.StatusOK, Message: ae.Message}
		}
		return err
	}
	switch f.messageType {
	case "exception":
		return &models.ProviderError{Provider: Name, Status: exceptionStatus(f.exception, f.payload), Code: f.exception, Message: exceptionMessage(f.payload)}
	case "error":
		return &models.ProviderError{Provider: Name, Status: http.StatusInternalServerError, Code: f.errorCode, Message: f.errorText}
	}
	e.pending = &f
	return nil
}

// next returns the next event: io.EOF at the end of the stream between
// messages; an exception or error message as the stream's error
// (streamError).
func (e *eventReader) next() (frame, error) {
	for {
		var f frame
		if e.pending != nil {
			f, e.pending = *e.pending, nil
		} else {
			var err error
			if f, err = e.frameReader.next(); err != nil {
				return frame{}, err
			}
		}
		switch f.messageType {
		case "event":
			return f, nil
		case "exception":
			return frame{}, streamError(f.exception, exceptionStatus(f.exception, f.payload), exceptionMessage(f.payload))
		case "error":
			return frame{}, streamError(f.errorCode, http.StatusInternalServerError, f.errorText)
		}
		// A message type of a later protocol: nothing to read.
	}
}

// converseStream translates a ConverseStream answer into OpenAI chunk
// events, one provider event per call of next: messageStart → the role
// chunk; contentBlockStart (a tool use) → a tool call's first delta;
// contentBlockDelta → text, reasoning_content or tool-call argument deltas;
// messageStop → the finish chunk; metadata → the usage chunk and [DONE];
// an exception → an *api.Error.
type converseStream struct {
	frames   eventReader
	w        *oai.ChunkWriter
	jsonMode bool

	role     bool   // the role chunk went out
	calls    int    // tool calls started
	blocks   []int  // by contentBlockIndex: its tool call + 1, jsonBlock, or 0 (text, reasoning)
	jsonUsed bool   // the response format's tool was called
	finish   string // from messageStop; "" before
	usage    oai.Usage
	hasUsage bool
	ended    bool
}

// jsonBlock marks the content block of the response format's tool call,
// whose input deltas are the answer's content.
const jsonBlock = -1

func newConverseStream(body io.Reader, model string, jsonMode bool) *converseStream {
	return &converseStream{
		frames:   newEventReader(body),
		w:        oai.NewChunkWriter(oai.NewChatID(), model, time.Now().Unix()),
		jsonMode: jsonMode,
	}
}

// prime reads the first message ahead (eventReader.prime).
func (s *converseStream) prime() error { return s.frames.prime("ConverseStream") }

// next appends the output of the next provider event to dst.
func (s *converseStream) next(dst []byte) ([]byte, error) {
	if s.ended {
		return dst, io.EOF
	}
	f, err := s.frames.next()
	if err == io.EOF {
		return s.end(dst)
	} else if err != nil {
		return dst, err
	}
	out, err := s.event(dst, &f)
	if err == io.EOF {
		s.ended = true
	}
	return out, err
}

// end is the event stream's end without metadata after messageStop (the
// usage chunk is left out: the chat endpoint estimates), or before
// messageStop: a stream cut short.
func (s *converseStream) end(dst []byte) ([]byte, error) {
	s.ended = true
	if s.finish == "" {
		return dst, errNoStop
	}
	return s.w.Done(dst), io.EOF
}

func (s *converseStream) event(dst []byte, f *frame) ([]byte, error) {
	var err error
	switch f.eventType {
	case "messageStart":
		dst = s.roleChunk(dst)
	case "contentBlockStart":
		dst, err = s.blockStart(dst, f.payload)
	case "contentBlockDelta":
		dst, err = s.blockDelta(dst, f.payload)
	case "messageStop":
		return s.messageStop(dst, f.payload)
	case "metadata":
		return s.metadata(dst, f.payload)
	}
	// contentBlockStop, and events of later versions, say nothing.
	if err != nil {
		return dst, api.Upstream(err, "The provider sent a %s event sluice cannot read.", f.eventType)
	}
	return dst, nil
}

func (s *converseStream) roleChunk(dst []byte) []byte {
	if s.role {
		return dst
	}
	s.role = true
	return s.w.Role(dst, 0)
}

// blockEvent reads contentBlockIndex and the member named from an event.
func blockEvent(payload []byte, member string) (index int, value []byte, err error) {
	index = -1
	err = jsonscan.Members(payload, func(name, v []byte) error {
		switch string(name) {
		case "contentBlockIndex":
			n, ok := jsonscan.Count(v)
			if !ok || n >= maxContentBlocks {
				return fmt.Errorf("contentBlockIndex %.20s", v)
			}
			index = int(n)
		case member:
			value = v
		}
		return nil
	})
	if err == nil && index < 0 {
		err = errors.New("no contentBlockIndex")
	}
	return index, value, err
}

// blockStart opens a tool call: {"start":{"toolUse":{"toolUseId","name"}},
// "contentBlockIndex":n}.
func (s *converseStream) blockStart(dst []byte, payload []byte) ([]byte, error) {
	index, start, err := blockEvent(payload, "start")
	if err != nil || jsonscan.Null(start) {
		return dst, err
	}
	var use []byte
	if err := jsonscan.Members(start, func(name, v []byte) error {
		if string(name) == "toolUse" {
			use = v
		}
		return nil
	}); err != nil || jsonscan.Null(use) {
		return dst, err
	}
	c, err := toolCall(use)
	if err != nil {
		return dst, err
	}
	dst = s.roleChunk(dst)
	for len(s.blocks) <= index {
		s.blocks = append(s.blocks, 0)
	}
	if s.jsonMode && c.Function.Name == ResponseFormatTool && !s.jsonUsed {
		s.jsonUsed = true
		s.blocks[index] = jsonBlock
		return dst, nil
	}
	s.calls++
	s.blocks[index] = s.calls
	return s.w.Choice(dst, &oai.ChunkChoice{Delta: oai.Delta{ToolCalls: []oai.ToolCallDelta{{
		Index: s.calls - 1, ID: c.ID, Type: "function", Name: c.Function.Name,
	}}}}), nil
}

// blockDelta translates {"delta":{"text"|"toolUse":{"input"}|
// "reasoningContent":{"text"|"signature"|"redactedContent"}},
// "contentBlockIndex":n}.
func (s *converseStream) blockDelta(dst []byte, payload []byte) ([]byte, error) {
	index, delta, err := blockEvent(payload, "delta")
	if err != nil || jsonscan.Null(delta) {
		return dst, err
	}
	dst = s.roleChunk(dst)
	err = jsonscan.Members(delta, func(name, v []byte) error {
		switch string(name) {
		case "text":
			if !validLiteral(v) {
				return errors.New("text is not a JSON string")
			}
			if len(v) > 2 {
				dst = s.w.Text(dst, 0, v)
			}
		case "toolUse":
			return jsonscan.Members(v, func(name, v []byte) error {
				if string(name) != "input" {
					return nil
				}
				return s.toolInput(&dst, index, v)
			})
		case "reasoningContent":
			// The signature and redacted thinking have no place in a
			// chunk; the text is reasoning_content.
			return jsonscan.Members(v, func(name, v []byte) error {
				if string(name) != "text" {
					return nil
				}
				if !validLiteral(v) {
					return errors.New("reasoning text is not a JSON string")
				}
				if len(v) > 2 {
					dst = s.w.Reasoning(dst, 0, v)
				}
				return nil
			})
		}
		return nil
	})
	return dst, err
}

// toolInput appends a piece of a tool call's input (a JSON string literal
// holding part of the JSON text): the response format's input is content,
// copied as it is; a tool call's is its arguments.
func (s *converseStream) toolInput(dst *[]byte, index int, lit []byte) error {
	if index >= len(s.blocks) || s.blocks[index] == 0 {
		return fmt.Errorf("tool input for content block %d, which started no tool use", index)
	}
	if !validLiteral(lit) {
		return errors.New("tool input is not a JSON string")
	}
	if len(lit) == 2 {
		return nil
	}
	if s.blocks[index] == jsonBlock {
		*dst = s.w.Text(*dst, 0, lit)
		return nil
	}
	args, err := jsonscan.String(lit)
	if err != nil {
		return err
	}
	*dst = s.w.Choice(*dst, &oai.ChunkChoice{Delta: oai.Delta{ToolCalls: []oai.ToolCallDelta{{Index: s.blocks[index] - 1, Arguments: args}}}})
	return nil
}

// messageStop ({"stopReason", "additionalModelResponseFields"}) finishes
// the choice; with the usage already known the stream ends here.
func (s *converseStream) messageStop(dst []byte, payload []byte) ([]byte, error) {
	var stop string
	err := jsonscan.Members(payload, func(name, v []byte) error {
		if string(name) == "stopReason" {
			var err error
			stop, err = jsonscan.String(v)
			return err
		}
		return nil
	})
	if err != nil {
		return dst, api.Upstream(err, "The provider sent a messageStop event sluice cannot read.")
	}
	s.finish = finishReason(stop)
	if s.jsonUsed && s.calls == 0 && s.finish == oai.FinishToolCalls {
		s.finish = oai.FinishStop
	}
	dst = s.roleChunk(dst)
	dst = s.w.Finish(dst, 0, s.finish)
	if s.hasUsage {
		return s.w.End(dst, &s.usage), io.EOF
	}
	return dst, nil
}

// metadata ({"usage", "metrics", "trace"}) is the stream's last event: the
// usage chunk and [DONE].
func (s *converseStream) metadata(dst []byte, payload []byte) ([]byte, error) {
	var raw []byte
	err := jsonscan.Members(payload, func(name, v []byte) error {
		if string(name) == "usage" {
			raw = v
		}
		return nil
	})
	if err == nil && !jsonscan.Null(raw) {
		s.usage, err = parseUsage(raw)
		s.hasUsage = err == nil
	}
	if err != nil {
		return dst, api.Upstream(err, "The provider sent a metadata event sluice cannot read.")
	}
	if s.finish == "" {
		return dst, nil // messageStop is still to come
	}
	var u *oai.Usage
	if s.hasUsage {
		u = &s.usage
	}
	return s.w.End(dst, u), io.EOF
}

// exceptionMessage is an exception's {"message": …}.
func exceptionMessage(payload []byte) string {
	var msg string
	jsonscan.Members(payload, func(name, v []byte) error {
		if string(name) == "message" {
			msg, _ = jsonscan.String(v)
		}
		return nil
	})
	return msg
}

// exceptionStatus is the HTTP status Bedrock gives an exception sent in a
// stream; a modelStreamErrorException says the model's own.
func exceptionStatus(kind string, payload []byte) int {
	switch kind {
	case "throttlingException", "serviceQuotaExceededException", "modelNotReadyException":
		return http.StatusTooManyRequests
	case "validationException":
		return http.StatusBadRequest
	case "accessDeniedException":
		return http.StatusForbidden
	case "modelTimeoutException":
		return http.StatusRequestTimeout
	case "serviceUnavailableException":
		return http.StatusServiceUnavailable
	case "modelStreamErrorException":
		var status int64
		jsonscan.Members(payload, func(name, v []byte) error {
			if string(name) == "originalStatusCode" {
				status, _ = jsonscan.Count(v)
			}
			return nil
		})
		if status >= 400 && status <= 599 {
			return int(status)
		}
	}
	return http.StatusInternalServerError // internalServerException, modelErrorException, …
}

// streamError is an exception in the middle of a stream, as the OpenAI
// error event that ends it.
func streamError(kind string, status int, msg string) *api.Error {
	if msg == "" {
		msg = "no message"
	}
	switch {
	case status == http.StatusTooManyRequests:
		return api.RateLimited(api.TypeRequests, 0, "The provider is rate limiting the model (%s: %s); retry later.", kind, msg)
	case status >= 400 && status < 500:
		return &api.Error{Status: status, Type: api.TypeInvalidRequest, Code: "provider_error", Message: fmt.Sprintf("The provider refused the request (%s): %s", kind, msg)}
	}
	return api.Upstream(nil, "The provider reported an error (%s): %s", kind, msg)
}

// validLiteral reports whether lit is one JSON string literal, valid as the
// JSON standard has it: literals are copied into chunks as they are, so a
// malformed one (a raw control character, an unknown escape, invalid
// UTF-8), which the scanner skips, must not pass into the client's stream.
func validLiteral(lit []byte) bool {
	if len(lit) < 2 || lit[0] != '"' || lit[len(lit)-1] != '"' {
		return false
	}
	ascii := true
	in := lit[1 : len(lit)-1]
	for i := 0; i < len(in); i++ {
		switch c := in[i]; {
		case c < 0x20, c == '"':
			return false
		case c >= utf8.RuneSelf:
			ascii = false
		case c == '\\':
			if i+1 >= len(in) {
				return false
			}
			i++
			switch in[i] {
			case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
			case 'u':
				if i+4 >= len(in) {
					return false
				}
				for _, h := range in[i+1 : i+5] {
					if !isHex(h) {
						return false
					}
				}
				i += 4
			default:
				return false
			}
		}
	}
	return ascii || utf8.Valid(in)
}

func isHex(c byte) bool {
	return c >= '0' && c <= '9' || c >= 'a' && c <= 'f' || c >= 'A' && c <= 'F'
}

// parseUsage reads Converse's TokenUsage (ConverseUsage.OpenAI) from a
// metadata event.
func parseUsage(raw []byte) (oai.Usage, error) {
	var u ConverseUsage
	if !u.Decode(raw) || !jsonscan.NonNegative(u.Fields()) {
		return oai.Usage{}, errors.New("usage: a token count is not a count")
	}
	return u.OpenAI(), nil
}

// toolCall reads a contentBlockStart's toolUse ({toolUseId, name, input})
// as an OpenAI tool call, its input as the JSON text of the arguments.
func toolCall(v []byte) (oai.ToolCall, error) {
	c := oai.ToolCall{Type: "function"}
	var input []byte
	err := jsonscan.Members(v, func(name, v []byte) error {
		var err error
		switch string(name) {
		case "toolUseId":
			c.ID, err = jsonscan.String(v)
		case "name":
			c.Function.Name, err = jsonscan.String(v)
		case "input":
			input = v
		}
		return err
	})
	if err != nil {
		return c, fmt.Errorf("toolUse: %w", err)
	}
	c.Function.Arguments, err = compactInput(input)
	return c, err
}
