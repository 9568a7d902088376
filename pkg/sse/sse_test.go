package sse

import (
	"bytes"
	"errors"
	"io"
	"strings"
	"testing"
	"testing/iotest"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
)

// ev is an Event with its slices as strings, for comparisons.
type ev struct{ Type, Data, ID string }

func copyEvent(e Event) ev { return ev{string(e.Type), string(e.Data), string(e.ID)} }

// parse pushes stream through a Parser in chunks of size n (all at once
// when n is 0) and returns its events and End's error.
func parse(stream string, n int, lim Limits) ([]ev, error) {
	var got []ev
	p := NewParser(lim, func(e Event) { got = append(got, copyEvent(e)) })
	b := []byte(stream)
	if n == 0 {
		n = len(b) + 1
	}
	for len(b) > 0 {
		k := min(n, len(b))
		p.Write(b[:k])
		b = b[k:]
	}
	return got, p.End()
}

// read pulls every event of stream from a Reader and returns them with the
// error that ended the stream.
func read(src io.Reader, lim Limits) ([]ev, error) {
	r := NewReader(src, lim)
	var got []ev
	for {
		e, err := r.Next()
		if err != nil {
			return got, err
		}
		got = append(got, copyEvent(e))
	}
}

func TestStandardExamples(t *testing.T) {
	for _, tc := range []struct {
		name, stream string
		want         []ev
	}{
		{"anthropic", "event: message_start\ndata: {\"type\":\"message_start\"}\n\nevent: ping\ndata: {\"type\": \"ping\"}\n\n",
			[]ev{{"message_start", `{"type":"message_start"}`, ""}, {"ping", `{"type": "ping"}`, ""}}},
		{"openai", "data: {\"id\":1}\n\ndata: [DONE]\n\n", []ev{{"", `{"id":1}`, ""}, {"", "[DONE]", ""}}},
		{"multi-line data", "data: YHOO\ndata: +2\ndata: 10\n\n", []ev{{"", "YHOO\n+2\n10", ""}}},
		{"CRLF", "event: a\r\ndata: x\r\n\r\ndata: y\r\n\r\n", []ev{{"a", "x", ""}, {"", "y", ""}}},
		{"CR", "data: x\r\rdata: y\r\r", []ev{{"", "x", ""}, {"", "y", ""}}},
		{"comments and unknown fields", ": keep-alive\nfoo: bar\ndata: x\n: more\nretry: 10\n\n", []ev{{"", "x", ""}}},
		{"no space after colon, and two spaces", "data:x\ndata:  y\n\n", []ev{{"", "x\n y", ""}}},
		{"field without colon", "data\ndata\ndata x\n\n", []ev{{"", "\n", ""}}},
		{"empty data", "data:\n\n", []ev{{"", "", ""}}},
		{"no data: nothing dispatched, type reset", "event: a\n\ndata: b\n\n", []ev{{"", "b", ""}}},
		{"ids carry over", "id: 1\ndata: a\n\ndata: b\n\nid: 2\x00x\ndata: c\n\n", []ev{{"", "a", "1"}, {"", "b", "1"}, {"", "c", "1"}}},
		{"byte-order mark", "\xef\xbb\xbfdata: a\n\n", []ev{{"", "a", ""}}},
		{"only the first mark", "\xef\xbb\xbfdata: a\n\n\xef\xbb\xbfdata: b\n\n", []ev{{"", "a", ""}}},
		{"colon in the value", "data: {\"a\":\"b:c\"}\n\n", []ev{{"", `{"a":"b:c"}`, ""}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			for _, n := range []int{0, 1, 2, 3, 7} {
				got, err := parse(tc.stream, n, Limits{})
				if err != nil {
					t.Errorf("chunks of %d: End: %v", n, err)
				}
				if diff := cmp.Diff(tc.want, got); diff != "" {
					t.Errorf("parser, chunks of %d (-want +got):\n%s", n, diff)
				}
			}
			got, err := read(iotest.OneByteReader(strings.NewReader(tc.stream)), Limits{})
			if err != io.EOF {
				t.Errorf("reader ended with %v", err)
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("reader (-want +got):\n%s", diff)
			}
		})
	}
}

func TestCutStream(t *testing.T) {
	for _, stream := range []string{"data: a\n\ndata: b\n", "data: a\n\ndata: b", "data: a\n\nevent: x\n"} {
		got, err := read(strings.NewReader(stream), Limits{})
		if !errors.Is(err, ErrTruncated) || !errors.Is(err, io.ErrUnexpectedEOF) {
			t.Errorf("%q: reader ended with %v", stream, err)
		}
		if diff := cmp.Diff([]ev{{"", "a", ""}}, got); diff != "" {
			t.Errorf("%q: reader (-want +got):\n%s", stream, diff)
		}
	}
	// The parser, ending, hands over what the cut event had.
	got, err := parse("data: a\n\nevent: t\ndata: b", 0, Limits{})
	if !errors.Is(err, ErrTruncated) {
		t.Errorf("parser End: %v", err)
	}
	if diff := cmp.Diff([]ev{{"", "a", ""}, {"t", "b", ""}}, got); diff != "" {
		t.Errorf("parser (-want +got):\n%s", diff)
	}
}

