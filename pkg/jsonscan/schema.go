package jsonscan

import (
	"fmt"
	"reflect"
	"strings"
)

// CountSchema is the field list of a struct of int64 counts, T, read from
// its json tags once (NewCountSchema), so a usage struct is written once:
// its tags are both encoding/json's schema and Counts'.
//
// Reflection reads the tags once; a decode reaches each count by its field
// index (reflect, no allocation) and its field list stays on the stack: against a
// hand-written list, the one cost is that the decoded struct moves to the
// heap (one allocation of a few words; BenchmarkCountSchemaDecode,
// BenchmarkCountsLiteralFields).
type CountSchema[T any] struct {
	names  []string
	fields []int // T's field index of each name
}

// NewCountSchema reads T's fields: each must be an int64, and there may be
// up to 8 (it panics otherwise, at start-up), named as encoding/json names
// it (the tag's name, else the Go name); fields tagged "-" and unexported
// ones are left out.
func NewCountSchema[T any]() CountSchema[T] {
	var s CountSchema[T]
	t := reflect.TypeFor[T]()
	for i := range t.NumField() {
		f := t.Field(i)
		name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
		if !f.IsExported() || name == "-" {
			continue
		}
		if f.Type.Kind() != reflect.Int64 {
			panic(fmt.Sprintf("jsonscan: %s.%s is not an int64 count", t, f.Name))
		}
		if name == "" {
			name = f.Name
		}
		if len(s.names) == maxCounts {
			panic(fmt.Sprintf("jsonscan: %s has more than %d counts", t, maxCounts))
		}
		s.names = append(s.names, name)
		s.fields = append(s.fields, i)
	}
	return s
}

// Fields are p's counts for Counts and NonNegative.
func (s CountSchema[T]) Fields(p *T) []CountField {
	out := make([]CountField, len(s.names))
	s.fill(out, p)
	return out
}

// fill sets fields (len(s.names) of them) to p's counts.
func (s CountSchema[T]) fill(fields []CountField, p *T) {
	v := reflect.ValueOf(p).Elem()
	for i := range fields {
		fields[i] = CountField{Name: s.names[i], Dst: v.Field(s.fields[i]).Addr().Interface().(*int64)}
	}
}

// Decode decodes the JSON object v into *p as json.Unmarshal would (see
// Counts).
func (s CountSchema[T]) Decode(v []byte, p *T) bool {
	var buf [maxCounts]CountField
	fields := buf[:len(s.names)]
	s.fill(fields, p)
	return Counts(v, fields)
}

// maxCounts bounds a schema's counts (every usage object has fewer), so a
// decode's field list fits on the stack.
const maxCounts = 8
