package jsonscan

import (
	"encoding/json"
	"testing"

	"github.com/google/go-cmp/cmp"
)

type countsDoc struct {
	A int64 `json:"a_count"`
	B int64 `json:"bCount"`
}

func (d *countsDoc) fields() []CountField {
	return []CountField{{"a_count", &d.A}, {"bCount", &d.B}}
}

// FuzzCounts holds Counts to json.Unmarshal into the same struct: the same
// verdict and the same counts, from counts already set.
func FuzzCounts(f *testing.F) {
	for _, s := range []string{`{"a_count":12,"bCount":3}`, `{"A_COUNT":1,"a_count":2,"bcount":null}`, `{"a_count":1.0}`, `{"bCount":"3"}`, `{"x":[{}],"\u0061_count":9}`, `[]`, `null`, ` {"a_count":4} `,
		// Counts set by the walk before the document turns out not to be JSON: put back.
		`{"a_count":5,"bCount":tru}`, `{"a_count":5,"x":[1,]}`, `{"a_count":5} x`, `{"a_count":007}`, `{"a_count":-3,"bCount":99999999999999999999}`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, doc []byte) {
		got, want := countsDoc{A: 1, B: 2}, countsDoc{A: 1, B: 2}
		if ok, wantOK := Counts(doc, got.fields()), json.Unmarshal(doc, &want) == nil; ok != wantOK || got != want {
			t.Fatalf("%q: %+v %v; encoding/json %+v %v", doc, got, ok, want, wantOK)
		}
	})
}

// TestCountsOfMoreFieldsThanASchema: a field list longer than a schema's
// (the passthrough's two vendors' usage) decodes alike, in the one checked
// walk, and a document that is not JSON puts its counts back.
func TestCountsOfMoreFieldsThanASchema(t *testing.T) {
	var got [maxCounts + 1]int64
	fields := make([]CountField, len(got))
	for i := range fields {
		fields[i] = CountField{Name: string(rune('a' + i)), Dst: &got[i]}
	}
	last := fields[maxCounts].Name
	if !Counts([]byte(`{"a":1,"`+last+`":9,"x":"y"}`), fields) || got[0] != 1 || got[maxCounts] != 9 {
		t.Errorf("got %v", got)
	}
	if Counts([]byte(`{"a":2,"`+last+`":tru}`), fields) || got[0] != 1 {
		t.Errorf("a document that is not JSON: got %v", got)
	}
}

// TestCountsOfMoreFieldsThanOnce: a field list too long for the one checked
// walk (decoded after Valid) decodes alike, and sets nothing when the
// document is not JSON.
func TestCountsOfMoreFieldsThanOnce(t *testing.T) {
	var got [maxCountsOnce + 1]int64
	fields := make([]CountField, len(got))
	for i := range fields {
		fields[i] = CountField{Name: string(rune('a' + i)), Dst: &got[i]}
	}
	last := string(rune('a' + maxCountsOnce))
	if !Counts([]byte(`{"a":1,"`+last+`":9,"x":"y"}`), fields) || got[0] != 1 || got[maxCountsOnce] != 9 {
		t.Errorf("got %v", got)
	}
	if Counts([]byte(`{"a":2,"`+last+`":tru}`), fields) || got[0] != 1 {
		t.Errorf("a document that is not JSON: got %v", got)
	}
}

func TestStrings(t *testing.T) {
	got := Strings([]byte(`{"type":"overloaded_error","message":"Over\u006coaded","code":5,"type":"x"}`), "type", "message", "code", "none")
	if diff := cmp.Diff([]string{"x", "Overloaded", "", ""}, got); diff != "" {
		t.Error(diff)
	}
}

var countsSchema = NewCountSchema[countsDoc]()

func TestCountSchemaReadsTheTags(t *testing.T) {
	var d countsDoc
	got := countsSchema.Fields(&d)
	if diff := cmp.Diff(d.fields(), got); diff != "" {
		t.Error(diff)
	}
	if !countsSchema.Decode([]byte(`{"a_count":12,"bCount":3}`), &d) || d != (countsDoc{A: 12, B: 3}) {
		t.Errorf("Decode: %+v", d)
	}
	type other struct {
		N    int64 `json:",omitempty"`
		Skip int64 `json:"-"`
		M    int64 `json:"m"`
		n    int64
	}
	if names := NewCountSchema[other]().names; cmp.Diff([]string{"N", "m"}, names) != "" {
		t.Errorf("names %q", names)
	}
}

func TestCountSchemaRefusesOtherFields(t *testing.T) {
	defer func() {
		if recover() == nil {
			t.Error("a string field accepted as a count")
		}
	}()
	NewCountSchema[struct {
		S string `json:"s"`
	}]()
}

func BenchmarkCountSchemaDecode(b *testing.B) {
	doc := []byte(`{"a_count":12,"bCount":3}`)
	for b.Loop() {
		var d countsDoc
		countsSchema.Decode(doc, &d)
	}
}

func BenchmarkCountsLiteralFields(b *testing.B) {
	doc := []byte(`{"a_count":12,"bCount":3}`)
	for b.Loop() {
		var d countsDoc
		Counts(doc, d.fields())
	}
}
