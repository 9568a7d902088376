package embedbatch_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/sluice-gateway/sluice/pkg/providers/embedbatch"
)

func TestPath(t *testing.T) {
	doc := []byte(`{"meta":{"billed_units":{"input_tokens":12}},"meta2":null,"a":1,"a":2}`)
	for _, c := range []struct {
		path []string
		want string
	}{
		{[]string{"meta", "billed_units", "input_tokens"}, "12"},
		{[]string{"meta", "absent", "input_tokens"}, ""},
		{[]string{"meta2", "billed_units"}, ""},
		{[]string{"a"}, "2"}, // the last copy, as encoding/json
	} {
		got, err := embedbatch.Path(doc, c.path...)
		if err != nil || string(got) != c.want {
			t.Errorf("Path(%v) = %q, %v; want %q", c.path, got, err, c.want)
		}
	}
	if _, err := embedbatch.Path([]byte(`{"meta":[1]}`), "meta", "x"); err == nil || !strings.Contains(err.Error(), "meta") {
		t.Errorf("a member that is not an object: %v, want an error naming it", err)
	}
}

func TestVectors(t *testing.T) {
	got, err := embedbatch.Vectors([]byte(`[{"values":[1,2]},{"values":[3]}]`), "embedding", "values")
	if err != nil || cmp.Diff([]string{"[1,2]", "[3]"}, rawStrings(got)) != "" {
		t.Errorf("Vectors = %q, %v", got, err)
	}
	for list, want := range map[string]string{
		`[{"values":[1]},{}]`:              "embedding 1 has no values",
		`[{"values":[1]},{"values":null}]`: "embedding 1 has no values",
		`[{"values":[1]},7]`:               "embedding 1:",
	} {
		if _, err := embedbatch.Vectors([]byte(list), "embedding", "values"); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("Vectors(%s) = %v, want an error %q", list, err, want)
		}
	}
	if _, err := embedbatch.Vectors([]byte(`[[1],null]`), "embedding"); err == nil || !strings.Contains(err.Error(), "embedding 1 is null") {
		t.Errorf("a null vector: %v", err)
	}
	if _, err := embedbatch.Vectors(nil, "embedding"); err == nil {
		t.Error("no list: no error")
	}
}

func rawStrings(r []json.RawMessage) []string {
	out := make([]string, len(r))
	for i, v := range r {
		out[i] = string(v)
	}
	return out
}

// FuzzVectors holds Pick and Vectors to encoding/json: what they read from a
// well-formed answer is what encoding/json decodes (members by exact name,
// the last copy winning, null as absent).
func FuzzVectors(f *testing.F) {
	for _, s := range []string{
		`{"embeddings":[{"values":[1,2.5,-3e-2]},{"values":[0]}]}`,
		`{"embeddings":[{"values":[1]}],"embeddings":null}`,
		`{"embeddings":[{"values":[1]},{"Values":[2]}]}`,
		`{"embeddings":[{"values":[1]} {"values":[2]}]}`,
		`{"embeddings":"x"}`, `[]`, `{}`, ``,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, doc []byte) {
		var want map[string]json.RawMessage
		werr := json.Unmarshal(doc, &want)
		top, err := embedbatch.Pick(doc, "embeddings")
		if werr == nil && err != nil {
			t.Fatalf("Pick(%s): %v; encoding/json reads it", doc, err)
		}
		if err != nil || werr != nil {
			// A malformed answer: Pick may pass over a member it skips;
			// what it returns is read on (and refused) by Vectors and the
			// answer's assembly.
			return
		}
		if w := want["embeddings"]; !bytes.Equal(top[0], w) && !(top[0] == nil && string(w) == "null") {
			t.Fatalf("Pick(%s) = %s; encoding/json: %s", doc, top[0], w)
		}
		if top[0] == nil {
			return
		}
		var list []map[string]json.RawMessage // exact names, as Pick
		werr = json.Unmarshal(top[0], &list)
		got, err := embedbatch.Vectors(top[0], "embedding", "values")
		if err != nil {
			return // not a list of objects, or one without values
		}
		if werr != nil || len(list) != len(got) {
			t.Fatalf("Vectors(%s) = %q; encoding/json: %v", top[0], got, werr)
		}
		for i, m := range list {
			if !bytes.Equal(m["values"], got[i]) {
				t.Fatalf("vector %d = %s; encoding/json: %s", i, got[i], m["values"])
			}
		}
	})
}

// vectorsAnswer is a batchEmbedContents answer of n vectors of dims floats.
func vectorsAnswer(n, dims int) []byte {
	var b strings.Builder
	b.WriteString(`{"embeddings":[`)
	for i := range n {
		if i > 0 {
			b.WriteString(",")
		}
		b.WriteString(`{"values":[`)
		for j := range dims {
			if j > 0 {
				b.WriteString(",")
			}
			fmt.Fprintf(&b, "%g", float32(j)*0.001234567-0.3)
		}
		b.WriteString("]}")
	}
	b.WriteString("]}")
	return []byte(b.String())
}

// BenchmarkVectorsScan and BenchmarkVectorsEncodingJSON measure why the
// providers' embedding answers are read with jsonscan.
func BenchmarkVectorsScan(b *testing.B) {
	a := vectorsAnswer(100, 768)
	b.SetBytes(int64(len(a)))
	for b.Loop() {
		list, _ := embedbatch.Path(a, "embeddings")
		if v, err := embedbatch.Vectors(list, "embedding", "values"); err != nil || len(v) != 100 {
			b.Fatal(err)
		}
	}
}

func BenchmarkVectorsEncodingJSON(b *testing.B) {
	a := vectorsAnswer(100, 768)
	b.SetBytes(int64(len(a)))
	for b.Loop() {
		var v struct {
			Embeddings []struct {
				Values json.RawMessage `json:"values"`
			} `json:"embeddings"`
		}
		if err := json.Unmarshal(a, &v); err != nil || len(v.Embeddings) != 100 {
			b.Fatal(err)
		}
	}
}
