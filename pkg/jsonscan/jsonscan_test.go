package jsonscan

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

func members(doc string) (map[string]string, []string, error) {
	got := map[string]string{}
	var order []string
	err := Members([]byte(doc), func(name, v []byte) error {
		got[string(name)] = string(v)
		order = append(order, string(name))
		return nil
	})
	return got, order, err
}

func TestMembers(t *testing.T) {
	got, order, err := members(` { "embedding" : [1, 2.5e-3] , "a\"b": "x}]\\", "n": null, "o": {"k": [[], {}]}, "t": true, "n2": -0.5 } `)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]string{"embedding": "[1, 2.5e-3]", `a"b`: `"x}]\\"`, "n": "null", "o": `{"k": [[], {}]}`, "t": "true", "n2": "-0.5"}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("members (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]string{"embedding", `a"b`, "n", "o", "t", "n2"}, order); diff != "" {
		t.Errorf("order (-want +got):\n%s", diff)
	}
}

func TestMembersOfAnEmptyObject(t *testing.T) {
	if got, _, err := members(` {} `); err != nil || len(got) != 0 {
		t.Errorf("%v %v", got, err)
	}
}

func TestMembersRefusesBrokenStructure(t *testing.T) {
	for _, bad := range []string{``, `[]`, `{`, `{"a"}`, `{"a":}`, `{"a":1,}`, `{"a":1 "b":2}`, `{"a":[1}`, `{"a":{"b":1]}`, `{"a":"x`, "{\"a\":\"\x01\"}", `{"a":1}x`, `{a:1}`, `{"a":"\`,
		`{"a":[` + strings.Repeat("[", MaxDepth) + `]}`} {
		if _, _, err := members(bad); err == nil {
			t.Errorf("%q accepted", bad)
		}
	}
}

func TestMembersAreNotFooledByBracketsInStrings(t *testing.T) {
	// Arrays within arrays, strings holding brackets: the flat-array fast
	// path must not be fooled.
	got, _, err := members(`{"v":[[1],[2,[3]],"x]",{"a":[4]},[ ]],"w":[1, "a]b", [2]]}`)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(map[string]string{"v": `[[1],[2,[3]],"x]",{"a":[4]},[ ]]`, "w": `[1, "a]b", [2]]`}, got); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
}

func TestDeepNestingIsOnePass(t *testing.T) {
	// Deep nesting over a long run of numbers stays one pass, not one per level.
	deep := `{"d":` + strings.Repeat("[", MaxDepth-1) + strings.Repeat("1,", 1<<20) + "1" + strings.Repeat("]", MaxDepth-1) + "}"
	start := time.Now()
	if got, _, err := members(deep); err != nil || len(got["d"]) != len(deep)-6 {
		t.Errorf("deep: %v", err)
	}
	if took := time.Since(start); took > time.Second {
		t.Errorf("a 2 MB document nested %d deep took %v", MaxDepth-1, took)
	}
}

func TestEscapedNamesAreDecoded(t *testing.T) {
	got, _, err := members(`{"\u006dodel":"m","\"q\"":1}`)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(map[string]string{"model": `"m"`, `"q"`: "1"}, got); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
}

func TestElements(t *testing.T) {
	var elems []string
	if err := Elements([]byte(` [ [1,2] , {"a":"]"}, "s", 3 ] `), func(v []byte) error {
		elems = append(elems, string(v))
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]string{"[1,2]", `{"a":"]"}`, `"s"`, "3"}, elems); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
}

func TestSpan(t *testing.T) {
	doc := []byte(`{"input":"x", "model" : "m"}`)
	var start, end int
	Members(doc, func(name, v []byte) error {
		if string(name) == "model" {
			start, end = Span(doc, v)
		}
		return nil
	})
	if string(doc[start:end]) != `"m"` || start != 24 {
		t.Errorf("span %d:%d = %q", start, end, doc[start:end])
	}
}

func TestCount(t *testing.T) {
	for _, tc := range []struct {
		in   string
		n    int64
		okay bool
	}{{"6", 6, true}, {"0", 0, true}, {"6.0", 6, true}, {"1e3", 1000, true}, {"1099511627775", 1<<40 - 1, true},
		{"1099511627776", 0, false}, {"-1", 0, false}, {"1.5", 0, false}, {`"6"`, 0, false}, {"null", 0, false}, {"1e300", 0, false}, {"07", 0, false}} {
		if n, ok := Count([]byte(tc.in)); n != tc.n || ok != tc.okay {
			t.Errorf("Count(%s) = %d %v, want %d %v", tc.in, n, ok, tc.n, tc.okay)
		}
	}
}

func TestString(t *testing.T) {
	for _, tc := range []struct {
		in, want string
		ok       bool
	}{{`"plain"`, "plain", true}, {`"a\nb\u00e9"`, "a\nb\u00e9", true}, {`""`, "", true}, {`"\x"`, "", false}, {"\"a\x01\"", "", false}, {`7`, "", false}, {`"`, "", false}} {
		got, err := String([]byte(tc.in))
		if got != tc.want || (err == nil) != tc.ok {
			t.Errorf("String(%s) = %q %v", tc.in, got, err)
		}
	}
}

// FuzzMembers holds the scanner to encoding/json: every object (array)
// encoding/json reads, Members (Elements) reads too, with the same members
// (elements) byte for byte, the last copy of a name winning. The scanner may
// accept more — breakage inside values it only skips — never less.
func FuzzMembers(f *testing.F) {
	for _, s := range []string{`{"embedding":[1,2],"inputTextTokenCount":3}`, `{"a":{"b":[{"c":"\u00e9\"]"}]}}`, `{"a":tru}`, `{"a":1,"a":2}`, `{}`, `[1, [2], {"x":"]"}]`, `{"\u0061":1}`, "{\"\xff\":1}"} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, doc []byte) {
		var want map[string]json.RawMessage
		if json.Unmarshal(doc, &want) == nil && want != nil {
			got := map[string]json.RawMessage{}
			if err := Members(doc, func(name, v []byte) error { got[string(name)] = v; return nil }); err != nil {
				t.Fatalf("%q refused (%v) though encoding/json reads it", doc, err)
			}
			if diff := cmp.Diff(want, got); diff != "" {
				t.Fatalf("%q: members differ from encoding/json's (-json +scan):\n%s", doc, diff)
			}
			// MembersPrefix reads the same object followed by anything,
			// and ends where it does.
			prefixed := append(append([]byte{}, doc...), `,"x"]`...)
			gotPrefix := map[string]json.RawMessage{}
			end, err := MembersPrefix(prefixed, func(name, v []byte) error { gotPrefix[string(name)] = v; return nil })
			if err != nil || end != len(bytes.TrimRight(doc, " \t\r\n")) {
				t.Fatalf("MembersPrefix(%q) = %d, %v; want %d", prefixed, end, err, len(bytes.TrimRight(doc, " \t\r\n")))
			}
			if diff := cmp.Diff(want, gotPrefix); diff != "" {
				t.Fatalf("%q: MembersPrefix's members differ from encoding/json's (-json +scan):\n%s", doc, diff)
			}
			// So does MembersPrefixChecked, which calls it valid when it is.
			gotChecked := map[string]json.RawMessage{}
			end, valid, err := MembersPrefixChecked(prefixed, func(name, v []byte) error { gotChecked[string(name)] = v; return nil })
			if err != nil || end != len(bytes.TrimRight(doc, " \t\r\n")) || !valid {
				t.Fatalf("MembersPrefixChecked(%q) = %d, %v, %v; want %d, valid", prefixed, end, valid, err, len(bytes.TrimRight(doc, " \t\r\n")))
			}
			if diff := cmp.Diff(want, gotChecked); diff != "" {
				t.Fatalf("%q: MembersPrefixChecked's members differ from encoding/json's (-json +scan):\n%s", doc, diff)
			}
			// So does MembersPrefixBy, its containers crossed by delimit.
			gotBy := map[string]json.RawMessage{}
			end, err = MembersPrefixBy(prefixed, func(name, v []byte) error { gotBy[string(name)] = v; return nil }, delimitContainers)
			if err != nil || end != len(bytes.TrimRight(doc, " \t\r\n")) {
				t.Fatalf("MembersPrefixBy(%q) = %d, %v; want %d", prefixed, end, err, len(bytes.TrimRight(doc, " \t\r\n")))
			}
			if diff := cmp.Diff(want, gotBy); diff != "" {
				t.Fatalf("%q: MembersPrefixBy's members differ from encoding/json's (-json +scan):\n%s", doc, diff)
			}
		}
		var wantElems []json.RawMessage
		if json.Unmarshal(doc, &wantElems) == nil && wantElems != nil {
			var got []json.RawMessage
			if err := Elements(doc, func(v []byte) error { got = append(got, v); return nil }); err != nil {
				t.Fatalf("%q refused (%v) though encoding/json reads it", doc, err)
			}
			if len(got) != len(wantElems) || len(got) > 0 && !cmp.Equal(got, wantElems) {
				t.Fatalf("%q: elements %q, encoding/json %q", doc, got, wantElems)
			}
			var gotPrefix []json.RawMessage
			err := ElementsPrefix(doc, func(rest []byte) (int, error) {
				e, err := ValueEnd(rest, 0)
				gotPrefix = append(gotPrefix, rest[:e])
				return e, err
			})
			if err != nil || !cmp.Equal(got, gotPrefix) {
				t.Fatalf("%q: ElementsPrefix %q (%v), Elements %q", doc, gotPrefix, err, got)
			}
			// ElementsPrefixEnd reads the same array followed by anything,
			// and ends where it does.
			prefixed := append(append([]byte{}, doc...), `,"x"}`...)
			gotPrefix = gotPrefix[:0]
			end, err := ElementsPrefixEnd(prefixed, func(rest []byte) (int, error) {
				e, err := ValueEnd(rest, 0)
				gotPrefix = append(gotPrefix, rest[:e])
				return e, err
			})
			if err != nil || end != len(bytes.TrimRight(doc, " \t\r\n")) || !cmp.Equal(got, gotPrefix) {
				t.Fatalf("ElementsPrefixEnd(%q) = %q, %d, %v; want %q, %d", prefixed, gotPrefix, end, err, got, len(bytes.TrimRight(doc, " \t\r\n")))
			}
		}
	})
}

// FuzzValueEnd holds ValueEnd to encoding/json on values: for any valid JSON
// value followed by anything, ValueEnd finds exactly its end.
func FuzzValueEnd(f *testing.F) {
	for _, s := range []string{`{"a":[1,2]}`, `"x\"y"`, `[[],[[]]]`, `-1.5e3`, `true`, `null`, `{"a":"]"}`} {
		f.Add([]byte(s), []byte(` ,]`))
	}
	f.Fuzz(func(t *testing.T, value, rest []byte) {
		value = bytes.TrimSpace(value)
		if !json.Valid(value) || len(value) == 0 {
			return
		}
		if len(rest) > 0 && (rest[0] >= 'a' && rest[0] <= 'z' || isNumberByte(rest[0])) {
			return // a literal or number runs on into such a byte
		}
		doc := append(append([]byte{}, value...), rest...)
		end, err := ValueEnd(doc, 0)
		if err != nil || end != len(value) {
			t.Fatalf("ValueEnd(%q) = %d, %v; want %d", doc, end, err, len(value))
		}
	})
}

// FuzzString holds String to encoding/json's decoding of string literals.
func FuzzString(f *testing.F) {
	for _, s := range []string{`"a"`, `"\u00e9\n"`, `"\ud800"`, "\"\xff\"", `"\x"`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, lit []byte) {
		if len(bytes.TrimSpace(lit)) != len(lit) {
			return // String takes the exact literal, as Members hands it out
		}
		var want string
		jsonErr := json.Unmarshal(lit, &want)
		got, err := String(lit)
		if (jsonErr == nil) != (err == nil) || got != want {
			t.Fatalf("String(%q) = %q, %v; encoding/json %q, %v", lit, got, err, want, jsonErr)
		}
	})
}

func TestValid(t *testing.T) {
	for _, tc := range []struct {
		doc  string
		want bool
	}{
		{`{"model":"m","input":["a","b"],"n":-1.5e-3,"t":true,"f":false,"z":null,"o":{}}`, true},
		{` [ ] `, true}, {`"x"`, true}, {`0`, true}, {`"\u00e9\n\/"`, true}, {"\"\xff\"", true},
		{``, false}, {` `, false}, {`{`, false}, {`{"a"}`, false}, {`{"a":1,}`, false}, {`[1,]`, false},
		{`{"a":1]`, false}, {`[1}`, false}, {`{"a":tru}`, false}, {`{"a":nul}`, false}, {`01`, false},
		{`1.`, false}, {`-`, false}, {`"\x"`, false}, {`"\u12g4"`, false}, {`"\u12"`, false}, {"\"a\x01\"", false},
		{`{} {}`, false}, {`{1:2}`, false}, {`[1 2]`, false}, {`"abc`, false},
		{strings.Repeat("[", validMaxDepth) + strings.Repeat("]", validMaxDepth), true},
		{strings.Repeat("[", validMaxDepth+1) + strings.Repeat("]", validMaxDepth+1), false},
	} {
		if got := Valid([]byte(tc.doc)); got != tc.want || got != json.Valid([]byte(tc.doc)) {
			t.Errorf("Valid(%.60q) = %v, want %v (json.Valid %v)", tc.doc, got, tc.want, json.Valid([]byte(tc.doc)))
		}
	}
}

// FuzzValid holds Valid to json.Valid on every document.
func FuzzValid(f *testing.F) {
	for _, s := range []string{`{"a":[1,{"b":"\u00e9"}],"c":-0.5e+3}`, `[true,false,null]`, `{"a":"\"]"}`, `{"a":1,}`, `"\ud800"`, "\"\xff\"", `[[[]]]`, ` 1 `} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, doc []byte) {
		if got, want := Valid(doc), json.Valid(doc); got != want {
			t.Fatalf("Valid(%q) = %v, json.Valid %v", doc, got, want)
		}
	})
}

