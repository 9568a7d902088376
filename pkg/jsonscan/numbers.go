package jsonscan

import (
	"math"
	"strconv"
)

// AppendFloat appends f as encoding/json writes a float of bitSize bits
// (32 or 64): the shortest decimal that reads back as f, in exponent form
// only below 1e-6 or from 1e21 on, with a one-digit negative exponent
// written without its leading zero (1e-7, not 1e-07). f must be finite:
// JSON has no NaN or infinity (encoding/json refuses them).
func AppendFloat(b []byte, f float64, bitSize int) []byte {
	format := byte('f')
	if a := math.Abs(f); a != 0 && (bitSize == 64 && (a < 1e-6 || a >= 1e21) ||
		bitSize == 32 && (float32(a) < 1e-6 || float32(a) >= 1e21)) {
		format = 'e'
	}
	b = strconv.AppendFloat(b, f, format, -1, bitSize)
	if format == 'e' {
		if n := len(b); n >= 4 && b[n-4] == 'e' && b[n-3] == '-' && b[n-2] == '0' {
			b[n-2] = b[n-1]
			b = b[:n-1]
		}
	}
	return b
}
