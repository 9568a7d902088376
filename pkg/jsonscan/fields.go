package jsonscan

import "strings"

// Fields walks the JSON object obj as encoding/json decodes it into a
// struct whose members are names, for callers that decode a few members of
// a large document without reflection and fall back to encoding/json when
// the document is not in its usual form: f gets the index in names and the
// raw value of each member named exactly so, and other members are skipped.
// Fields reports false — not sure, decode with encoding/json — when obj is
// not an object, a name comes twice (encoding/json merges or replaces), a
// member's name matches one of names only without regard to case (which
// encoding/json accepts), or f reports false. It checks obj's structure,
// not its strings: a caller checks the document first (Valid). names holds
// 64 names at most.
func Fields(obj []byte, names []string, f func(i int, v []byte) bool) bool {
	_, _, ok := fields(obj, names, f, nil, false, false)
	return ok
}

// FieldsPrefixBy is Fields over the object that starts obj, as
// MembersPrefix reads it (end is the index past it; what follows is not
// read), where delimit may cross a member's value itself as for
// MembersCheckedBy: f then gets the value delimit delimited. A nested
// object (an answer's choices, a choice's message) is so read in one
// crossing, not delimited first and walked again. valid is
// MembersPrefixChecked's: true means obj[:end] is JSON as Valid would say,
// so a caller reading a whole document need not run Valid first.
func FieldsPrefixBy(obj []byte, names []string, f func(i int, v []byte) bool, delimit Delimit) (end int, valid, ok bool) {
	return fields(obj, names, f, delimit, true, true)
}

func fields(obj []byte, names []string, f func(i int, v []byte) bool, delimit Delimit, check, prefix bool) (int, bool, bool) {
	var seen uint64
	end, valid, err := walkMembers(obj, func(name, v []byte) error {
		for i, n := range names {
			if string(name) == n {
				if seen&(1<<i) != 0 || !f(i, v) {
					return ErrSyntax
				}
				seen |= 1 << i
				return nil
			}
		}
		for _, n := range names {
			if strings.EqualFold(string(name), n) {
				return ErrSyntax
			}
		}
		return nil
	}, delimit, check, prefix)
	return end, valid, err == nil
}
