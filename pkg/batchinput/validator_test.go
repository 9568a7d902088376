package batchinput

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
	"testing"
)

const good = `{"custom_id":"r1","method":"POST","url":"/v1/embeddings","body":{"model":"m","input":"hi"}}`

func TestValidate(t *testing.T) {
	long := `{"custom_id":"` + strings.Repeat("x", 200) + `","method":"POST","url":"/v1/embeddings","body":{}}`
	for _, tc := range []struct {
		name  string
		file  string
		opts  Options
		lines int
		line  int    // want a *LineError on this line
		has   string // ... whose reason contains this
		limit Limit  // or a *LimitError
		none  bool   // or ErrNoRequests
	}{
		{name: "one line", file: good, lines: 1},
		{name: "trailing newline", file: good + "\n", lines: 1},
		{name: "crlf", file: good + "\r\n" + good + "\r\n", lines: 2},
		{name: "bom", file: "\xEF\xBB\xBF" + good + "\n", lines: 1},
		{name: "trailing blank lines forgiven", file: good + "\n\n  \n\t\n", lines: 1},
		{name: "blank line inside", file: good + "\n\n" + good, line: 2, has: "empty"},
		{name: "leading blank line", file: " \n" + good, line: 1, has: "empty"},
		{name: "all chat endpoints", file: strings.Join([]string{
			`{"custom_id":"a","method":"POST","url":"/v1/chat/completions","body":{}}`,
			`{"custom_id":"b","method":"POST","url":"/v1/completions","body":{}}`,
			`{"custom_id":"c","method":"POST","url":"/v1/responses","body":{}}`,
			`{"custom_id":"d","method":"POST","url":"/v1/moderations","body":{}}`,
		}, "\n"), lines: 4},
		{name: "escaped key and value", file: `{"custom\u005fid":"r\"1","method":"P\u004fST","url":"/v1/embeddings","body":{"x":"}"}}`, lines: 1},
		{name: "whitespace around members", file: " { \"custom_id\" : \"a\" , \"method\" : \"POST\" , \"url\" : \"/v1/embeddings\" , \"body\" : { } } ", lines: 1},
		{name: "extra members allowed", file: `{"custom_id":"a","method":"POST","url":"/v1/embeddings","body":{},"x":[1,{"y":"]"}]}`, lines: 1},
		{name: "not json", file: good + "\n{nope}", line: 2, has: "not valid JSON"},
		{name: "truncated json", file: `{"custom_id":"a"`, line: 1, has: "not valid JSON"},
		{name: "array", file: `[1,2]`, line: 1, has: "must be a JSON object"},
		{name: "missing custom_id", file: `{"method":"POST","url":"/v1/embeddings","body":{}}`, line: 1, has: "missing 'custom_id'"},
		{name: "numeric custom_id", file: `{"custom_id":7,"method":"POST","url":"/v1/embeddings","body":{}}`, line: 1, has: "'custom_id' must be a string, got a number"},
		{name: "null custom_id", file: `{"custom_id":null,"method":"POST","url":"/v1/embeddings","body":{}}`, line: 1, has: "got null"},
		{name: "empty custom_id", file: `{"custom_id":"","method":"POST","url":"/v1/embeddings","body":{}}`, line: 1, has: "must not be empty"},
		{name: "case matters", file: `{"Custom_ID":"a","method":"POST","url":"/v1/embeddings","body":{}}`, line: 1, has: "missing 'custom_id'"},
		{name: "missing method", file: `{"custom_id":"a","url":"/v1/embeddings","body":{}}`, line: 1, has: "missing 'method'"},
		{name: "GET", file: `{"custom_id":"a","method":"GET","url":"/v1/embeddings","body":{}}`, line: 1, has: `'method' must be "POST", got "GET"`},
		{name: "lowercase post", file: `{"custom_id":"a","method":"post","url":"/v1/embeddings","body":{}}`, line: 1, has: `got "post"`},
		{name: "missing url", file: `{"custom_id":"a","method":"POST","body":{}}`, line: 1, has: "missing 'url'"},
		{name: "unknown url", file: `{"custom_id":"a","method":"POST","url":"/v1/images/generations","body":{}}`, line: 1, has: `got "/v1/images/generations"`},
		{name: "url not a string", file: `{"custom_id":"a","method":"POST","url":["/v1/embeddings"],"body":{}}`, line: 1, has: "'url' must be a string, got an array"},
		{name: "missing body", file: `{"custom_id":"a","method":"POST","url":"/v1/embeddings"}`, line: 1, has: "missing 'body'"},
		{name: "body string", file: `{"custom_id":"a","method":"POST","url":"/v1/embeddings","body":"{}"}`, line: 1, has: "'body' must be a JSON object, got a string"},
		{name: "last duplicate wins", file: `{"custom_id":"a","method":"POST","method":"PUT","url":"/v1/embeddings","body":{}}`, line: 1, has: `got "PUT"`},
		{name: "third line bad", file: good + "\n" + good + "\n" + `{"custom_id":"a"}` + "\n" + good, line: 3, has: "missing 'method'"},
		{name: "line too long", file: good + "\n" + long, opts: Options{MaxLineBytes: 100}, line: 2, has: "longer than 100 bytes"},
		{name: "too many lines", file: good + "\n" + good + "\n" + good, opts: Options{MaxLines: 2}, limit: LimitLines},
		{name: "too many bytes", file: good + "\n" + good, opts: Options{MaxBytes: int64(len(good)) + 5}, limit: LimitBytes},
		{name: "empty", file: "", none: true},
		{name: "blank only", file: "\n \n", none: true},
	} {
		for _, chunk := range []int{0, 1, 7} {
			t.Run(fmt.Sprintf("%s/chunk=%d", tc.name, chunk), func(t *testing.T) {
				var r io.Reader = strings.NewReader(tc.file)
				if chunk > 0 {
					r = &chunkReader{data: []byte(tc.file), n: chunk}
				}
				n, err := Validate(r, tc.opts)
				var le *LineError
				var lim *LimitError
				switch {
				case tc.line != 0:
					if !errors.As(err, &le) || le.Line != tc.line || !strings.Contains(le.Reason, tc.has) {
						t.Fatalf("err = %v; want line %d containing %q", err, tc.line, tc.has)
					}
				case tc.limit != "":
					if !errors.As(err, &lim) || lim.Limit != tc.limit {
						t.Fatalf("err = %v; want limit %s", err, tc.limit)
					}
				case tc.none:
					if !errors.Is(err, ErrNoRequests) {
						t.Fatalf("err = %v; want ErrNoRequests", err)
					}
				default:
					if err != nil || n != tc.lines {
						t.Fatalf("Validate = %d, %v; want %d lines", n, err, tc.lines)
					}
				}
			})
		}
	}
}