func BenchmarkValid(b *testing.B) {
	doc := []byte(`{"model":"text-embedding-3-small","input":"` + strings.Repeat("Sluice stands in front of hosted model providers. ", 12) + `","encoding_format":"float","dimensions":256,"user":"u-1"}`)
	for _, v := range []struct {
		name  string
		valid func([]byte) bool
	}{{"jsonscan", Valid}, {"encoding_json", json.Valid}} {
		b.Run(v.name, func(b *testing.B) {
			b.SetBytes(int64(len(doc)))
			b.ReportAllocs()
			for b.Loop() {
				if !v.valid(doc) {
					b.Fatal("invalid")
				}
			}
		})
	}
}

func BenchmarkMembersRequest(b *testing.B) {
	doc := []byte(`{"model":"text-embedding-3-small","input":["The food was delicious and the waiter was friendly.","A second text"],"encoding_format":"base64","dimensions":256,"user":"u-1"}`)
	b.SetBytes(int64(len(doc)))
	b.ReportAllocs()
	for b.Loop() {
		n := 0
		if err := Members(doc, func(name, v []byte) error { n += len(v); return nil }); err != nil || n == 0 {
			b.Fatal(err)
		}
	}
}

func BenchmarkValueEndVector(b *testing.B) {
	doc := []byte(`{"embedding":[` + strings.Repeat("-0.0123456789,", 1535) + `0.01],"inputTextTokenCount":8}`)
	b.SetBytes(int64(len(doc)))
	b.ReportAllocs()
	for b.Loop() {
		if err := Members(doc, func(name, v []byte) error { return nil }); err != nil {
			b.Fatal(err)
		}
	}
}