func TestCleanEnds(t *testing.T) {
	for _, stream := range []string{"", "data: a\n\n", "data: a\n\n: trailing comment", "data: a\n\n\n\n"} {
		if _, err := read(strings.NewReader(stream), Limits{}); err != io.EOF {
			t.Errorf("%q: reader ended with %v", stream, err)
		}
		if _, err := parse(stream, 1, Limits{}); err != nil {
			t.Errorf("%q: parser End: %v", stream, err)
		}
	}
}

func TestLimits(t *testing.T) {
	lim := Limits{MaxLine: 16, MaxEvent: 24}
	long := "data: " + strings.Repeat("x", 20) + "\n\n"        // one line over MaxLine
	big := "data: 0123456789\ndata: 0123456789\ndata: 012\n\n" // lines fit, the event does not
	ok := "data: fits\n\n"
	for _, n := range []int{0, 1, 5} {
		got, err := parse(long+ok+big+ok, n, lim)
		if err != nil {
			t.Errorf("End: %v", err)
		}
		if diff := cmp.Diff([]ev{{"", "fits", ""}, {"", "fits", ""}}, got); diff != "" {
			t.Errorf("chunks of %d (-want +got):\n%s", n, diff)
		}
	}
	p := NewParser(lim, func(Event) {})
	p.Write([]byte(long + big))
	if p.Dropped() != 2 {
		t.Errorf("dropped %d", p.Dropped())
	}
	if len(p.d.line) > lim.MaxLine || cap(p.d.data) > 2*lim.MaxEvent {
		t.Errorf("held a line of %d, data of cap %d", len(p.d.line), cap(p.d.data))
	}
	got, err := read(strings.NewReader(ok+big+ok), lim)
	if err != ErrTooLarge {
		t.Errorf("reader ended with %v", err)
	}
	if diff := cmp.Diff([]ev{{"", "fits", ""}}, got); diff != "" {
		t.Errorf("reader (-want +got):\n%s", diff)
	}
}

func TestReaderSourceErrors(t *testing.T) {
	boom := errors.New("boom")
	src := io.MultiReader(strings.NewReader("data: a\n\ndata: b\n\n"), iotest.ErrReader(boom))
	got, err := read(iotest.DataErrReader(src), Limits{})
	if err != boom {
		t.Errorf("ended with %v", err)
	}
	if diff := cmp.Diff([]ev{{"", "a", ""}, {"", "b", ""}}, got); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
	r := NewReader(emptyReader{}, Limits{})
	if _, err := r.Next(); err != io.ErrNoProgress {
		t.Errorf("a reader that never progresses: %v", err)
	}
}

type emptyReader struct{}

func (emptyReader) Read([]byte) (int, error) { return 0, nil }

func TestAppendEvent(t *testing.T) {
	for _, tc := range []struct {
		typ, data, want string
	}{
		{"", `{"a":1}`, "data: {\"a\":1}\n\n"},
		{"error", "x", "event: error\ndata: x\n\n"},
		{"", "a\nb\r\nc\rd", "data: a\ndata: b\ndata: c\ndata: d\n\n"},
		{"", "", "data: \n\n"},
	} {
		if got := string(AppendEvent(nil, tc.typ, []byte(tc.data))); got != tc.want {
			t.Errorf("AppendEvent(%q, %q) = %q", tc.typ, tc.data, got)
		}
	}
}

// reference is the standard's algorithm written plainly over a whole
// stream, for the fuzz tests to hold the decoders to.
func reference(stream string) (events []ev, cut bool) {
	stream = strings.TrimPrefix(stream, "\xef\xbb\xbf")
	var lines []string
	for {
		i := strings.IndexAny(stream, "\r\n")
		if i < 0 {
			break
		}
		lines = append(lines, stream[:i])
		if stream[i] == '\r' && i+1 < len(stream) && stream[i+1] == '\n' {
			i++
		}
		stream = stream[i+1:]
	}
	var typ, data, id string
	hasData, pending := false, false
	for _, line := range lines {
		if line == "" {
			if hasData {
				events = append(events, ev{typ, data, id})
			}
			typ, data, hasData, pending = "", "", false, false
			continue
		}
		if line[0] == ':' {
			continue
		}
		field, value, found := strings.Cut(line, ":")
		if found {
			value = strings.TrimPrefix(value, " ")
		}
		switch field {
		case "data":
			if hasData {
				data += "\n"
			}
			data += value
			hasData, pending = true, true
		case "event":
			typ, pending = value, true
		case "id":
			if !strings.Contains(value, "\x00") {
				id = value
			}
			pending = true
		case "retry":
			pending = true
		}
	}
	rest := stream
	if len(lines) == 0 {
		rest = strings.TrimPrefix(rest, "\xef\xbb\xbf")
	}
	cut = pending || (rest != "" && rest[0] != ':')
	return events, cut
}