// chunkReader yields data n bytes at a time, so lines straddle writes.
type chunkReader struct {
	data []byte
	n    int
}

func (c *chunkReader) Read(p []byte) (int, error) {
	if len(c.data) == 0 {
		return 0, io.EOF
	}
	k := min(c.n, len(p), len(c.data))
	copy(p, c.data[:k])
	c.data = c.data[k:]
	return k, nil
}

func TestLinesAndOffsets(t *testing.T) {
	a := `{"custom_id":"a","method":"POST","url":"/v1/embeddings","body":{"input":"x"}}`
	b := `{"custom_id":"b","method":"POST","url":"/v1/chat/completions","body":{"messages":[]}}`
	file := "\xEF\xBB\xBF" + a + "\r\n" + b + "\n"
	var got []Line
	n, err := Validate(&chunkReader{data: []byte(file), n: 5}, Options{OnLine: func(l Line) error {
		l.Body, l.Raw = bytes.Clone(l.Body), bytes.Clone(l.Raw)
		got = append(got, l)
		return nil
	}})
	if err != nil || n != 2 {
		t.Fatalf("Validate = %d, %v", n, err)
	}
	want := []Line{
		{Number: 1, Offset: 0, End: int64(3 + len(a) + 2), CustomID: "a", Method: "POST", URL: "/v1/embeddings", Body: []byte(`{"input":"x"}`), Raw: []byte(a)},
		{Number: 2, Offset: int64(3 + len(a) + 2), End: int64(len(file)), CustomID: "b", Method: "POST", URL: "/v1/chat/completions", Body: []byte(`{"messages":[]}`), Raw: []byte(b)},
	}
	for i := range want {
		g, w := got[i], want[i]
		if g.Number != w.Number || g.Offset != w.Offset || g.End != w.End || g.CustomID != w.CustomID ||
			g.Method != w.Method || g.URL != w.URL || !bytes.Equal(g.Body, w.Body) || !bytes.Equal(g.Raw, w.Raw) {
			t.Errorf("line %d = %+v\nwant %+v", i+1, g, w)
		}
	}
	// The offsets cut the file into its lines.
	if s := file[got[1].Offset:got[1].End]; s != b+"\n" {
		t.Errorf("file[Offset:End] = %q", s)
	}
}

