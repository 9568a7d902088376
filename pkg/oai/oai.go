// Package oai holds OpenAI's API shapes that sluice reads and writes: the
// request types of the model endpoints with their parsers, and the one Usage
// type every answer's token counts come in. Provider packages and endpoints
// both import it; it imports nothing of sluice's but the error edge and the
// JSON scanner.
//
// The parsers read only the few top-level members sluice needs and keep the
// body as bytes, so a request can be forwarded as it came (with only its
// model rewritten) instead of being decoded and re-encoded.
package oai

// Embedding encodings, as OpenAI names them.
const (
	EncodingFloat  = "float"
	EncodingBase64 = "base64" // base64 of the little-endian float32 values
)
