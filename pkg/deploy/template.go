package deploy

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"sort"
	"strings"

	"gopkg.in/yaml.v3"
)

// Template is a parsed CloudFormation (SAM) template: maps, lists, strings,
// numbers and bools, with every intrinsic function in its long form
// ({"Ref": X}, {"Fn::GetAtt": [X, Y]}, {"Fn::Sub": s}, …), as CloudFormation
// itself reads the short forms (!Ref X, !GetAtt X.Y, !Sub s).
type Template map[string]any

// Load reads and parses the template at path.
func Load(path string) (Template, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("deploy: read template: %w", err)
	}
	return Parse(data)
}

// Parse parses a template written in YAML (JSON is YAML too).
func Parse(data []byte) (Template, error) {
	dec := yaml.NewDecoder(bytes.NewReader(data))
	var doc, more yaml.Node
	if err := dec.Decode(&doc); err != nil {
		return nil, fmt.Errorf("deploy: parse template: %w", err)
	}
	if doc.Kind != yaml.DocumentNode || len(doc.Content) != 1 || dec.Decode(&more) != io.EOF {
		return nil, fmt.Errorf("deploy: parse template: want one YAML document")
	}
	v, err := decode(doc.Content[0])
	if err != nil {
		return nil, fmt.Errorf("deploy: parse template: %w", err)
	}
	m, ok := v.(map[string]any)
	if !ok {
		return nil, fmt.Errorf("deploy: parse template: the document is not a mapping")
	}
	return Template(m), nil
}

// decode turns a YAML node into plain values, expanding short-form
// intrinsics. CloudFormation accepts neither aliases nor merge keys, so
// neither does decode.
func decode(n *yaml.Node) (any, error) {
	if strings.HasPrefix(n.Tag, "!") && !strings.HasPrefix(n.Tag, "!!") { // !!str, !!map … are YAML's own
		return decodeIntrinsic(n)
	}
	switch n.Kind {
	case yaml.MappingNode:
		m := make(map[string]any, len(n.Content)/2)
		for i := 0; i+1 < len(n.Content); i += 2 {
			k := n.Content[i]
			if k.Kind != yaml.ScalarNode || k.Tag == "!!merge" {
				return nil, fmt.Errorf("line %d: keys must be plain strings (no merge keys)", k.Line)
			}
			if _, dup := m[k.Value]; dup {
				return nil, fmt.Errorf("line %d: duplicate key %q", k.Line, k.Value)
			}
			v, err := decode(n.Content[i+1])
			if err != nil {
				return nil, err
			}
			m[k.Value] = v
		}
		return m, nil
	case yaml.SequenceNode:
		l := make([]any, 0, len(n.Content))
		for _, c := range n.Content {
			v, err := decode(c)
			if err != nil {
				return nil, err
			}
			l = append(l, v)
		}
		return l, nil
	case yaml.ScalarNode:
		var v any
		if err := n.Decode(&v); err != nil {
			return nil, fmt.Errorf("line %d: %w", n.Line, err)
		}
		return v, nil
	case yaml.AliasNode:
		return nil, fmt.Errorf("line %d: CloudFormation does not accept YAML aliases", n.Line)
	}
	return nil, fmt.Errorf("line %d: unexpected YAML node", n.Line)
}

// decodeIntrinsic expands !Name value into {"Fn::Name": value} (!Ref and
// !Condition keep their names; !GetAtt A.B becomes ["A", "B"]).
func decodeIntrinsic(n *yaml.Node) (any, error) {
	name := strings.TrimPrefix(n.Tag, "!")
	var arg any
	if n.Kind == yaml.ScalarNode {
		arg = n.Value // a tagged scalar is the string as written
	} else {
		plain := *n
		plain.Tag = ""
		v, err := decode(&plain)
		if err != nil {
			return nil, err
		}
		arg = v
	}
	switch name {
	case "Ref", "Condition":
		return map[string]any{name: arg}, nil
	case "GetAtt":
		if s, ok := arg.(string); ok {
			res, attr, found := strings.Cut(s, ".")
			if !found {
				return nil, fmt.Errorf("line %d: !GetAtt %q: want Resource.Attribute", n.Line, s)
			}
			arg = []any{res, attr}
		}
	}
	return map[string]any{"Fn::" + name: arg}, nil
}

