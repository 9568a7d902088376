package config

import (
	"fmt"
	"sort"
	"strings"

	"gopkg.in/yaml.v3"
)

// A deployed stack's functions may read two secrets, both of the stack (the
// template's MasterKeySecret and ProviderSecret): a secretsmanager/
// reference to any other secret would fail on first use, with AccessDenied,
// long after the deploy. CheckDeployedSecrets refuses such a config when the
// gateway opens on the AWS backend, naming each reference.

// secretRef is one secretsmanager/ reference and where the config has it.
type secretRef struct{ path, name, key string }

// CheckDeployedSecrets holds the config's secretsmanager/ references to the
// stack's two secrets: general_settings.master_key names the master key
// secret whole (secretsmanager/<MasterKeySecretName>), and every other
// reference is a field of one provider secret
// (secretsmanager/<ProviderSecretName>#<field>), another secret than the
// master key's.
func (c *Config) CheckDeployedSecrets() error {
	var problems []string
	master := ""
	providers := map[string][]string{} // secret name → paths
	for _, r := range c.refs {
		switch {
		case r.path == "general_settings.master_key":
			master = r.name
			if r.key != "" {
				problems = append(problems, fmt.Sprintf("%s: secretsmanager/%s#%s: the stack's master key secret is a plain string: name it whole, secretsmanager/%s", r.path, r.name, r.key, r.name))
			}
		case r.key == "":
			problems = append(problems, fmt.Sprintf("%s: secretsmanager/%s names a whole secret: a deployment reads provider credentials as fields of its provider secret, secretsmanager/<ProviderSecretName>#<field>", r.path, r.name))
		default:
			providers[r.name] = append(providers[r.name], r.path)
		}
	}
	if _, ok := providers[master]; ok && master != "" {
		problems = append(problems, fmt.Sprintf("%s: secretsmanager/%s#…: fields of the master key secret; provider credentials belong in the provider secret (ProviderSecretName)", strings.Join(providers[master], ", "), master))
		delete(providers, master)
	}
	if len(providers) > 1 {
		var names []string
		for name, paths := range providers {
			names = append(names, fmt.Sprintf("%s (%s)", name, strings.Join(paths, ", ")))
		}
		sort.Strings(names)
		problems = append(problems, fmt.Sprintf("secretsmanager/ references name %d provider secrets, %s: the functions may read only the stack's provider secret (ProviderSecretName); put every credential into it as a field", len(providers), strings.Join(names, "; ")))
	}
	if len(problems) > 0 {
		return fmt.Errorf("config: secrets the deployment cannot read:\n  %s", strings.Join(problems, "\n  "))
	}
	return nil
}

// secretRefs lists the secretsmanager/ references under n, in document
// order.
func secretRefs(n *yaml.Node, path string) []secretRef {
	if n == nil {
		return nil
	}
	var out []secretRef
	switch n.Kind {
	case yaml.ScalarNode:
		if ref, ok := strings.CutPrefix(n.Value, secretPrefix); ok {
			name, key, _ := strings.Cut(ref, "#")
			out = append(out, secretRef{path, name, key})
		}
	case yaml.MappingNode:
		for i := 0; i+1 < len(n.Content); i += 2 {
			out = append(out, secretRefs(n.Content[i+1], joinPath(path, n.Content[i].Value))...)
		}
	case yaml.SequenceNode:
		for i, c := range n.Content {
			out = append(out, secretRefs(c, fmt.Sprintf("%s[%d]", path, i))...)
		}
	}
	return out
}