// TestStopBytesFoundAtEveryOffset puts each byte a string's scan must stop
// at (and bytes it must not: high UTF-8 bytes, 0x1f's neighbours) at every
// offset of runs longer than a word — and past shortRun and longRun's
// window — so the word-at-a-time skip and the windowed searches are checked
// at every alignment against a byte-at-a-time search.
func TestStopBytesFoundAtEveryOffset(t *testing.T) {
	// nearEdge keeps the offsets where a scan changes gear: a run's ends,
	// shortRun, and longRun's window after it.
	nearEdge := func(at, n int) bool {
		for _, edge := range []int{0, n, shortRun, shortRun + 512, shortRun + 1024} {
			if at >= edge-17 && at <= edge+17 {
				return true
			}
		}
		return false
	}
	naive := func(b []byte) int {
		for i, c := range b {
			if c == '"' || c == '\\' {
				return i
			}
			if c < 0x20 {
				return -1
			}
		}
		return -1
	}
	var lengths []int
	for _, r := range [][2]int{{0, 24}, {shortRun - 9, shortRun + 17}, {shortRun + 500, shortRun + 530}, {1100, 1105}} {
		for n := r[0]; n < r[1]; n++ {
			lengths = append(lengths, n)
		}
	}
	for _, c := range []byte{'"', '\\', 0x00, 0x1f, 0x20, '!', '#', '[', ']', 0x7f, 0x80, 0xc3, 0xff} {
		for _, n := range lengths {
			for at := 0; at <= n; at++ {
				if !nearEdge(at, n) {
					continue
				}
				b := bytes.Repeat([]byte{'a'}, n)
				if at < n {
					b[at] = c
				}
				if got, want := indexQuoteOrEscape(b), naive(b); got != want {
					t.Fatalf("indexQuoteOrEscape(%q) = %d, want %d", b, got, want)
				}
				lit := append(append([]byte{'"'}, b...), '"')
				got := validStringEnd(lit, 0)
				if want := json.Valid(lit); want != (got == len(lit)) {
					t.Fatalf("validStringEnd(%q) = %d, json.Valid %v", lit, got, want)
				}
				// A member name read as its bytes: plain ASCII up to the
				// closing quote.
				wantPlain := 0
				for j := 1; j < len(lit); j++ {
					if c := lit[j]; c == '"' {
						wantPlain = j + 1
						break
					} else if c < 0x20 || c >= 0x80 || c == '\\' {
						break
					}
				}
				if got := plainNameEnd(lit, 0); got != wantPlain {
					t.Fatalf("plainNameEnd(%q) = %d, want %d", lit, got, wantPlain)
				}
			}
		}
	}
}

