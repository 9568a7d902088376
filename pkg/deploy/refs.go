package deploy

import (
	"fmt"
	"regexp"
	"sort"
	"strings"
)

// The generated sections refer to the core by name — the API, the queues,
// the managed policies and their conditions, the alarm topic, the timeout,
// retention and reserved-concurrency parameters — and Generate writes those
// names whether or not the core still has them. checkReferences holds every
// reference of the template to something that exists.

// subVar is a ${Name} or ${Name.Attr} of a !Sub string (${!Literal} is
// not one).
var subVar = regexp.MustCompile(`\$\{([^!}][^}]*)\}`)

// checkReferences: every !Ref names a parameter, a resource or a
// pseudo-parameter; every !GetAtt and ${X.Y} a resource; every ${X} of a
// !Sub one of these or the !Sub's own variable; every condition (a
// resource's or an output's Condition, !If, !Condition) one of Conditions.
func (c *checker) checkReferences() {
	seen := map[string]bool{}
	report := func(where, format string, args ...any) {
		msg := fmt.Sprintf(where+": "+format, args...)
		if !seen[msg] {
			seen[msg] = true
			c.problems = append(c.problems, fmt.Errorf("%s", msg))
		}
	}
	for _, section := range []string{"Resources", "Outputs", "Conditions", "Globals"} {
		m, _ := c.t[section].(map[string]any)
		keys := make([]string, 0, len(m))
		for k := range m {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		for _, k := range keys {
			where := strings.ToLower(strings.TrimSuffix(section, "s")) + " " + k
			if section == "Globals" {
				where = "globals " + k
			}
			if cond, ok := get(m[k], "Condition").(string); ok && section != "Conditions" && !c.isCondition(cond) {
				report(where, "Condition %s is no condition of the template", cond)
			}
			c.walkReferences(m[k], func(format string, args ...any) { report(where, format, args...) })
		}
	}
}

// walkReferences reports each reference in v that names nothing.
func (c *checker) walkReferences(v any, fail func(string, ...any)) {
	switch v := v.(type) {
	case []any:
		for _, e := range v {
			c.walkReferences(e, fail)
		}
	case map[string]any:
		if !isIntrinsic(v) {
			for _, e := range v {
				c.walkReferences(e, fail)
			}
			return
		}
		for name, arg := range v {
			c.checkIntrinsic(name, arg, fail)
		}
	}
}

func (c *checker) checkIntrinsic(name string, arg any, fail func(string, ...any)) {
	args, _ := arg.([]any)
	switch name {
	case "Ref":
		if s, ok := arg.(string); ok && !c.isParameter(s) && c.resources[s] == nil {
			fail("!Ref %s names no parameter or resource of the template", s)
		}
		return
	case "Fn::GetAtt":
		if len(args) == 2 {
			if s, ok := args[0].(string); ok && c.resources[s] == nil {
				fail("!GetAtt %s.%s names no resource of the template", s, Render(args[1]))
			}
		}
		return
	case "Condition":
		if s, ok := arg.(string); ok && !c.isCondition(s) {
			fail("!Condition %s is no condition of the template", s)
		}
		return
	case "Fn::If":
		if len(args) == 3 {
			if s, ok := args[0].(string); ok && !c.isCondition(s) {
				fail("!If [%s, …]: %s is no condition of the template", s, s)
			}
			c.walkReferences(args[1:], fail)
		}
		return
	case "Fn::Sub":
		s, _ := arg.(string)
		var vars map[string]any
		if len(args) == 2 {
			s, _ = args[0].(string)
			vars, _ = args[1].(map[string]any)
			c.walkReferences(args[1], fail)
		}
		for _, m := range subVar.FindAllStringSubmatch(s, -1) {
			ref := m[1]
			if _, ok := vars[ref]; ok {
				continue
			}
			res, attr, isAtt := strings.Cut(ref, ".")
			switch {
			case isAtt && c.resources[res] == nil:
				fail("!Sub ${%s}: %s is no resource of the template (for its %s)", ref, res, attr)
			case !isAtt && !c.isParameter(ref) && c.resources[ref] == nil:
				fail("!Sub ${%s} names no parameter or resource of the template", ref)
			}
		}
		return
	}
	c.walkReferences(arg, fail)
}

// isParameter: a parameter of the template, or a pseudo-parameter.
func (c *checker) isParameter(name string) bool {
	return strings.HasPrefix(name, "AWS::") || get(c.t, "Parameters", name) != nil
}

func (c *checker) isCondition(name string) bool { return get(c.t, "Conditions", name) != nil }
