package logevent

import (
	"bytes"
	"encoding/json"
	"strconv"

	"github.com/sluice-gateway/sluice/pkg/jsonscan"
)

// Params builds an event's ModelParameters: the JSON object encoding/json
// writes for a map of the parameters given — members in key order, strings
// with their HTML escapes, raw values compacted. The event keeps it as
// bytes until it is delivered: a map of interfaces would be some 350
// pointerful bytes a call for every collection to scan. Callers add the
// members in key order (their tests hold the result to json.Marshal of the
// map); a builder that added none ends as nil, which omits the member.
type Params struct {
	o jsonscan.Object
}

// paramsCap is the first buffer's size: a usual call's few parameters.
const paramsCap = 64

func (p *Params) key(name string) {
	if p.o.B == nil {
		p.o = jsonscan.StartObject(make([]byte, 0, paramsCap))
	}
	p.o.Key(name)
}

// String adds a string member.
func (p *Params) String(name, v string) {
	p.key(name)
	p.o.B = appendHTMLString(p.o.B, v)
}

// Strings adds an array of strings (null for a nil slice).
func (p *Params) Strings(name string, v []string) {
	p.key(name)
	if v == nil {
		p.o.B = append(p.o.B, "null"...)
		return
	}
	p.o.B = append(p.o.B, '[')
	for i, s := range v {
		if i > 0 {
			p.o.B = append(p.o.B, ',')
		}
		p.o.B = appendHTMLString(p.o.B, s)
	}
	p.o.B = append(p.o.B, ']')
}

// Int adds an integer member.
func (p *Params) Int(name string, v int64) {
	p.key(name)
	p.o.B = strconv.AppendInt(p.o.B, v, 10)
}

// Float adds a number member. v must be finite, as a parsed request's
// numbers are.
func (p *Params) Float(name string, v float64) {
	p.key(name)
	p.o.B = jsonscan.AppendFloat(p.o.B, v, 64)
}

// Bool adds a boolean member.
func (p *Params) Bool(name string, v bool) {
	p.key(name)
	p.o.B = strconv.AppendBool(p.o.B, v)
}

// Raw adds a member whose value is the JSON raw (as a request held it),
// written as encoding/json writes a json.RawMessage: compacted, with HTML
// escapes; null when empty. Invalid JSON, which a parsed request does not
// hold, is written as null.
func (p *Params) Raw(name string, raw []byte) {
	p.key(name)
	if len(raw) == 0 {
		p.o.B = append(p.o.B, "null"...)
		return
	}
	var buf bytes.Buffer
	if err := json.Compact(&buf, raw); err != nil {
		p.o.B = append(p.o.B, "null"...)
		return
	}
	mark := len(p.o.B)
	p.o.B = append(p.o.B, buf.Bytes()...)
	if bytes.ContainsAny(p.o.B[mark:], "<>&") {
		buf.Reset()
		json.HTMLEscape(&buf, p.o.B[mark:])
		p.o.B = append(p.o.B[:mark], buf.Bytes()...)
	}
}

// End returns the object built: nil when no member was added.
func (p *Params) End() json.RawMessage {
	if p.o.B == nil {
		return nil
	}
	return p.o.End()
}

// appendHTMLString appends s as encoding/json writes a string by default:
// jsonscan.AppendString's form with <, > and & escaped too.
func appendHTMLString(b []byte, s string) []byte {
	mark := len(b)
	b = jsonscan.AppendString(b, s)
	if !bytes.ContainsAny(b[mark:], "<>&") {
		return b
	}
	var buf bytes.Buffer
	json.HTMLEscape(&buf, b[mark:])
	return append(b[:mark], buf.Bytes()...)
}
