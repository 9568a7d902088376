package main

import (
	"bytes"
	"os"
	"strings"
	"testing"
)

// TestGeneratedCodecIsCurrent fails when event.go changed and codec_gen.go
// was not regenerated.
func TestGeneratedCodecIsCurrent(t *testing.T) {
	src, err := os.ReadFile("../event.go")
	if err != nil {
		t.Fatal(err)
	}
	want, err := generate(src, "Event")
	if err != nil {
		t.Fatal(err)
	}
	got, err := os.ReadFile("../codec_gen.go")
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want) {
		t.Fatal("pkg/logevent/codec_gen.go is not current: run go generate ./pkg/logevent")
	}
}

// TestGenerateRefusesWhatItCannotWrite: a shape the generated code would
// get wrong is an error, not a silent difference from encoding/json.
func TestGenerateRefusesWhatItCannotWrite(t *testing.T) {
	for _, tc := range []struct{ name, decl, want string }{
		{"embedded", "type E struct{ Inner }\ntype Inner struct{ A string }", "embedded"},
		{"string option", "type E struct{ N int64 `json:\"n,string\"` }", `option "string"`},
		{"raw without omitempty", "type E struct{ R json.RawMessage `json:\"r\"` }", "omitempty"},
		{"omitempty on a pointer json writes", "type E struct{ P *[]int `json:\"p,omitempty\"` }", "omitempty"},
		{"name to escape", "type E struct{ A string `json:\"a<b\"` }", "escaping"},
		{"no such root", "type F struct{}", "no struct type E"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := generate([]byte("package p\n"+tc.decl), "E")
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("err = %v, want one naming %q", err, tc.want)
			}
		})
	}
}

// TestGenerateFollowsNestedTypes: every struct the root reaches gets its
// appender and reader, once, and a type needing no check cannot fail.
func TestGenerateFollowsNestedTypes(t *testing.T) {
	src := "package p\ntype E struct{ A *Inner `json:\"a\"`; B Inner `json:\"b\"`; C *Other `json:\"c,omitempty\"`; D Other `json:\"d\"` }\n" +
		"type Inner struct{ S string `json:\"s\"` }\ntype Other struct{ F float64 `json:\"f\"` }\ntype Unused struct{}\n"
	out, err := generate([]byte(src), "E")
	if err != nil {
		t.Fatal(err)
	}
	code := string(out)
	for _, want := range []string{
		"func appendE(b []byte, v *E) ([]byte, error)", "func appendInner(b []byte, v *Inner) []byte",
		"func appendOther(b []byte, v *Other) ([]byte, error)", "func readE(", "func readInner(", "func readOther(",
		`o.Raw("a", null)`,
	} {
		if strings.Count(code, want) != 1 {
			t.Errorf("want %q once in\n%s", want, code)
		}
	}
	if strings.Contains(code, "Unused") || strings.Contains(code, `"encoding/json"`) {
		t.Errorf("unreached type or unneeded import in\n%s", code)
	}
}
