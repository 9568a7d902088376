package bedrock

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"mime"
	"strings"

	"github.com/sluice-gateway/sluice/pkg/models"
	"github.com/sluice-gateway/sluice/pkg/oai"
	"github.com/sluice-gateway/sluice/pkg/providers/anthropic"
	"github.com/sluice-gateway/sluice/pkg/sse"
)

// MessagesVersion is the anthropic_version Bedrock's Claude models take in
// an InvokeModel body.
const MessagesVersion = "bedrock-2023-05-31"

// ActionInvokeStream is InvokeModelWithResponseStream's action.
const ActionInvokeStream = "invoke-with-response-stream"

// Messages serves a Messages call natively when the deployment's model is
// Claude: the client's body with Bedrock's anthropic_version, no model and
// no stream member (the action says it), the anthropic-beta header as
// anthropic_beta, SigV4-signed to InvokeModel — the answer is Anthropic's
// message as it came — or InvokeModelWithResponseStream, whose chunk events
// carry Anthropic's events (base64), relayed as server-sent events. Other
// models are not served natively (false): the router translates the call
// for Converse.
func (e *endpoint) Messages(ctx context.Context, req *models.MessagesRequest) (*models.Answer, bool, error) {
	if e.chat != chatAnthropic {
		return nil, false, nil
	}
	add := [][2]string{{"anthropic_version", `"` + MessagesVersion + `"`}}
	if req.Beta != "" {
		var betas []string
		for _, b := range strings.Split(req.Beta, ",") {
			if b = strings.TrimSpace(b); b != "" {
				betas = append(betas, b)
			}
		}
		raw, err := json.Marshal(betas)
		if err != nil {
			return nil, true, fmt.Errorf("bedrock: encode anthropic_beta: %w", err)
		}
		add = append(add, [2]string{"anthropic_beta", string(raw)})
	}
	body, err := anthropic.MessagesBody(req.Body, "", []string{"stream"}, add...)
	if err != nil {
		return nil, true, err
	}
	if !req.Stream {
		resp, err := e.send(ctx, e.invokeURL, body, "application/json")
		if err != nil {
			return nil, true, err
		}
		if mt, _, _ := mime.ParseMediaType(resp.Header.Get("Content-Type")); mt != "" && mt != "application/json" {
			resp.Body.Close()
			return nil, true, &models.ProviderError{Provider: Name, Status: resp.StatusCode,
				Message: fmt.Sprintf("answered InvokeModel with Content-Type %q, not JSON", mt)}
		}
		return &models.Answer{Body: resp.Body, ContentLength: resp.ContentLength}, true, nil
	}
	resp, err := e.send(ctx, e.base+ModelPath(e.id, ActionInvokeStream), body, EventStreamType)
	if err != nil {
		return nil, true, err
	}
	if mt, _, _ := mime.ParseMediaType(resp.Header.Get("Content-Type")); mt != EventStreamType {
		resp.Body.Close()
		return nil, true, &models.ProviderError{Provider: Name, Status: resp.StatusCode,
			Message: fmt.Sprintf("answered InvokeModelWithResponseStream with Content-Type %q, not an event stream", mt)}
	}
	s := &invokeStream{frames: newEventReader(resp.Body)}
	if err := s.frames.prime("InvokeModelWithResponseStream"); err != nil {
		resp.Body.Close()
		return nil, true, err
	}
	return &models.Answer{Body: oai.NewChunkStream(s.next, resp.Body), ContentLength: -1}, true, nil
}

// invokeStream turns InvokeModelWithResponseStream's chunk events into the
// Anthropic events they carry, one per read: {"bytes": base64 of the
// event's JSON} → event: <its type>, data: <its JSON>. An exception is an
// *api.Error (the stream's error event); a stream ending before
// message_stop is cut.
type invokeStream struct {
	frames  eventReader
	stopped bool
	ended   bool
	raw     []byte // a chunk's decoded bytes, reused
}

func (s *invokeStream) next(dst []byte) ([]byte, error) {
	if s.ended {
		return dst, io.EOF
	}
	f, err := s.frames.next()
	if err == io.EOF {
		s.ended = true
		if !s.stopped {
			return dst, errNoStop
		}
		return dst, io.EOF
	} else if err != nil {
		return dst, err
	}
	if f.eventType != "chunk" {
		return dst, nil
	}
	var c struct {
		Bytes string `json:"bytes"`
	}
	if err := json.Unmarshal(f.payload, &c); err != nil {
		return dst, malformed("a chunk event is not {\"bytes\": …}: %v", err)
	}
	n := base64.StdEncoding.DecodedLen(len(c.Bytes))
	if cap(s.raw) < n {
		s.raw = make([]byte, n)
	}
	k, err := base64.StdEncoding.Decode(s.raw[:n], []byte(c.Bytes))
	if err != nil {
		return dst, malformed("a chunk's bytes are not base64: %v", err)
	}
	ev := s.raw[:k]
	var head struct {
		Type string `json:"type"`
	}
	if err := json.Unmarshal(ev, &head); err != nil || head.Type == "" {
		return dst, malformed("a chunk is not an Anthropic event: %s", ev)
	}
	if head.Type == "message_stop" {
		s.stopped = true
	}
	return sse.AppendEvent(dst, head.Type, ev), nil
}
