package embedbatch

import (
	"bytes"
	"encoding/base64"
	"encoding/binary"
	"encoding/json"
	"errors"
	"math"
	"math/bits"
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
	// provider's text; base64 takes 16 bytes for every 3 values, and a
	// vector has one value more than commas (a quick count, exact for
	// every well-formed vector).
	size := 0
	for _, raw := range vectors {
		if out.Encoding == oai.EncodingBase64 {
			size += base64.StdEncoding.EncodedLen(4*(bytes.Count(raw, []byte{','})+1)) + 64
		} else {
			size += len(raw) + 64
		}
	}
	dst = slices.Grow(dst, size)
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
		dst, n, err = AppendVector(dst, raw, out.Encoding)
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
// It returns the number of values.
func AppendVector(dst, raw []byte, encoding string) (out []byte, n int, err error) {
	b64 := encoding == oai.EncodingBase64
	mark := len(dst)
	fail := func(err error) ([]byte, int, error) { return dst[:mark], 0, err }
	i := jsonscan.SkipSpace(raw, 0)
	if i >= len(raw) || raw[i] != '[' {
		return fail(errNotArray)
	}
	i = jsonscan.SkipSpace(raw, i+1)
	// For base64, the float32 bytes are encoded straight into dst a group
	// at a time: a group is a multiple of 3 bytes, so the groups' base64
	// concatenated is the whole vector's, with no buffer for all of it.
	var (
		group [48 * 4]byte
		g     int
	)
	if b64 {
		dst = append(dst, '"')
	} else {
		dst = append(dst, '[')
	}
	if i < len(raw) && raw[i] == ']' {
		return fail(errEmpty)
	}
	for {
		var j int
		if b64 {
			f, end, ok := shortFloat32(raw, i)
			if !ok {
				var err error
				f, end, err = float32At(raw, i)
				switch {
				case end < 0:
					return fail(errNotNumber)
				case err != nil:
					return fail(errRange)
				}
			}
			binary.LittleEndian.PutUint32(group[g:], math.Float32bits(f))
			if g += 4; g == len(group) {
				dst = appendBase64(dst, group[:])
				g = 0
			}
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
		// The usual separator, a comma with no space after it, skips the
		// space scans below (a byte above ' ' is no JSON space).
		if j+1 < len(raw) && raw[j] == ',' && raw[j+1] > ' ' {
			i = j + 1
			continue
		}
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
		dst = appendBase64(dst, group[:g])
		dst = append(dst, '"')
	} else {
		dst = append(dst, ']')
	}
	return dst, n, nil
}

// float32At reads the JSON number at raw[i] as strconv.ParseFloat(s, 32)
// reads it, correctly rounded, and returns the index just past it: end < 0
// when no JSON number starts there, err when it is outside float32's range.
//
// It is the translation's hot path (a vector is 1536 of them), so it reads
// the digits once, checking the grammar as it goes — a provider's fraction
// eight digits at a time — and converts the usual provider number (at most
// 18 significant digits, a power of ten within 10^±22) with one float64
// multiplication. A positive power is exact in float64, so the product is
// the number rounded once; a negative one is not, so the product is within
// 2 units of the float64's last place of the number. Rounding the product
// to float32 rounds the number itself unless a point halfway between two
// float32s lies within that distance: those few, and every other number,
// are left to strconv.
func float32At(raw []byte, i int) (f float32, end int, err error) {
	if f, end, ok := shortFloat32(raw, i); ok {
		return f, end, nil
	}
	start := i
	neg := i < len(raw) && raw[i] == '-'
	if neg {
		i++
	}
	var (
		mant  uint64
		exp   int // mant × 10^exp is the number
		exact = true
	)
	switch {
	case i < len(raw) && raw[i] == '0':
		i++
	case i < len(raw) && raw[i] >= '1' && raw[i] <= '9':
		for ; i < len(raw) && isDigit(raw[i]); i++ {
			mant, exact = addDigit(mant, exact, raw[i])
		}
	default:
		return 0, -1, nil
	}
	if i < len(raw) && raw[i] == '.' {
		i++
		first := i
		for mant < 1e10 && len(raw)-i >= 8 {
			v := binary.LittleEndian.Uint64(raw[i:])
			if !eightDigits(v) {
				break
			}
			mant = mant*1e8 + eightDigitsValue(v)
			exp -= 8
			i += 8
		}
		for ; i < len(raw) && isDigit(raw[i]); i++ {
			exp--
			mant, exact = addDigit(mant, exact, raw[i])
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
		for ; i < len(raw) && isDigit(raw[i]); i++ {
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
	if exact {
		if f, ok := float32Of(mant, exp, neg); ok {
			return f, i, nil
		}
	}
	// string(...) does not escape (strconv clones what its errors keep).
	v, err := strconv.ParseFloat(string(raw[start:i]), 32)
	return float32(v), i, err
}

// shortFloat32 is float32At for the number providers write most,
// -?0\.[0-9]{1,15} with no exponent, read from two 8-byte loads, when one
// multiplication decides it (see float32At); ok is false for any other
// number, zero, or less than 18 bytes left, which float32At's digit-by-digit
// reader then takes. Fifteen digits are always exact in mant. AppendVector
// calls it first: it is most of the translation's time.
func shortFloat32(raw []byte, i int) (f float32, end int, ok bool) {
	neg := i < len(raw) && raw[i] == '-'
	if neg {
		i++
	}
	if len(raw)-i < 18 || raw[i] != '0' || raw[i+1] != '.' {
		return 0, 0, false
	}
	i += 2
	v := binary.LittleEndian.Uint64(raw[i:])
	k := leadingDigits(v)
	var mant uint64
	switch {
	case k == 0:
		return 0, 0, false
	case k < 8:
		mant = digitsValue(v, k)
	default:
		w := binary.LittleEndian.Uint64(raw[i+8:])
		k2 := leadingDigits(w)
		if k2 == 8 {
			return 0, 0, false
		}
		mant = eightDigitsValue(v)*uint64pow10[k2] + digitsValue(w, k2)
		k += k2
	}
	i += k
	if raw[i]|0x20 == 'e' || mant == 0 { // e or E: an exponent follows
		return 0, 0, false
	}
	// As float32Of, for a negative power: below 1e14, so under float32's
	// largest.
	d := float64(mant) * float64negpow10[k]
	if d < 0x1p-126 || math.Float64bits(d)&(1<<29-1)-(1<<28-4) <= 8 {
		return 0, 0, false
	}
	if f = float32(d); neg {
		f = -f
	}
	return f, i, true
}

// float32Of is mant × 10^exp (negated when neg) correctly rounded to
// float32 when one float64 multiplication can tell (see float32At); ok is
// false when it cannot.
func float32Of(mant uint64, exp int, neg bool) (float32, bool) {
	if mant >= 1<<53 || exp < -22 || exp > 22 {
		return 0, false
	}
	if mant == 0 {
		if neg {
			return float32(math.Copysign(0, -1)), true
		}
		return 0, true
	}
	d := float64(mant)
	// In float32's normal range, the float32s' halfway points are the
	// float64s whose 29 fraction bits float32 drops are exactly 1000…0;
	// the product must be clear of them by more than its error.
	var margin uint64 // in units of the float64's last place
	if exp < 0 {
		d *= float64negpow10[-exp]
		margin = 4 // twice the error
	} else {
		d *= float64pow10[exp]
	}
	if d < 0x1p-126 || d > math.MaxFloat32 || math.Float64bits(d)&(1<<29-1)-(1<<28-margin) <= 2*margin {
		return 0, false
	}
	f := float32(d)
	if neg {
		f = -f
	}
	return f, true
}

// leadingDigits is how many of the 8 bytes of v (little-endian: the first
// byte in the low one) are ASCII digits before the first that is not. A
// byte's carry or borrow only reaches the bytes after it, so the bytes
// before the first non-digit are judged right.
func leadingDigits(v uint64) int {
	nd := ((v & 0xF0F0F0F0F0F0F0F0) | (((v + 0x0606060606060606) & 0xF0F0F0F0F0F0F0F0) >> 4)) ^ 0x3333333333333333
	return bits.TrailingZeros64(nd) >> 3
}

// digitsValue is the number the first k (1 to 8) ASCII digits of v spell:
// they are shifted to the top, the bytes after them to nothing.
func digitsValue(v uint64, k int) uint64 {
	return combineDigits((v - 0x3030303030303030) << (8 * (8 - k)))
}

func isDigit(c byte) bool { return c-'0' < 10 }

// eightDigits reports whether the 8 bytes of v (little-endian) are all
// ASCII digits: each byte's high nibble is 3, and stays 3 after adding 6.
func eightDigits(v uint64) bool {
	return (v&0xF0F0F0F0F0F0F0F0)|(((v+0x0606060606060606)&0xF0F0F0F0F0F0F0F0)>>4) == 0x3333333333333333
}

// eightDigitsValue is the number the 8 ASCII digits of v (little-endian:
// the first digit in the low byte) spell, combined pairwise in three
// multiplications.
func eightDigitsValue(v uint64) uint64 { return combineDigits(v - 0x3030303030303030) }

// combineDigits is the number 8 bytes of digit values 0–9 spell (the
// first in the low byte), combined pairwise in three multiplications.
func combineDigits(v uint64) uint64 {
	v = v*10 + v>>8
	return ((v&0x000000FF000000FF)*(100+1000000<<32) + (v>>16&0x000000FF000000FF)*(1+10000<<32)) >> 32
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

// addDigit appends the decimal digit c to mant while it has room (a
// leading zero costs none); a digit it cannot hold makes it inexact.
func addDigit(mant uint64, exact bool, c byte) (uint64, bool) {
	if mant < 1e18 {
		return mant*10 + uint64(c-'0'), exact
	}
	return mant, false
}

// uint64pow10 are the powers of ten a fraction's second word may add.
var uint64pow10 = [...]uint64{1, 1e1, 1e2, 1e3, 1e4, 1e5, 1e6, 1e7}

// float64pow10 are the powers of ten float64 holds exactly.
var float64pow10 = [...]float64{1e0, 1e1, 1e2, 1e3, 1e4, 1e5, 1e6, 1e7, 1e8, 1e9, 1e10, 1e11,
	1e12, 1e13, 1e14, 1e15, 1e16, 1e17, 1e18, 1e19, 1e20, 1e21, 1e22}

// float64negpow10 are the float64s nearest the powers of ten 10^-k, each
// within half a unit in its last place.
var float64negpow10 = [...]float64{1e0, 1e-1, 1e-2, 1e-3, 1e-4, 1e-5, 1e-6, 1e-7, 1e-8, 1e-9, 1e-10, 1e-11,
	1e-12, 1e-13, 1e-14, 1e-15, 1e-16, 1e-17, 1e-18, 1e-19, 1e-20, 1e-21, 1e-22}
