package embeddings

import (
	"bytes"
	"encoding/base64"
	"encoding/binary"
	"encoding/json"
	"math"
	"math/rand/v2"
	"strconv"
	"strings"
	"testing"

	"github.com/sluice-gateway/sluice/pkg/oai"
)

// response builds an OpenAI embeddings response with n vectors of dims
// values, in float or base64.
func response(n, dims int, encoding string, prompt int) []byte {
	rng := rand.New(rand.NewPCG(uint64(n), uint64(dims)))
	b := []byte(`{"object":"list","data":[`)
	for i := range n {
		if i > 0 {
			b = append(b, ',')
		}
		b = append(b, `{"object":"embedding","index":`...)
		b = strconv.AppendInt(b, int64(i), 10)
		b = append(b, `,"embedding":`...)
		b = appendVec(b, rng, dims, encoding)
		b = append(b, '}')
	}
	b = append(b, `],"model":"text-embedding-3-small","usage":{"prompt_tokens":`...)
	b = strconv.AppendInt(b, int64(prompt), 10)
	b = append(b, `,"total_tokens":`...)
	b = strconv.AppendInt(b, int64(prompt), 10)
	return append(b, `}}`...)
}

func appendVec(b []byte, rng *rand.Rand, dims int, encoding string) []byte {
	if encoding == "base64" {
		raw := make([]byte, 4*dims)
		for j := range dims {
			binary.LittleEndian.PutUint32(raw[4*j:], math.Float32bits(float32(rng.NormFloat64()/40)))
		}
		b = append(b, '"')
		b = base64.StdEncoding.AppendEncode(b, raw)
		return append(b, '"')
	}
	b = append(b, '[')
	for j := range dims {
		if j > 0 {
			b = append(b, ',')
		}
		b = strconv.AppendFloat(b, rng.NormFloat64()/40, 'g', -1, 32)
	}
	return append(b, ']')
}

type scanned struct {
	usage    oai.Usage
	hasUsage bool
	model    string
	count    int
	dims     int
	complete bool
}

func scanChunks(doc []byte, chunk int) scanned {
	var s Scanner
	for len(doc) > 0 {
		n := min(chunk, len(doc))
		s.Write(doc[:n])
		doc = doc[n:]
	}
	u, ok := s.Usage()
	return scanned{usage: u, hasUsage: ok, model: s.Model(), count: s.Count(), dims: s.Dimensions(), complete: s.Complete()}
}

func TestScanner(t *testing.T) {
	indented := func(doc []byte) []byte {
		var b bytes.Buffer
		json.Indent(&b, doc, "", "  ")
		return b.Bytes()
	}
	for _, tc := range []struct {
		name string
		doc  []byte
		want scanned
	}{
		{"float", response(3, 1536, "float", 12), scanned{oai.Usage{PromptTokens: 12, TotalTokens: 12}, true, "text-embedding-3-small", 3, 1536, true}},
		{"base64", response(2, 1536, "base64", 7), scanned{oai.Usage{PromptTokens: 7, TotalTokens: 7}, true, "text-embedding-3-small", 2, 1536, true}},
		{"base64 odd dims", response(1, 5, "base64", 1), scanned{oai.Usage{PromptTokens: 1, TotalTokens: 1}, true, "text-embedding-3-small", 1, 5, true}},
		{"indented", indented(response(2, 4, "float", 3)), scanned{oai.Usage{PromptTokens: 3, TotalTokens: 3}, true, "text-embedding-3-small", 2, 4, true}},
		{"usage first, extra members", []byte(`{"usage": {"prompt_tokens": 5, "total_tokens": 6, "details": {"x": [1, "}"]}}, "id": "embd-1", "created": 1, "object": "list", "model": "BAAI/bge", "data": [{"index": 0, "object": "embedding", "embedding": [1e-3, -2.5E+2]}]}`),
			scanned{oai.Usage{PromptTokens: 5, TotalTokens: 6}, true, "BAAI/bge", 1, 2, true}},
		{"strings that look like members", []byte(`{"note":"\"usage\": {\"prompt_tokens\": 99}","data":[{"embedding":[0.5],"meta":"],[{"}],"usage":{"prompt_tokens":1}}`),
			scanned{oai.Usage{PromptTokens: 1, TotalTokens: 1}, true, "", 1, 1, true}},
		{"no usage", []byte(`{"object":"list","data":[{"embedding":[1,2,3]}],"model":"m"}`), scanned{oai.Usage{}, false, "m", 1, 3, true}},
		{"empty data", []byte(`{"object":"list","data":[],"model":"m","usage":{"prompt_tokens":0,"total_tokens":0}}`), scanned{oai.Usage{}, true, "m", 0, 0, true}},
		{"escaped model", []byte(`{"model":"a\"b\u00e9","usage":{"prompt_tokens":2}}`), scanned{oai.Usage{PromptTokens: 2, TotalTokens: 2}, true, "a\"bé", 0, 0, true}},
		{"nested arrays and objects in an embedding", []byte(`{"data":[{"embedding":[[1,2],[3,{"a":"]"}],{}, { } ,[],4]},{"embedding":[5]}],"model":"m"}`),
			scanned{oai.Usage{}, false, "m", 2, 6, true}},
		{"empty objects among numbers", []byte(`{"data":[{"x":[{},1,{ }],"embedding":[{},2]}],"usage":{"prompt_tokens":3}}`),
			scanned{oai.Usage{PromptTokens: 3, TotalTokens: 3}, true, "", 1, 2, true}},
		{"strings among numbers", []byte(`{"data":[{"embedding":[1,"]",2,"[",3,"{"],"index":0}],"model":"m"}`),
			scanned{oai.Usage{}, false, "m", 1, 6, true}},
		{"truncated", response(2, 8, "float", 3)[:100], scanned{count: 1, dims: 0}},
		{"not an object", []byte(`[1,2]`), scanned{}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			for _, chunk := range []int{1 << 20, 1, 2, 3, 7, 64, 4096} {
				if got := scanChunks(tc.doc, chunk); got != tc.want {
					t.Fatalf("chunk %d: got %+v\nwant %+v", chunk, got, tc.want)
				}
			}
		})
	}
}

