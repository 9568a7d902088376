package jsonscan

import (
	"bytes"
	"strconv"
)

// CountField is one int64 member of an object of counts (a provider's usage
// object): its JSON name and where its value goes.
type CountField struct {
	Name string
	Dst  *int64
}

// Counts decodes the JSON object v into fields as json.Unmarshal would
// decode it into a struct of those int64 fields, without reflection: names
// matched exactly or else case-insensitively, the last copy winning, null
// leaving a count as it was (a null document all of them), and anything but an integer failing the whole
// decode after the counts before it were set. It reports whether the decode
// succeeded. The relay path's usage meters use it; the vendor packages'
// fuzz tests hold it to encoding/json over their structs.
func Counts(v []byte, fields []CountField) bool {
	if i := SkipSpace(v, 0); i < len(v) && v[i] == '{' && len(fields) <= maxCountsOnce {
		return countsOnce(v, fields)
	}
	if !Valid(v) {
		return false
	}
	v = bytes.TrimRight(v[SkipSpace(v, 0):], " \t\r\n")
	if string(v) == "null" {
		return true // as into a struct: nothing set, no error
	}
	if v[0] != '{' {
		return false
	}
	_, ok := countMembers(v, fields, false)
	return ok
}

// maxCountsOnce bounds the field list Counts reads in one checked walk,
// whose saved counts are on the stack: twice a schema's, for a list that
// reads two vendors' usage at once (the passthrough's Anthropic and Bedrock
// Converse "usage": nine counts). A longer list is checked by Valid first,
// a second pass whose 1.3 KB stack grows a relay goroutine's.
const maxCountsOnce = 2 * maxCounts

// countsOnce is Counts of an object crossed once: its members are read and
// checked in the same walk (MembersChecked), Valid runs only when the walk
// cannot tell, and the counts are put back as they were when v is not JSON
// (encoding/json sets nothing then).
func countsOnce(v []byte, fields []CountField) bool {
	var was [maxCountsOnce]int64
	for i, f := range fields {
		was[i] = *f.Dst
	}
	valid, ok := countMembers(v, fields, true)
	if !valid && !Valid(v) {
		for i, f := range fields {
			*f.Dst = was[i]
		}
		return false
	}
	return ok
}

// countMembers sets fields from the members of the object v (check: and
// reports whether the walk found v valid JSON, as MembersChecked does); ok
// is false when a count is not an integer.
func countMembers(v []byte, fields []CountField, check bool) (valid, ok bool) {
	ok = true
	each := func(name, value []byte) error {
		f := matchField(fields, name)
		if f == nil || Null(value) {
			return nil
		}
		n, isInt := PlainInt(value)
		if !isInt {
			var err error
			if n, err = strconv.ParseInt(string(value), 10, 64); err != nil {
				ok = false // a fraction, a string, an object...: as a type error, the decode goes on
				return nil
			}
		}
		*f.Dst = n
		return nil
	}
	if !check {
		Members(v, each)
		return false, ok
	}
	valid, err := MembersChecked(v, each)
	return valid && err == nil, ok
}

// matchField finds name's field as encoding/json does: exactly, else
// case-insensitively.
func matchField(fields []CountField, name []byte) *CountField {
	for i := range fields {
		if fields[i].Name == string(name) {
			return &fields[i]
		}
	}
	for i := range fields {
		if bytes.EqualFold([]byte(fields[i].Name), name) {
			return &fields[i]
		}
	}
	return nil
}

// Strings returns the string values of the named members of the object
// obj (the last copy of each; "" for one absent or not a string): for the
// few text fields of a provider's error or refusal.
func Strings(obj []byte, names ...string) []string {
	out := make([]string, len(names))
	Members(obj, func(name, v []byte) error {
		for i, n := range names {
			if string(name) == n {
				out[i], _ = String(v)
			}
		}
		return nil
	})
	return out
}

// NonNegative reports whether every count of fields is at least 0: a
// translator's check on top of Counts (a count below 0 is a broken answer).
func NonNegative(fields []CountField) bool {
	for _, f := range fields {
		if *f.Dst < 0 {
			return false
		}
	}
	return true
}
