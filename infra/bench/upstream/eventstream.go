package main

import (
	"bytes"
	"encoding/base64"
	"fmt"

	"github.com/aws/aws-sdk-go-v2/aws/protocol/eventstream"
)

// eventStreamContentType is the media type of an AWS event stream.
const eventStreamContentType = "application/vnd.amazon.eventstream"

// eventFrame encodes one AWS event-stream message of message type "event":
// a prelude (total length, headers length), its CRC32, the headers
// (:event-type, :content-type, :message-type), the payload, and the CRC32 of
// everything before it.
func eventFrame(eventType string, payload []byte) ([]byte, error) {
	msg := eventstream.Message{
		Headers: eventstream.Headers{
			{Name: ":event-type", Value: eventstream.StringValue(eventType)},
			{Name: ":content-type", Value: eventstream.StringValue("application/json")},
			{Name: ":message-type", Value: eventstream.StringValue("event")},
		},
		Payload: payload,
	}
	var buf bytes.Buffer
	if err := eventstream.NewEncoder().Encode(&buf, msg); err != nil {
		return nil, fmt.Errorf("encode %s event: %w", eventType, err)
	}
	return buf.Bytes(), nil
}

// chunkFrame wraps a model's own JSON event the way InvokeModelWithResponseStream
// does: a "chunk" event whose payload is {"bytes":"<base64 of the JSON>"}.
func chunkFrame(inner []byte) ([]byte, error) {
	p := make([]byte, 0, base64.StdEncoding.EncodedLen(len(inner))+32)
	p = append(p, `{"bytes":"`...)
	p = base64.StdEncoding.AppendEncode(p, inner)
	p = append(p, `","p":"abcdefghijkl"}`...)
	return eventFrame("chunk", p)
}

// mustFrame is for frames built at start-up from constant input, which
// cannot fail to encode into memory.
func mustFrame(b []byte, err error) []byte {
	if err != nil {
		panic(err)
	}
	return b
}
