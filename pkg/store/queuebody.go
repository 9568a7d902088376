package store

import (
	"encoding/base64"
	"fmt"
	"unicode/utf8"
)

// Queue bodies are bytes; SQS bodies are text (a subset of Unicode, at least
// one character). Both sides of that seam — the AWS queue adapter sending
// and receiving, and the Lambda edge turning an SQS event's records back
// into Messages — use this one codec: a body SQS can carry travels as it is
// (the usual JSON); any other is carried base64-encoded, or as one space
// when empty, with QueueEncodingAttribute saying so.

// QueueEncodingAttribute is the SQS message attribute that marks a body not
// carried as it is: "base64" or "empty".
const QueueEncodingAttribute = "sluice-encoding"

// Values of QueueEncodingAttribute.
const (
	queueEncodingBase64 = "base64"
	queueEncodingEmpty  = "empty"
)

// EncodeQueueBody renders b as an SQS message body. encoding is the value of
// QueueEncodingAttribute to send with it, "" when none is needed.
func EncodeQueueBody(b []byte) (body, encoding string) {
	switch {
	case len(b) == 0:
		return " ", queueEncodingEmpty
	case sqsText(b):
		return string(b), ""
	}
	return base64.StdEncoding.EncodeToString(b), queueEncodingBase64
}

// DecodeQueueBody reads back what EncodeQueueBody made: an SQS message body
// and the value of its QueueEncodingAttribute ("" when absent).
func DecodeQueueBody(body, encoding string) ([]byte, error) {
	switch encoding {
	case "":
		return []byte(body), nil
	case queueEncodingEmpty:
		return []byte{}, nil
	case queueEncodingBase64:
		b, err := base64.StdEncoding.DecodeString(body)
		if err != nil {
			return nil, fmt.Errorf("bad base64 queue body: %w", err)
		}
		return b, nil
	}
	return nil, fmt.Errorf("unknown %s %q", QueueEncodingAttribute, encoding)
}

// sqsText reports whether SQS accepts b as a message body: UTF-8 with only
// the characters XML 1.0 allows.
func sqsText(b []byte) bool {
	if !utf8.Valid(b) {
		return false
	}
	for _, r := range string(b) {
		switch {
		case r == 0x9, r == 0xA, r == 0xD:
		case r >= 0x20 && r <= 0xD7FF:
		case r >= 0xE000 && r <= 0xFFFD:
		case r >= 0x10000 && r <= 0x10FFFF:
		default:
			return false
		}
	}
	return true
}