func TestOnLineErrorStops(t *testing.T) {
	stop := errors.New("stop")
	calls := 0
	_, err := Validate(strings.NewReader(good+"\n"+good+"\n"+good), Options{OnLine: func(Line) error {
		if calls++; calls == 2 {
			return stop
		}
		return nil
	}})
	if !errors.Is(err, stop) || calls != 2 {
		t.Fatalf("err = %v after %d calls", err, calls)
	}
}

func TestKeepGoing(t *testing.T) {
	v := NewValidator(Options{KeepGoing: true, MaxLineBytes: 64})
	file := "not json\n" + good + "\n" + strings.Repeat("z", 1000)
	n, err := io.Copy(v, strings.NewReader(file))
	if err != nil || n != int64(len(file)) {
		t.Fatalf("copy = %d, %v; KeepGoing must swallow the error", n, err)
	}
	var le *LineError
	if err := v.Close(); !errors.As(err, &le) || le.Line != 1 {
		t.Fatalf("Close = %v, want the first error (line 1)", err)
	}
	if !errors.Is(v.Err(), le) {
		t.Errorf("Err = %v", v.Err())
	}
}

func TestStrictWriteReturnsError(t *testing.T) {
	v := NewValidator(Options{})
	if _, err := v.Write([]byte("{}\n")); err == nil {
		t.Fatal("a bad line must fail the write without KeepGoing")
	}
	if _, err := v.Write([]byte(good + "\n")); err == nil {
		t.Fatal("writes after an error must keep failing")
	}
}

func TestMemoryBoundedByLineLimit(t *testing.T) {
	// A 64 MiB line without a newline is refused once it passes the line
	// limit; the validator never holds more than the limit.
	v := NewValidator(Options{KeepGoing: true, MaxLineBytes: 1 << 20})
	chunk := bytes.Repeat([]byte{'{'}, 64<<10)
	for range 1024 {
		v.Write(chunk)
	}
	if cap(v.partial) > 2<<20 {
		t.Errorf("partial line buffer grew to %d bytes", cap(v.partial))
	}
	var le *LineError
	if !errors.As(v.Close(), &le) || !strings.Contains(le.Reason, "longer than") {
		t.Errorf("Close = %v", v.Err())
	}
}

// reference checks a line the slow, obvious way, for the fuzz test.
func reference(line []byte) bool {
	line = bytes.TrimSuffix(line, []byte{'\r'})
	var m map[string]json.RawMessage
	if bytes.TrimSpace(line) == nil || json.Unmarshal(line, &m) != nil || m == nil {
		return false
	}
	var id, method, url string
	if json.Unmarshal(m["custom_id"], &id) != nil || id == "" || bytes.HasPrefix(m["custom_id"], []byte("null")) {
		return false
	}
	if json.Unmarshal(m["method"], &method) != nil || method != "POST" {
		return false
	}
	if json.Unmarshal(m["url"], &url) != nil || !slices.Contains(endpoints, url) {
		return false
	}
	var body map[string]json.RawMessage
	return json.Unmarshal(m["body"], &body) == nil && body != nil
}