// Render renders a template value as one string, so values can be compared
// whatever form the template writes them in: !Ref X → ${X}, !GetAtt X.Y →
// ${X.Y}, !Sub s → s (with its variable map applied), !Join joins, !If
// [c, a, b] → If(c,a,b); other intrinsics render as Fn::Name(args); plain
// strings, numbers and bools as themselves; anything else as JSON.
func Render(v any) string {
	switch v := v.(type) {
	case nil:
		return ""
	case string:
		return v
	case bool, int, int64, float64, uint64:
		return fmt.Sprint(v)
	case map[string]any:
		if len(v) == 1 {
			for k, arg := range v {
				if s, ok := renderIntrinsic(k, arg); ok {
					return s
				}
			}
		}
	}
	b, _ := json.Marshal(v) // maps marshal with sorted keys
	return string(b)
}

func renderIntrinsic(name string, arg any) (string, bool) {
	args, _ := arg.([]any)
	switch name {
	case "Ref":
		return "${" + Render(arg) + "}", true
	case "Fn::GetAtt":
		if len(args) == 2 {
			return "${" + Render(args[0]) + "." + Render(args[1]) + "}", true
		}
	case "Fn::Sub":
		if s, ok := arg.(string); ok {
			return s, true
		}
		if len(args) == 2 {
			s := Render(args[0])
			vars, _ := args[1].(map[string]any)
			keys := make([]string, 0, len(vars))
			for k := range vars {
				keys = append(keys, k)
			}
			sort.Strings(keys)
			for _, k := range keys {
				s = strings.ReplaceAll(s, "${"+k+"}", Render(vars[k]))
			}
			return s, true
		}
	case "Fn::Join":
		if len(args) == 2 {
			parts, _ := args[1].([]any)
			out := make([]string, len(parts))
			for i, p := range parts {
				out[i] = Render(p)
			}
			return strings.Join(out, Render(args[0])), true
		}
	case "Fn::If":
		if len(args) == 3 {
			return "If(" + Render(args[0]) + "," + Render(args[1]) + "," + Render(args[2]) + ")", true
		}
	}
	if strings.HasPrefix(name, "Fn::") || name == "Condition" {
		if args == nil {
			args = []any{arg}
		}
		out := make([]string, len(args))
		for i, a := range args {
			out[i] = Render(a)
		}
		return name + "(" + strings.Join(out, ",") + ")", true
	}
	return "", false
}

// get walks maps by keys; nil when a key is missing or a value is no map.
func get(v any, keys ...string) any {
	if t, ok := v.(Template); ok {
		v = map[string]any(t)
	}
	for _, k := range keys {
		m, ok := v.(map[string]any)
		if !ok {
			return nil
		}
		v = m[k]
	}
	return v
}

// list returns v as a list: a list as it is, a single value as a list of one.
func list(v any) []any {
	switch v := v.(type) {
	case nil:
		return nil
	case []any:
		return v
	}
	return []any{v}
}

// renderList renders each element of v (see list).
func renderList(v any) []string {
	var out []string
	for _, e := range list(v) {
		out = append(out, Render(e))
	}
	return out
}

// isNoValue reports whether v is !Ref AWS::NoValue.
func isNoValue(v any) bool {
	m, ok := v.(map[string]any)
	return ok && len(m) == 1 && m["Ref"] == "AWS::NoValue"
}

// merge applies SAM's Globals rules: maps merge key by key (the resource
// wins), lists are the global list followed by the resource's, anything
// else is the resource's when it has one.
func merge(global, local any) any {
	if local == nil {
		return global
	}
	if global == nil {
		return local
	}
	gm, gok := global.(map[string]any)
	lm, lok := local.(map[string]any)
	if gok && lok && !isIntrinsic(gm) && !isIntrinsic(lm) {
		out := make(map[string]any, len(gm)+len(lm))
		for k, v := range gm {
			out[k] = v
		}
		for k, v := range lm {
			out[k] = merge(gm[k], v)
		}
		return out
	}
	gl, gok := global.([]any)
	ll, lok := local.([]any)
	if gok && lok {
		return append(append([]any{}, gl...), ll...)
	}
	return local
}

// isIntrinsic reports whether m is an intrinsic function call.
func isIntrinsic(m map[string]any) bool {
	if len(m) != 1 {
		return false
	}
	for k := range m {
		return k == "Ref" || k == "Condition" || strings.HasPrefix(k, "Fn::")
	}
	return false
}

// Clone deep-copies t, so a test can change the copy.
func (t Template) Clone() Template {
	return Template(deepCopy(map[string]any(t)).(map[string]any))
}

func deepCopy(v any) any {
	switch v := v.(type) {
	case map[string]any:
		out := make(map[string]any, len(v))
		for k, e := range v {
			out[k] = deepCopy(e)
		}
		return out
	case []any:
		out := make([]any, len(v))
		for i, e := range v {
			out[i] = deepCopy(e)
		}
		return out
	}
	return v
}
