package deploy

import "strconv"

// A setting may be a template parameter (a function's Timeout !Ref
// PassthroughTimeout). The check evaluates such values for every value the
// parameter may take.

// assignment is one value of one parameter ({} for none).
type assignment struct{ param, value string }

// String says which value a problem was found with ("" for none).
func (a assignment) String() string {
	if a.param == "" {
		return ""
	}
	return " (with " + a.param + "=" + a.value + ")"
}

// assignments lists the values of the parameter v refers to — a !Ref, or
// the key of a !FindInMap — one assignment per AllowedValues entry (or the
// Default when the parameter allows anything); one empty assignment when v
// refers to none.
func (c *checker) assignments(v any) []assignment {
	param := refParam(v)
	def, _ := get(c.t, "Parameters", param).(map[string]any)
	if def == nil {
		return []assignment{{}}
	}
	var out []assignment
	for _, a := range list(def["AllowedValues"]) {
		out = append(out, assignment{param, Render(a)})
	}
	if len(out) == 0 {
		out = append(out, assignment{param, Render(def["Default"])})
	}
	return out
}

// refParam is the parameter v refers to: !Ref P, or !FindInMap [M, !Ref P, K].
func refParam(v any) string {
	m, _ := v.(map[string]any)
	if ref, ok := m["Ref"].(string); ok {
		return ref
	}
	if args, ok := m["Fn::FindInMap"].([]any); ok && len(args) == 3 {
		return refParam(args[1])
	}
	return ""
}

// intAt evaluates v, a number, a !Ref to a parameter or a !FindInMap, with
// a's parameter set to a's value and any other parameter at its Default. ok
// is false when v is none of these or does not resolve to an integer.
func (c *checker) intAt(v any, a assignment) (int, bool) {
	s, ok := c.stringAt(v, a)
	if !ok {
		return 0, false
	}
	n, err := strconv.Atoi(s)
	return n, err == nil
}

func (c *checker) stringAt(v any, a assignment) (string, bool) {
	switch v := v.(type) {
	case int, int64, uint64, float64, string:
		return Render(v), true
	case map[string]any:
		if ref, ok := v["Ref"].(string); ok {
			if ref == a.param {
				return a.value, true
			}
			def := get(c.t, "Parameters", ref, "Default")
			return Render(def), def != nil
		}
		if args, ok := v["Fn::FindInMap"].([]any); ok && len(args) == 3 {
			name, ok1 := c.stringAt(args[0], a)
			top, ok2 := c.stringAt(args[1], a)
			second, ok3 := c.stringAt(args[2], a)
			val := get(c.t, "Mappings", name, top, second)
			return Render(val), ok1 && ok2 && ok3 && val != nil
		}
	}
	return "", false
}