func FuzzValidate(f *testing.F) {
	for _, s := range []string{
		good, good + "\n" + good, `{"custom_id":"a","method":"POST","url":"/v1/embeddings","body":{"a":"\"}"}}`,
		`{"custom\u005fid":"a","method":"POST","url":"/v1/embeddings","body":{}}`, "\n\n", "\xEF\xBB\xBF{}", `{"a":[1,2,{"b":null}]}`,
		`{"custom_id":"a","method":"POST","url":"/v1/embeddings","body":{}} x`, "{\"custom_id\":\"\xff\"}",
	} {
		f.Add([]byte(s), uint8(3))
	}
	f.Fuzz(func(t *testing.T, data []byte, chunk uint8) {
		var lines []Line
		opts := Options{MaxLineBytes: 4096, OnLine: func(l Line) error {
			l.Raw = bytes.Clone(l.Raw)
			lines = append(lines, l)
			return nil
		}}
		whole, errWhole := Validate(bytes.NewReader(data), opts)
		wholeLines := lines
		lines = nil
		parts, errParts := Validate(&chunkReader{data: data, n: int(chunk%16) + 1}, opts)
		if whole != parts || fmt.Sprint(errWhole) != fmt.Sprint(errParts) {
			t.Fatalf("chunking changed the result: %d %v vs %d %v", whole, errWhole, parts, errParts)
		}
		for _, l := range wholeLines {
			if l.Offset < 0 || l.End > int64(len(data)) || l.Offset >= l.End {
				t.Fatalf("line %d: bad offsets %d..%d of %d", l.Number, l.Offset, l.End, len(data))
			}
			if !reference(l.Raw) {
				t.Fatalf("line %d accepted, but the reference rejects it: %q", l.Number, l.Raw)
			}
		}
		var le *LineError
		if errors.As(errWhole, &le) {
			phys := bytes.Split(data, []byte{'\n'})
			if le.Line < 1 || le.Line > len(phys) {
				t.Fatalf("error names line %d of %d: %v", le.Line, len(phys), le)
			}
			bad := phys[le.Line-1]
			if le.Line == 1 {
				bad = bytes.TrimPrefix(bad, utf8BOM)
			}
			if len(bad) <= 4096 && reference(bad) {
				t.Fatalf("line %d rejected (%s), but the reference accepts it: %q", le.Line, le.Reason, bad)
			}
		}
	})
}

func BenchmarkValidate(b *testing.B) {
	line := `{"custom_id":"request-00001","method":"POST","url":"/v1/chat/completions","body":{"model":"gpt-4o-mini","messages":[{"role":"system","content":"You are a helpful assistant."},{"role":"user","content":"` + strings.Repeat("Summarise the quarterly report, please. ", 20) + `"}],"max_tokens":1000}}` + "\n"
	file := []byte(strings.Repeat(line, 2000))
	b.SetBytes(int64(len(file)))
	for b.Loop() {
		if _, err := Validate(bytes.NewReader(file), Options{}); err != nil {
			b.Fatal(err)
		}
	}
}

func TestValidAgreesWithEncodingJSON(t *testing.T) {
	deep := strings.Repeat("[", maxDepth) + strings.Repeat("]", maxDepth)
	for _, s := range []string{
		``, ` `, `{}`, `[]`, ` {"a" : [1, -2.5e+3, 0, true, false, null, "x\"\\\/\b\f\n\r\t\u00e9"]} `, `"abcdefghijklmnopqrstuvwxyz"`,
		`01`, `-`, `1.`, `1e`, `.5`, `+1`, `{"a"}`, `{"a":}`, `{,}`, `[1,]`, `{"a":1,}`, `[1 2]`, `"\x"`, `"\u12g4"`, "\"a\tb\"",
		`tru`, `nulls`, `{"a":1}{}`, `{"a":1]`, `[}`, "\"abcdefgh\x01\"", `"abcdefghijklmno\"pq"`, deep, "[" + deep + "]",
		"\"\xff\xfe\"", `{"k":"` + strings.Repeat("é", 40) + `"}`,
	} {
		if got, want := valid([]byte(s)), json.Valid([]byte(s)); got != want {
			t.Errorf("valid(%.40q) = %v; json.Valid says %v", s, got, want)
		}
	}
}

func FuzzValid(f *testing.F) {
	for _, s := range []string{good, `[1,{"a":"b\u0041"},-0.5e-7]`, `{"a":`, "\"ab\\", `nul`, `[[[[]]]]`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		if got, want := valid(data), json.Valid(data); got != want {
			t.Fatalf("valid(%q) = %v; json.Valid says %v", data, got, want)
		}
	})
}