// BenchmarkValidChatAnswer validates the bench upstream's chat answer
// (pkg/chat's BenchmarkJSONMeter): short names and values around 800 bytes
// of content.
func BenchmarkValidChatAnswer(b *testing.B) {
	doc := []byte(`{"id":"chatcmpl-1","object":"chat.completion","created":1764000000,"model":"gpt-4o-mini-2024-07-18","choices":[{"index":0,"message":{"role":"assistant","content":"` +
		strings.Repeat("Sluice answers. ", 50) + `","refusal":null,"annotations":[]},"logprobs":null,"finish_reason":"stop"}],"usage":{"prompt_tokens":130,"completion_tokens":200,"total_tokens":330},"system_fingerprint":"fp_1"}`)
	b.SetBytes(int64(len(doc)))
	b.ReportAllocs()
	for b.Loop() {
		if !Valid(doc) {
			b.Fatal("invalid")
		}
	}
}

// FuzzMembersChecked holds MembersChecked to Members (the same members and
// error) and to json.Valid: a document it calls valid is JSON, and a JSON
// object Members reads is called valid.
func FuzzMembersChecked(f *testing.F) {
	for _, s := range []string{`{"a":[1,{"b":"\u00e9"}],"c":-0.5e+3}`, `{"a":tru}`, `{"a":1abc}`, `{"a":"\x"}`, `{"a":[1,}`, `{"a":01}`, `{}`, "{\"\xff\":\"\xfe\"}", ` {"a" : { } } `} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, doc []byte) {
		var want, got []string
		wantErr := Members(doc, func(name, v []byte) error { want = append(want, string(name), string(v)); return nil })
		valid, err := MembersChecked(doc, func(name, v []byte) error { got = append(got, string(name), string(v)); return nil })
		if (err == nil) != (wantErr == nil) || !cmp.Equal(got, want) {
			t.Fatalf("%q: MembersChecked %q, %v; Members %q, %v", doc, got, err, want, wantErr)
		}
		if valid && !json.Valid(doc) {
			t.Fatalf("%q: MembersChecked calls it valid, json.Valid does not", doc)
		}
		if err == nil && !valid && json.Valid(doc) {
			t.Fatalf("%q: JSON, but MembersChecked does not say so", doc)
		}
	})
}

