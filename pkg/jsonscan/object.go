package jsonscan

import "strconv"

// Object appends a JSON object to a byte slice member by member, as
// encoding/json would write the struct it stands for, without
// reflection: callers on hot paths (log events, their deliveries) write
// the members in their struct's order and skip what `omitempty` skips.
// Member names are written as given: they must be plain ASCII needing no
// escape (Go identifiers and JSON tag names are). String values must be
// valid UTF-8 (see AppendString); raw values valid JSON.
//
//	o := jsonscan.StartObject(b)
//	o.String("id", id)
//	o.Key("metadata")
//	o.B = appendMetadata(o.B, md)
//	b = o.End()
type Object struct {
	B       []byte // the bytes so far; a value written after Key goes here
	members int
}

// StartObject opens an object at the end of b.
func StartObject(b []byte) Object { return Object{B: append(b, '{')} }

// End closes the object and returns the bytes.
func (o *Object) End() []byte { return append(o.B, '}') }

// Key writes the name of the next member; its value is the caller's to
// append to o.B.
func (o *Object) Key(name string) {
	if o.members > 0 {
		o.B = append(o.B, ',')
	}
	o.members++
	o.B = append(o.B, '"')
	o.B = append(o.B, name...)
	o.B = append(o.B, '"', ':')
}

// String writes a string member.
func (o *Object) String(name, v string) {
	o.Key(name)
	o.B = AppendString(o.B, v)
}

// StringOmitEmpty writes a string member unless v is empty.
func (o *Object) StringOmitEmpty(name, v string) {
	if v != "" {
		o.String(name, v)
	}
}

// Int writes an integer member.
func (o *Object) Int(name string, v int64) {
	o.Key(name)
	o.B = strconv.AppendInt(o.B, v, 10)
}

// Float writes a float64 member (finite: see AppendFloat).
func (o *Object) Float(name string, v float64) {
	o.Key(name)
	o.B = AppendFloat(o.B, v, 64)
}

// Bool writes a boolean member.
func (o *Object) Bool(name string, v bool) {
	o.Key(name)
	o.B = strconv.AppendBool(o.B, v)
}

// Raw writes a member whose value is already JSON.
func (o *Object) Raw(name string, v []byte) {
	o.Key(name)
	o.B = append(o.B, v...)
}

// RawOmitEmpty writes a raw member unless v is empty (json.RawMessage's
// omitempty).
func (o *Object) RawOmitEmpty(name string, v []byte) {
	if len(v) > 0 {
		o.Raw(name, v)
	}
}

// Strings writes an array of strings (null for a nil slice, as
// encoding/json does).
func (o *Object) Strings(name string, v []string) {
	o.Key(name)
	o.B = appendStrings(o.B, v)
}

// appendStrings appends v as a JSON array of strings, null when v is nil.
func appendStrings(b []byte, v []string) []byte {
	if v == nil {
		return append(b, "null"...)
	}
	b = append(b, '[')
	for i, s := range v {
		if i > 0 {
			b = append(b, ',')
		}
		b = AppendString(b, s)
	}
	return append(b, ']')
}
