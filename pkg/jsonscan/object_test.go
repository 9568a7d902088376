package jsonscan

import (
	"bytes"
	"encoding/json"
	"testing"
)

func TestObjectWritesWhatEncodingJSONWrites(t *testing.T) {
	type inner struct {
		A string `json:"a,omitempty"`
	}
	type doc struct {
		ID    string          `json:"id"`
		Empty string          `json:"empty,omitempty"`
		Note  string          `json:"note,omitempty"`
		N     int64           `json:"n"`
		F     float64         `json:"f"`
		OK    bool            `json:"ok"`
		Raw   json.RawMessage `json:"raw,omitempty"`
		None  json.RawMessage `json:"none,omitempty"`
		Tags  []string        `json:"tags"`
		Nil   []string        `json:"nil"`
		In    inner           `json:"in"`
	}
	v := doc{ID: "x\"y\n\u2028", Note: "ok", N: -7, F: 2.5e-7, OK: true, Raw: json.RawMessage(`{"k":[1,2]}`), Tags: []string{"a", "b<c>"}, In: inner{A: "z"}}
	want := marshalNoHTMLEscape(t, v)
	o := StartObject([]byte("prefix:"))
	o.String("id", v.ID)
	o.StringOmitEmpty("empty", v.Empty)
	o.StringOmitEmpty("note", v.Note)
	o.Int("n", v.N)
	o.Float("f", v.F)
	o.Bool("ok", v.OK)
	o.RawOmitEmpty("raw", v.Raw)
	o.RawOmitEmpty("none", v.None)
	o.Strings("tags", v.Tags)
	o.Strings("nil", v.Nil)
	o.Key("in")
	in := StartObject(o.B)
	in.StringOmitEmpty("a", v.In.A)
	o.B = in.End()
	got := o.End()
	if string(got) != "prefix:"+string(want) {
		t.Errorf("got  %s\nwant prefix:%s", got, want)
	}
}

// marshalNoHTMLEscape is encoding/json's output without HTML escapes,
// which the writer does not make.
func marshalNoHTMLEscape(t *testing.T, v any) []byte {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		t.Fatal(err)
	}
	return bytes.TrimSuffix(buf.Bytes(), []byte("\n"))
}