// FuzzMembersCheckedBy holds MembersCheckedBy (and MembersBy, MembersPrefixBy), with a Delimit that walks
// arrays and objects itself (ElementsPrefixEnd, MembersPrefixChecked), to
// Members (the same members and error) and to json.Valid, as
// FuzzMembersChecked holds MembersChecked.
func FuzzMembersCheckedBy(f *testing.F) {
	for _, s := range []string{`{"messages":[{"role":"user","content":"hi"},{"a":[1,{"b":"\u00e9"}]}],"c":-0.5e+3}`, `{"a":[{"b":tru}]}`, `{"a":[1 2]}`, `{"a":[{"b":1},]}`, `{"a":[{"b":"\x"}]}`, `{"a":[]}`, `{"a":{"b":[{}]}}`, "{\"a\":[\"\xff\"]}", ` {"a" : [ { } , 1 ] } `, `{"a":[01]}`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, doc []byte) {
		var want, got []string
		wantErr := Members(doc, func(name, v []byte) error { want = append(want, string(name), string(v)); return nil })
		valid, err := MembersCheckedBy(doc, func(name, v []byte) error { got = append(got, string(name), string(v)); return nil }, delimitContainers)
		if (err == nil) != (wantErr == nil) || !cmp.Equal(got, want) {
			t.Fatalf("%q: MembersCheckedBy %q, %v; Members %q, %v", doc, got, err, want, wantErr)
		}
		if valid && !json.Valid(doc) {
			t.Fatalf("%q: MembersCheckedBy calls it valid, json.Valid does not", doc)
		}
		if err == nil && !valid && json.Valid(doc) {
			t.Fatalf("%q: JSON, but MembersCheckedBy does not say so", doc)
		}
		// MembersBy is the same walk unchecked: the same members and error.
		var by []string
		err = MembersBy(doc, func(name, v []byte) error { by = append(by, string(name), string(v)); return nil }, delimitContainers)
		if (err == nil) != (wantErr == nil) || !cmp.Equal(by, want) {
			t.Fatalf("%q: MembersBy %q, %v; Members %q, %v", doc, by, err, want, wantErr)
		}
		// MembersPrefixBy reads what Members reads, followed by anything,
		// and ends where it does.
		if wantErr == nil {
			prefixed := append(append([]byte{}, doc...), `,"x"]`...)
			by = by[:0]
			end, err := MembersPrefixBy(prefixed, func(name, v []byte) error { by = append(by, string(name), string(v)); return nil }, delimitContainers)
			if trimmed := len(bytes.TrimRight(doc, " \t\r\n")); err != nil || end != trimmed || !cmp.Equal(by, want) {
				t.Fatalf("MembersPrefixBy(%q) = %q, %d, %v; Members %q, end %d", prefixed, by, end, err, want, trimmed)
			}
		}
	})
}

