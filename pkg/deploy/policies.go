package deploy

import (
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"sort"
	"strings"

	"github.com/sluice-gateway/sluice/pkg/server"
)

// A function's permissions are managed policies of the template's
// hand-written part: Generate reads what each grants, statement by
// statement, and gives each function the ones whose grants together are
// exactly its capabilities'.

// grantKey is one action on one resource, under an IAM condition block and
// a template condition.
type grantKey struct{ action, resource, condition, when string }

func (k grantKey) String() string {
	s := k.action + " on " + k.resource
	if k.condition != "" {
		s += " if " + k.condition
	}
	if k.when != "" {
		s += " when " + k.when
	}
	return s
}

func expand(g Grant) []grantKey {
	cond := canonicalCondition(g.Condition)
	var out []grantKey
	for _, a := range g.Actions {
		for _, r := range g.Resources {
			out = append(out, grantKey{a, r, cond, g.When})
		}
	}
	return out
}

func canonicalCondition(c map[string]map[string][]string) string {
	if len(c) == 0 {
		return ""
	}
	sorted := make(map[string]map[string][]string, len(c))
	for op, keys := range c {
		sorted[op] = make(map[string][]string, len(keys))
		for k, vals := range keys {
			sorted[op][k] = slices.Sorted(slices.Values(vals))
		}
	}
	b, _ := json.Marshal(sorted)
	return string(b)
}

// MaxManagedPolicies is how many managed policies IAM lets a role have
// (the default quota).
const MaxManagedPolicies = 10

// MaxRolePolicies is how many a function's role may have here, SAM's
// included: three under IAM's quota, so one more capability (or SAM
// attaching one more) never breaks a deploy.
const MaxRolePolicies = MaxManagedPolicies - 3

// statement adds what one policy statement grants to got, under template
// condition when. !If [C, a, b] grants a when C holds and b when it does not.
func (c *checker) statement(name, where string, st any, when string, got map[grantKey]bool) {
	if isNoValue(st) {
		return
	}
	m, _ := st.(map[string]any)
	if args, ok := m["Fn::If"].([]any); ok && len(m) == 1 && len(args) == 3 {
		if when != "" {
			c.fail("%s: %s: nested !If in a statement is not supported", name, where)
			return
		}
		cond := Render(args[0])
		c.statement(name, where, args[1], cond, got)
		c.statement(name, where, args[2], "!"+cond, got)
		return
	}
	if m == nil || isIntrinsic(m) {
		c.fail("%s: %s: not a statement", name, where)
		return
	}
	for k := range m {
		if !slices.Contains([]string{"Sid", "Effect", "Action", "Resource", "Condition"}, k) {
			c.fail("%s: %s: %s is not supported (write Allow statements with Action and Resource)", name, where, k)
			return
		}
	}
	if Render(m["Effect"]) != "Allow" {
		c.fail("%s: %s: Effect %q, want Allow", name, where, Render(m["Effect"]))
		return
	}
	cond := map[string]map[string][]string{}
	if cm, ok := m["Condition"].(map[string]any); ok {
		for op, keys := range cm {
			km, _ := keys.(map[string]any)
			cond[op] = map[string][]string{}
			for key, vals := range km {
				cond[op][key] = renderList(vals)
			}
		}
	} else if m["Condition"] != nil {
		c.fail("%s: %s: Condition is not a map", name, where)
	}
	canon := canonicalCondition(cond)
	for _, a := range renderList(m["Action"]) {
		for _, r := range renderList(m["Resource"]) {
			got[grantKey{a, r, canon, when}] = true
		}
	}
}

// policyGrants is what managed policy id grants, under its own condition
// (read once: a malformed statement is one problem).
func (c *checker) policyGrants(id string) map[grantKey]bool {
	if got, ok := c.grants[id]; ok {
		return got
	}
	cond, _ := get(c.resources[id], "Condition").(string)
	got := map[grantKey]bool{}
	for j, st := range list(get(c.props(id), "PolicyDocument", "Statement")) {
		c.statement("policy "+id, fmt.Sprintf("%s.Statement[%d]", id, j), st, cond, got)
	}
	if c.grants == nil {
		c.grants = map[string]map[grantKey]bool{}
	}
	c.grants[id] = got
	return got
}

// choosePolicies picks managed policies of the core whose grants together
// are exactly f's: only policies that grant nothing f does not need, the
// one covering the most of what is left first. A policy under a template
// condition is taken under !If.
func (c *checker) choosePolicies(f Function) ([]string, error) {
	want := map[grantKey]bool{}
	for _, cp := range f.Capabilities {
		for _, g := range Grants(cp) {
			for _, k := range expand(g) {
				want[k] = true
			}
		}
	}
	type candidate struct {
		id     string
		grants map[grantKey]bool
	}
	var cands []candidate
	for _, id := range c.ofType("AWS::IAM::ManagedPolicy") {
		g := c.policyGrants(id)
		if len(g) > 0 && !slices.ContainsFunc(slices.Collect(maps.Keys(g)), func(k grantKey) bool { return !want[k] }) {
			cands = append(cands, candidate{id, g})
		}
	}
	left := maps.Clone(want)
	var chosen []string
	for len(left) > 0 {
		best, bestN := -1, 0
		for i, cand := range cands {
			n := 0
			for k := range cand.grants {
				if left[k] {
					n++
				}
			}
			if n > bestN {
				best, bestN = i, n
			}
		}
		if best < 0 {
			var missing []string
			for k := range left {
				missing = append(missing, k.String())
			}
			sort.Strings(missing)
			return nil, fmt.Errorf("deploy: function %s: no managed policy of template.yaml grants %s without more than %s needs (%s): add one to the permissions section",
				f.Name, strings.Join(missing, "; "), f.Name, joinCaps(f.Capabilities))
		}
		for k := range cands[best].grants {
			delete(left, k)
		}
		chosen = append(chosen, cands[best].id)
		cands = slices.Delete(cands, best, best+1)
	}
	sam := 1 // AWSLambdaBasicExecutionRole
	if Render(get(c.t, "Globals", "Function", "Tracing")) == "Active" {
		sam++ // AWSXrayWriteOnlyAccess
	}
	if f.Queue != "" {
		sam++ // AWSLambdaSQSQueueExecutionRole
	}
	if n := len(chosen) + sam; n > MaxRolePolicies {
		return nil, fmt.Errorf("deploy: function %s: %d managed policies with the %d SAM attaches, over %d (IAM allows %d a role; the rest is headroom for a new capability): bundle capabilities that go together (%s) into one policy of template.yaml",
			f.Name, n, sam, MaxRolePolicies, MaxManagedPolicies, joinCaps(f.Capabilities))
	}
	sort.Strings(chosen)
	out := make([]string, 0, len(chosen))
	var conditional []string
	for _, id := range chosen {
		if cond, _ := get(c.resources[id], "Condition").(string); cond != "" {
			conditional = append(conditional, fmt.Sprintf("!If [%s, !Ref %s, !Ref AWS::NoValue]", cond, id))
			continue
		}
		out = append(out, "!Ref "+id)
	}
	return append(out, conditional...), nil
}

func joinCaps(caps []server.Capability) string {
	s := make([]string, len(caps))
	for i, c := range caps {
		s[i] = string(c)
	}
	return strings.Join(s, ", ")
}
