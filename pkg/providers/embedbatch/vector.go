package embedbatch

import (
	"encoding/base64"
	"encoding/binary"
	"encoding/json"
	"errors"
	"math"
	"slices"
	"strconv"

	"github.com/sluice-gateway/sluice/pkg/jsonscan"
	"github.com/sluice-gateway/sluice/pkg/oai"
)

// appendItems appends the OpenAI data items of one batch's vectors — the
// first at index start — each preceded by a comma unless it is the very
// first item of the answer.
func appendItems(dst []byte, start int, vectors []json.RawMessage, out Output) ([]byte, error) {
	// Size the output once instead of by doubling: floats copy the
	// provider's text; base64 takes 5.3 bytes a value where the text took
	// about 10–20, so half the text is a generous guess.
	size := 0
	for _, raw := range vectors {
		if out.Encoding == oai.EncodingBase64 {
			size += len(raw)/2 + 64
		} else {
			size += len(raw) + 64
		}
	}
	dst = slices.Grow(dst, size)
	var scratch []byte // float32 bytes of one vector, reused across the batch
	for j, raw := range vectors {
		index := start + j
		if index > 0 {
			dst = append(dst, ',')
		}
		dst = append(dst, `{"object":"embedding","index":`...)
		dst = strconv.AppendInt(dst, int64(index), 10)
		dst = append(dst, `,"embedding":`...)
		var (
			n   int
			err error
		)
		dst, n, scratch, err = AppendVector(dst, raw, out.Encoding, scratch)
		if err != nil {
			return nil, Malformed(out.Provider, "embedding %d: %v", index, err)
		}
		if out.Dimensions > 0 && n != out.Dimensions {
			return nil, Malformed(out.Provider, "embedding %d has %d dimensions, not the %d asked for", index, n, out.Dimensions)
		}
		dst = append(dst, '}')
	}
	return dst, nil
}

// Errors of AppendVector.
var (
	errNotArray  = errors.New("embedding is not a JSON array")
	errNotNumber = errors.New("embedding holds a value that is not a number")
	errEmpty     = errors.New("embedding is empty")
	errRange     = errors.New("embedding holds a value outside float32's range")
)

// AppendVector appends raw, a JSON array of numbers, to dst in encoding:
// for oai.EncodingFloat the numbers as the provider wrote them (each
// checked to be a JSON number; never decoded), for oai.EncodingBase64
// the base64 of their little-endian float32 values, as OpenAI encodes it.
// It returns the number of values. scratch is a reusable buffer for the
// float32 bytes (nil is fine) and is returned for the next call.
func AppendVector(dst, raw []byte, encoding string, scratch []byte) (out []byte, n int, scr []byte, err error) {
	b64 := encoding == oai.EncodingBase64
	mark := len(dst)
	fail := func(err error) ([]byte, int, []byte, error) { return dst[:mark], 0, scratch, err }
	i := jsonscan.SkipSpace(raw, 0)
	if i >= len(raw) || raw[i] != '[' {
		return fail(errNotArray)
	}
	i = jsonscan.SkipSpace(raw, i+1)
	if b64 {
		scratch = scratch[:0]
	} else {
		dst = append(dst, '[')
	}
	if i < len(raw) && raw[i] == ']' {
		return fail(errEmpty)
	}
	for {
		j := jsonscan.NumberEnd(raw, i)
		if j < 0 {
			return fail(errNotNumber)
		}
		tok := raw[i:j]
		if b64 {
			// string(tok) does not escape (strconv clones what its errors
			// keep), so this allocates nothing.
			f, err := strconv.ParseFloat(string(tok), 32)
			if err != nil {
				return fail(errRange)
			}
			scratch = binary.LittleEndian.AppendUint32(scratch, math.Float32bits(float32(f)))
		} else {
			if n > 0 {
				dst = append(dst, ',')
			}
			dst = append(dst, tok...)
		}
		n++
		i = jsonscan.SkipSpace(raw, j)
		if i >= len(raw) {
			return fail(errNotArray)
		}
		if raw[i] == ']' {
			if jsonscan.SkipSpace(raw, i+1) != len(raw) {
				return fail(errNotArray)
			}
			break
		}
		if raw[i] != ',' {
			return fail(errNotNumber)
		}
		i = jsonscan.SkipSpace(raw, i+1)
	}
	if b64 {
		dst = append(dst, '"')
		dst = base64.StdEncoding.AppendEncode(dst, scratch)
		dst = append(dst, '"')
	} else {
		dst = append(dst, ']')
	}
	return dst, n, scratch, nil
}