// FuzzScannerShapes builds real-shaped answers from the fuzzer's numbers and
// checks every figure the scanner reports, whatever the chunking.
func FuzzScannerShapes(f *testing.F) {
	f.Add(uint8(2), uint16(1536), false, uint32(8), uint8(0), false)
	f.Add(uint8(1), uint16(3), true, uint32(0), uint8(1), true)
	f.Add(uint8(0), uint16(1), false, uint32(1<<31), uint8(5), false)
	f.Fuzz(func(t *testing.T, n uint8, dims uint16, b64 bool, prompt uint32, chunk uint8, indent bool) {
		items, d := int(n%8), int(dims%2048)+1
		enc := "float"
		if b64 {
			enc = "base64"
		}
		doc := response(items, d, enc, int(prompt))
		if indent {
			var b bytes.Buffer
			json.Indent(&b, doc, "", "\t")
			doc = b.Bytes()
		}
		got := scanChunks(doc, int(chunk)+1)
		wantDims := d
		if items == 0 {
			wantDims = 0
		}
		want := scanned{oai.Usage{PromptTokens: int64(prompt), TotalTokens: int64(prompt)}, true, "text-embedding-3-small", items, wantDims, true}
		if prompt == 0 {
			want.usage = oai.Usage{}
		}
		if got != want {
			t.Fatalf("got %+v, want %+v", got, want)
		}
	})
}

// FuzzScanner checks the scanner on arbitrary bytes: it never panics, and on
// a valid JSON object it agrees with encoding/json about usage, model and
// how many data items there are.
func FuzzScanner(f *testing.F) {
	for _, s := range []string{
		string(response(2, 3, "float", 4)), string(response(1, 2, "base64", 1)),
		`{"usage":{"prompt_tokens":1},"usage":{"prompt_tokens":2}}`,
		`{"data":{"a":{"embedding":[1]}},"model":null}`, `{"a":"\\"}`, `[`, `{"data":[[1],{"embedding":"AAAA"}]}`,
	} {
		f.Add([]byte(s), uint8(3))
	}
	f.Fuzz(func(t *testing.T, doc []byte, chunk uint8) {
		var s Scanner
		for rest := doc; len(rest) > 0; {
			k := min(int(chunk)+1, len(rest))
			s.Write(rest[:k])
			rest = rest[k:]
		}
		u, hasUsage := s.Usage()
		if !json.Valid(doc) || s.broken {
			return
		}
		var top map[string]json.RawMessage
		if json.Unmarshal(doc, &top) != nil {
			return // valid JSON but not an object
		}
		if !s.Complete() {
			t.Fatalf("%q: a complete object not seen as complete", doc)
		}
		if raw, ok := top["usage"]; ok && len(raw) < maxUsageJSON-8 {
			want, err := oai.ParseUsage(raw)
			wantOK := err == nil
			if want.TotalTokens == 0 {
				want.TotalTokens = want.PromptTokens
			}
			if wantOK != hasUsage || (wantOK && want != u) {
				t.Fatalf("%q: usage %+v %v, want %+v %v", doc, u, hasUsage, want, wantOK)
			}
		} else if !ok && hasUsage {
			t.Fatalf("%q: usage found where there is none", doc)
		}
		if raw, ok := top["model"]; ok && len(raw) < maxModelJSON-8 {
			var want string
			json.Unmarshal(raw, &want)
			if s.Model() != want {
				t.Fatalf("%q: model %q, want %q", doc, s.Model(), want)
			}
		}
		if want, ok := firstDims(doc); ok && s.Dimensions() != want {
			t.Fatalf("%q: %d dimensions, want %d", doc, s.Dimensions(), want)
		}
		var data []json.RawMessage
		if raw, ok := top["data"]; ok && json.Unmarshal(raw, &data) == nil {
			want := 0
			for _, d := range data {
				if strings.HasPrefix(string(d), "{") {
					want++
				}
			}
			if s.Count() != want {
				t.Fatalf("%q: %d items, want %d", doc, s.Count(), want)
			}
		}
	})
}

