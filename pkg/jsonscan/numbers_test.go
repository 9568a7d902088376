package jsonscan

import (
	"encoding/json"
	"math"
	"testing"
)

func TestAppendFloatMatchesEncodingJSON(t *testing.T) {
	for _, f := range []float64{0, 1, -1, 0.1, 0.0021, 1e-6, 9.99e-7, 1e-7, -3e-9, 1.5e-10, 1e20, 1e21, 123456789012345678901234.0, math.MaxFloat64, math.SmallestNonzeroFloat64, 1.0 / 3} {
		want, _ := json.Marshal(f)
		if got := AppendFloat(nil, f, 64); string(got) != string(want) {
			t.Errorf("float64 %v: %s, want %s", f, got, want)
		}
		f32 := float32(f)
		if math.IsInf(float64(f32), 0) {
			continue
		}
		want, _ = json.Marshal(f32)
		if got := AppendFloat(nil, float64(f32), 32); string(got) != string(want) {
			t.Errorf("float32 %v: %s, want %s", f32, got, want)
		}
	}
}

func FuzzAppendFloat(f *testing.F) {
	f.Add(uint64(0x3e7ad7f29abcaf48)) // 1e-7
	f.Add(uint64(0x4415af1d78b58c40)) // 1e20
	f.Fuzz(func(t *testing.T, bits uint64) {
		v := math.Float64frombits(bits)
		if math.IsNaN(v) || math.IsInf(v, 0) {
			return
		}
		want, _ := json.Marshal(v)
		if got := AppendFloat(nil, v, 64); string(got) != string(want) {
			t.Fatalf("float64 %v: %s, want %s", v, got, want)
		}
		v32 := float32(v)
		if math.IsInf(float64(v32), 0) {
			return
		}
		want, _ = json.Marshal(v32)
		if got := AppendFloat(nil, float64(v32), 32); string(got) != string(want) {
			t.Fatalf("float32 %v: %s, want %s", v32, got, want)
		}
	})
}
