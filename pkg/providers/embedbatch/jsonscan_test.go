package embedbatch

import (
	"bytes"
	"encoding/json"
	"reflect"
	"strings"
	"testing"
	"time"
)

func members(doc string) (map[string]string, []string, error) {
	got := map[string]string{}
	var order []string
	err := Members([]byte(doc), func(key string, v []byte) error {
		got[key] = string(v)
		order = append(order, key)
		return nil
	})
	return got, order, err
}

func TestMembers(t *testing.T) {
	got, order, err := members(` { "embedding" : [1, 2.5e-3] , "a\"b": "x}]\\", "n": null, "o": {"k": [[], {}]}, "t": true, "n2": -0.5 } `)
	want := map[string]string{"embedding": "[1, 2.5e-3]", `a"b`: `"x}]\\"`, "n": "null", "o": `{"k": [[], {}]}`, "t": "true", "n2": "-0.5"}
	if err != nil || !reflect.DeepEqual(got, want) || len(order) != 6 {
		t.Errorf("%v %v %v", got, order, err)
	}
	if got, _, err := members(`{}`); err != nil || len(got) != 0 {
		t.Errorf("empty: %v %v", got, err)
	}
	for _, bad := range []string{``, `[]`, `{`, `{"a"}`, `{"a":}`, `{"a":1,}`, `{"a":1 "b":2}`, `{"a":[1}`, `{"a":{"b":1]}`, `{"a":"x`, "{\"a\":\"\x01\"}", `{"a":1}x`, `{a:1}`, `{"a":[` + string(bytes.Repeat([]byte("["), maxDepth)) + `]}`} {
		if _, _, err := members(bad); err == nil {
			t.Errorf("%q accepted", bad)
		}
	}
	// Arrays within arrays, strings holding brackets: the flat-array fast
	// path must not be fooled.
	if got, _, err := members(`{"v":[[1],[2,[3]],"x]",{"a":[4]},[ ]],"w":[1, "a]b", [2]]}`); err != nil ||
		got["v"] != `[[1],[2,[3]],"x]",{"a":[4]},[ ]]` || got["w"] != `[1, "a]b", [2]]` {
		t.Errorf("nested: %q %v", got, err)
	}
	// Deep nesting over a long run of numbers stays one pass, not one per level.
	deep := `{"d":` + strings.Repeat("[", maxDepth-1) + strings.Repeat("1,", 1<<20) + "1" + strings.Repeat("]", maxDepth-1) + "}"
	start := time.Now()
	if got, _, err := members(deep); err != nil || len(got["d"]) != len(deep)-6 {
		t.Errorf("deep: %v", err)
	}
	if took := time.Since(start); took > time.Second {
		t.Errorf("a 2 MB document nested %d deep took %v", maxDepth-1, took)
	}
	var elems []string
	if err := Elements([]byte(` [ [1,2] , {"a":"]"}, "s", 3 ] `), func(v []byte) error {
		elems = append(elems, string(v))
		return nil
	}); err != nil || !reflect.DeepEqual(elems, []string{"[1,2]", `{"a":"]"}`, `"s"`, "3"}) {
		t.Errorf("elements %q %v", elems, err)
	}
	for _, tc := range []struct {
		in   string
		n    int64
		okay bool
	}{{"6", 6, true}, {"6.0", 6, true}, {"1e3", 1000, true}, {"-1", 0, false}, {"1.5", 0, false}, {`"6"`, 0, false}, {"null", 0, false}, {"1e300", 0, false}} {
		if n, ok := Count([]byte(tc.in)); n != tc.n || ok != tc.okay {
			t.Errorf("Count(%s) = %d %v", tc.in, n, ok)
		}
	}
}

// FuzzMembers holds the scanner to encoding/json: every object (array)
// encoding/json reads, Members (Elements) reads too, with the same members
// (elements) byte for byte, the last copy of a key winning. The scanner may
// accept more — breakage inside values it only skips — never less.
func FuzzMembers(f *testing.F) {
	for _, s := range []string{`{"embedding":[1,2],"inputTextTokenCount":3}`, `{"a":{"b":[{"c":"\u00e9\"]"}]}}`, `{"a":tru}`, `{"a":1,"a":2}`, `{}`, `[1, [2], {"x":"]"}]`, `{"\u0061":1}`, "{\"\xff\":1}"} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, doc []byte) {
		var want map[string]json.RawMessage
		if json.Unmarshal(doc, &want) == nil && want != nil {
			got := map[string]json.RawMessage{}
			if err := Members(doc, func(key string, v []byte) error { got[key] = v; return nil }); err != nil {
				t.Fatalf("%q refused (%v) though encoding/json reads it", doc, err)
			}
			if !reflect.DeepEqual(got, want) {
				t.Fatalf("%q: members %q, encoding/json %q", doc, got, want)
			}
		}
		var wantElems []json.RawMessage
		if json.Unmarshal(doc, &wantElems) == nil && wantElems != nil {
			var got []json.RawMessage
			if err := Elements(doc, func(v []byte) error { got = append(got, v); return nil }); err != nil {
				t.Fatalf("%q refused (%v) though encoding/json reads it", doc, err)
			}
			if len(got) != len(wantElems) || len(got) > 0 && !reflect.DeepEqual(got, wantElems) {
				t.Fatalf("%q: elements %q, encoding/json %q", doc, got, wantElems)
			}
		}
	})
}