// firstDims is the length of the first data item's embedding array by
// encoding/json, for documents where that is unambiguous: one "embedding"
// key, no escapes, data an array of objects.
func firstDims(doc []byte) (int, bool) {
	if bytes.Count(doc, []byte(`"embedding"`)) != 1 || bytes.IndexByte(doc, '\\') >= 0 {
		return 0, false
	}
	// Maps, not structs: encoding/json matches struct fields whatever
	// their case, an answer's members are matched exactly.
	var top map[string]json.RawMessage
	var data []map[string]json.RawMessage
	var vec []json.RawMessage
	if json.Unmarshal(doc, &top) != nil || json.Unmarshal(top["data"], &data) != nil || len(data) == 0 ||
		json.Unmarshal(data[0]["embedding"], &vec) != nil || vec == nil {
		return 0, false
	}
	return len(vec), true
}

// TestScannerUsageAfterMoreBytes checks that the usage, once asked for, is
// read again when more of the answer arrives.
func TestScannerUsageAfterMoreBytes(t *testing.T) {
	doc := []byte(`{"usage":{"prompt_tokens":1},"usage":{"prompt_tokens":2}}`)
	var s Scanner
	s.Write(doc[:30])
	if u, ok := s.Usage(); !ok || u.PromptTokens != 1 {
		t.Fatalf("after the first usage: %+v %v", u, ok)
	}
	s.Write(doc[30:])
	if u, ok := s.Usage(); !ok || u.PromptTokens != 2 {
		t.Fatalf("after the second usage: %+v %v", u, ok)
	}
}

func BenchmarkScanner(b *testing.B) {
	for _, enc := range []string{"float", "base64"} {
		doc := response(1, 1536, enc, 8)
		b.Run(enc, func(b *testing.B) {
			b.SetBytes(int64(len(doc)))
			b.ReportAllocs()
			for b.Loop() {
				var s Scanner
				for rest := doc; len(rest) > 0; {
					k := min(4096, len(rest))
					s.Write(rest[:k])
					rest = rest[k:]
				}
				if _, ok := s.Usage(); !ok {
					b.Fatal("no usage")
				}
			}
		})
	}
}

// plainUsage, where it reads a usage, reads what oai.ParseUsage and
// encoding/json read.
func FuzzPlainUsage(f *testing.F) {
	for _, s := range []string{
		`{"prompt_tokens":120,"total_tokens":120}`, `{"prompt_tokens":0,"total_tokens":0}`,
		`{"prompt_tokens":01,"total_tokens":1}`, `{"prompt_tokens":1,"total_tokens":1099511627776}`,
		`{"prompt_tokens":1,"total_tokens":2,"x":3}`, `{"prompt_tokens":1.0,"total_tokens":1}`,
		`{"prompt_tokens":1,"total_tokens":-1}`, `{"prompt_tokens":1, "total_tokens":1}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		if len(b) == 0 {
			return
		}
		got, ok := plainUsage(b)
		if !ok {
			return
		}
		want, err := oai.ParseUsage(b)
		if err != nil || got != want {
			t.Fatalf("%q: plainUsage %+v, ParseUsage %+v %v", b, got, want, err)
		}
		var decoded oai.Usage
		if err := json.Unmarshal(b, &decoded); err != nil || decoded != got {
			t.Fatalf("%q: plainUsage %+v, encoding/json %+v %v", b, got, decoded, err)
		}
	})
}

func TestPlainUsage(t *testing.T) {
	for doc, want := range map[string]bool{
		`{"prompt_tokens":120,"total_tokens":120}`:         true,
		`{"prompt_tokens":0,"total_tokens":7}`:             true,
		`{"prompt_tokens":01,"total_tokens":1}`:            false,
		`{"prompt_tokens":1,"total_tokens":1099511627776}`: false,
		`{"prompt_tokens":1,"total_tokens":2,"x":3}`:       false,
		`{"prompt_tokens":1 ,"total_tokens":1}`:            false,
		`{"total_tokens":1,"prompt_tokens":1}`:             false,
		`{"prompt_tokens":1,"total_tokens":}`:              false,
	} {
		if _, ok := plainUsage([]byte(doc)); ok != want {
			t.Errorf("%s: read %v, want %v", doc, ok, want)
		}
	}
}