func FuzzDecoders(f *testing.F) {
	for _, s := range []string{
		"event: message_start\ndata: {\"type\":\"message_start\"}\n\n",
		"data: a\r\ndata: b\r\r\n\r\n: c\rid: 7\ndata\n\n",
		"\xef\xbb\xbfdata: x\n\ndata: y",
		"data: a\r", "retry: 5\nevent: e\n\n",
	} {
		f.Add(s, uint8(3))
	}
	f.Fuzz(func(t *testing.T, stream string, chunk uint8) {
		want, cut := reference(stream)
		got, err := read(iotest.HalfReader(strings.NewReader(stream)), Limits{})
		if wantErr := map[bool]error{false: io.EOF, true: ErrTruncated}[cut]; err != wantErr {
			t.Fatalf("%q: reader ended with %v, want %v", stream, err, wantErr)
		}
		if diff := cmp.Diff(want, got, cmpopts.EquateEmpty()); diff != "" {
			t.Fatalf("%q: reader (-reference +got):\n%s", stream, diff)
		}
		pushed, err := parse(stream, int(chunk%16)+1, Limits{})
		if cut != (err != nil) {
			t.Fatalf("%q: parser End %v, cut %v", stream, err, cut)
		}
		if len(pushed) < len(want) || !cmp.Equal(want, pushed[:len(want)], cmpopts.EquateEmpty()) || len(pushed) > len(want)+1 {
			t.Fatalf("%q: parser %q, reference %q", stream, pushed, want)
		}
	})
}

// FuzzLimits holds the decoders to their bounds: no event they give is over
// MaxEvent, and what they hold stays within MaxLine and MaxEvent.
func FuzzLimits(f *testing.F) {
	f.Add("data: 0123456789abcdef\ndata: x\n\ndata: y\n\n", uint8(4))
	f.Fuzz(func(t *testing.T, stream string, chunk uint8) {
		lim := Limits{MaxLine: 12, MaxEvent: 16}
		p := NewParser(lim, func(e Event) {
			if len(e.Data) > lim.MaxEvent {
				t.Fatalf("%q: event of %d bytes", stream, len(e.Data))
			}
		})
		b := []byte(stream)
		n := int(chunk%8) + 1
		for len(b) > 0 {
			k := min(n, len(b))
			p.Write(b[:k])
			b = b[k:]
			if len(p.d.line) > lim.MaxLine || len(p.d.data) > lim.MaxEvent {
				t.Fatalf("%q: holding a line of %d, data of %d", stream, len(p.d.line), len(p.d.data))
			}
		}
		got, _ := read(strings.NewReader(stream), lim)
		for _, e := range got {
			if len(e.Data) > lim.MaxEvent {
				t.Fatalf("%q: reader event of %d bytes", stream, len(e.Data))
			}
		}
	})
}

// FuzzAppendEvent: what AppendEvent writes reads back as the same event.
func FuzzAppendEvent(f *testing.F) {
	f.Add("message", "a\nb")
	f.Fuzz(func(t *testing.T, typ, data string) {
		if strings.ContainsAny(typ, "\r\n") {
			return
		}
		b := AppendEvent(nil, typ, []byte(data))
		got, err := read(bytes.NewReader(b), Limits{})
		want := strings.NewReplacer("\r\n", "\n", "\r", "\n").Replace(data)
		if err != io.EOF || len(got) != 1 || got[0].Type != typ || got[0].Data != want {
			t.Fatalf("%q %q: wrote %q, read %q %v", typ, data, b, got, err)
		}
	})
}

func anthropicStream(events int) []byte {
	var b bytes.Buffer
	b.WriteString("event: message_start\ndata: {\"type\":\"message_start\",\"message\":{\"id\":\"msg_01\",\"type\":\"message\",\"role\":\"assistant\",\"model\":\"claude-sonnet-4-5\",\"content\":[],\"usage\":{\"input_tokens\":25,\"output_tokens\":1}}}\n\n")
	for range events {
		b.WriteString("event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":0,\"delta\":{\"type\":\"text_delta\",\"text\":\"Hello there, \"}}\n\n")
	}
	b.WriteString("event: message_delta\ndata: {\"type\":\"message_delta\",\"delta\":{\"stop_reason\":\"end_turn\"},\"usage\":{\"output_tokens\":15}}\n\nevent: message_stop\ndata: {\"type\":\"message_stop\"}\n\n")
	return b.Bytes()
}

func BenchmarkParser(b *testing.B) {
	stream := anthropicStream(100)
	b.SetBytes(int64(len(stream)))
	b.ReportAllocs()
	p := NewParser(Limits{}, func(Event) {})
	for b.Loop() {
		for c := stream; len(c) > 0; {
			k := min(4096, len(c))
			p.Write(c[:k])
			c = c[k:]
		}
	}
}

func BenchmarkReader(b *testing.B) {
	stream := anthropicStream(100)
	b.SetBytes(int64(len(stream)))
	b.ReportAllocs()
	src := bytes.NewReader(stream)
	r := NewReader(src, Limits{})
	for b.Loop() {
		src.Reset(stream)
		*r = Reader{src: src, d: r.d, buf: r.buf}
		for {
			if _, err := r.Next(); err != nil {
				break
			}
		}
	}
}
