package logevent

import (
	"encoding/json"
	"math"
	"testing"
)

// FuzzParams holds Params to encoding/json's encoding of the same
// parameters as a map: names in key order, strings with HTML escapes, raw
// values compacted.
func FuzzParams(f *testing.F) {
	f.Add("a<b>&c\u2028", 0.2, int64(50), true, `{ "type" : "function", "function":{"name":"<f>"} }`, "x")
	f.Add("", 1e-9, int64(-5), false, `"none"`, "")
	f.Add("\xff", 1e21, int64(0), true, ``, "\u00e9")
	f.Fuzz(func(t *testing.T, s string, fl float64, n int64, flag bool, raw, stop string) {
		if math.IsNaN(fl) || math.IsInf(fl, 0) {
			return // no parsed request holds one
		}
		var p Params
		p.Bool("a_bool", flag)
		p.Float("b_float", fl)
		p.Int("c_int", n)
		p.Raw("d_raw", []byte(raw))
		p.String("e_string", s)
		p.Strings("f_strings", []string{s, stop})
		p.Strings("g_nil", nil)
		got := p.End()
		rawValue := json.RawMessage(raw)
		if !json.Valid(rawValue) {
			rawValue = json.RawMessage("null")
		}
		want, err := json.Marshal(map[string]any{"a_bool": flag, "b_float": fl, "c_int": n, "d_raw": rawValue,
			"e_string": s, "f_strings": []string{s, stop}, "g_nil": []string(nil)})
		if err != nil {
			t.Fatal(err)
		}
		if string(got) != string(want) {
			t.Fatalf("Params:\n got %s\nwant %s", got, want)
		}
	})
}

func TestParamsNoneIsNil(t *testing.T) {
	var p Params
	if got := p.End(); got != nil {
		t.Errorf("no parameters: %q, want nil (omitted)", got)
	}
}
