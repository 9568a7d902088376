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
	errNoFloat   = errors.New("embedding holds a number outside float64's range")
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
		// 4 bytes a value; a value takes at least 2 bytes of text ("0,")
		// and a provider's usually 10 or more: a quarter of the text is
		// room for most vectors, and append grows it for the rest.
		scratch = slices.Grow(scratch[:0], len(raw)/2)
	} else {
		dst = append(dst, '[')
	}
	if i < len(raw) && raw[i] == ']' {
		return fail(errEmpty)
	}
	for {
		var j int
		if b64 {
			f, end, err := float32At(raw, i)
			switch {
			case end < 0:
				return fail(errNotNumber)
			case err != nil:
				return fail(errRange)
			}
			scratch = binary.LittleEndian.AppendUint32(scratch, math.Float32bits(f))
			j = end
		} else {
			if j = jsonscan.NumberEnd(raw, i); j < 0 {
				return fail(errNotNumber)
			}
			if mayOverflow(raw[i:j]) {
				// Relayed as written, but not beyond any float: a
				// client's decoder would refuse the whole answer.
				if _, err := strconv.ParseFloat(string(raw[i:j]), 64); err != nil {
					return fail(errNoFloat)
				}
			}
			if n > 0 {
				dst = append(dst, ',')
			}
			dst = append(dst, raw[i:j]...)
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

// float32At reads the JSON number at raw[i] as strconv.ParseFloat(s, 32)
// reads it, correctly rounded, and returns the index just past it: end < 0
// when no JSON number starts there, err when it is outside float32's range.
//
// It is the translation's hot path (a vector is 1536 of them), so it reads
// the digits once, checking the grammar as it goes, and converts the usual
// provider number — at most 19 significant digits, a power of ten within
// 10^±22 — with one exact float64 operation (Clinger's fast path: float64
// holds the digits and the power exactly, so the quotient or product is the
// number rounded once). Rounding that float64 to float32 rounds the number
// itself, unless the float64 fell exactly halfway between two float32s;
// that case, and every other, is left to strconv.
func float32At(raw []byte, i int) (f float32, end int, err error) {
	start := i
	neg := i < len(raw) && raw[i] == '-'
	if neg {
		i++
	}
	var (
		mant   uint64
		digits int // significant digits in mant, at most 19 (it holds them all)
		exp    int // mant × 10^exp is the number
		exact  = true
	)
	switch {
	case i < len(raw) && raw[i] == '0':
		i++
	case i < len(raw) && raw[i] >= '1' && raw[i] <= '9':
		for ; i < len(raw) && raw[i] >= '0' && raw[i] <= '9'; i++ {
			mant, digits, exact = addDigit(mant, digits, exact, raw[i])
		}
	default:
		return 0, -1, nil
	}
	if i < len(raw) && raw[i] == '.' {
		i++
		first := i
		for ; i < len(raw) && raw[i] >= '0' && raw[i] <= '9'; i++ {
			exp--
			mant, digits, exact = addDigit(mant, digits, exact, raw[i])
		}
		if i == first {
			return 0, -1, nil
		}
	}
	if i < len(raw) && (raw[i] == 'e' || raw[i] == 'E') {
		i++
		eneg := i < len(raw) && raw[i] == '-'
		if i < len(raw) && (raw[i] == '+' || raw[i] == '-') {
			i++
		}
		first, e := i, 0
		for ; i < len(raw) && raw[i] >= '0' && raw[i] <= '9'; i++ {
			if e < 1<<20 {
				e = e*10 + int(raw[i]-'0')
			}
		}
		if i == first {
			return 0, -1, nil
		}
		if eneg {
			e = -e
		}
		exp += e
	}
	if exact && mant < 1<<53 && exp >= -22 && exp <= 22 {
		d := float64(mant)
		if exp < 0 {
			d /= float64pow10[-exp]
		} else {
			d *= float64pow10[exp]
		}
		// In float32's normal range, d is halfway between two float32s
		// when the 29 fraction bits float32 drops are exactly 1000…0.
		if d >= 0x1p-126 && d <= math.MaxFloat32 && math.Float64bits(d)&(1<<29-1) != 1<<28 {
			f = float32(d)
			if neg {
				f = -f
			}
			return f, i, nil
		}
	}
	// string(...) does not escape (strconv clones what its errors keep).
	v, err := strconv.ParseFloat(string(raw[start:i]), 32)
	return float32(v), i, err
}

// mayOverflow reports whether num, a JSON number, could lie outside
// float64's range: it has an exponent, or more than 308 digits before its
// point. The numbers of a vector rarely do, so most are not parsed.
func mayOverflow(num []byte) bool {
	intDigits := 0
	for _, c := range num {
		switch {
		case c == 'e' || c == 'E':
			return true
		case c == '.':
			return intDigits > 308
		case c >= '0' && c <= '9':
			intDigits++
		}
	}
	return intDigits > 308
}

// addDigit appends the decimal digit c to mant, a number of digits
// significant digits; a digit mant cannot hold makes it inexact.
func addDigit(mant uint64, digits int, exact bool, c byte) (uint64, int, bool) {
	switch {
	case mant == 0 && c == '0': // a leading zero
	case digits < 19:
		return mant*10 + uint64(c-'0'), digits + 1, exact
	default:
		exact = false
	}
	return mant, digits, exact
}

// float64pow10 are the powers of ten float64 holds exactly.
var float64pow10 = [...]float64{1e0, 1e1, 1e2, 1e3, 1e4, 1e5, 1e6, 1e7, 1e8, 1e9, 1e10, 1e11,
	1e12, 1e13, 1e14, 1e15, 1e16, 1e17, 1e18, 1e19, 1e20, 1e21, 1e22}