// delimitContainers walks a member's array or object itself, as a caller of
// MembersCheckedBy reading it would: an array's elements one by one
// (objects by MembersPrefixChecked, the rest by ValueEnd and a check), an
// object by MembersPrefixChecked.
func delimitContainers(_, rest []byte) (int, bool) {
	object := func(rest []byte) (int, bool, error) {
		return MembersPrefixChecked(rest, func(name, v []byte) error { return nil })
	}
	switch rest[0] {
	case '{':
		n, valid, err := object(rest)
		if err != nil {
			return 0, false
		}
		return n, valid
	case '[':
		valid := true
		n, err := ElementsPrefixEnd(rest, func(el []byte) (int, error) {
			if el[0] == '{' {
				n, ok, err := object(el)
				valid = valid && ok
				return n, err
			}
			n, err := ValueEnd(el, 0)
			valid = valid && err == nil && validValueEnd(el, 0) == n
			return n, err
		})
		if err != nil {
			return 0, false
		}
		return n, valid
	}
	return 0, false
}

func TestMembersCheckedSaysWhetherValid(t *testing.T) {
	for doc, want := range map[string]bool{
		`{"a":[1,{"b":"\u00e9"}],"c":-0.5e+3,"d":true,"e":null}`: true,
		`{"a":tru}`:   false,
		`{"a":"\x"}`:  false,
		`{"a":[1 2]}`: false,
		`{"a":01}`:    false,
		` {"a":{}} `:  true,
	} {
		valid, err := MembersChecked([]byte(doc), func(name, v []byte) error { return nil })
		if err != nil || valid != want {
			t.Errorf("MembersChecked(%s) = %v, %v; want %v", doc, valid, err, want)
		}
	}
}

// TestPlainRunFindsTheStopByte holds plainRun's word-at-a-time search to a
// byte loop: a quote, a backslash or a control character at every offset of
// the first words, after plain bytes and before others (a borrow from a
// stop byte flags the bytes above it, never one below).
func TestPlainRunFindsTheStopByte(t *testing.T) {
	for _, stop := range []byte{'"', '\\', 0, 0x1f, '\n'} {
		for _, after := range []byte{'a', '"', '\\', 0x01, 0x21, 0xff, 0x80} {
			for at := range shortRun + 10 {
				b := bytes.Repeat([]byte{'x'}, shortRun+20)
				b[at] = stop
				for k := at + 1; k < len(b); k++ {
					b[k] = after
				}
				want := at
				if at >= shortRun {
					want = shortRun // plainRun looks no further
				}
				if got := plainRun(b, 0); got != want {
					t.Fatalf("stop %#x at %d, then %#x: plainRun says %d, want %d", stop, at, after, got, want)
				}
			}
		}
	}
}
