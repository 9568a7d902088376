package deploy

import (
	"encoding/json"
	"fmt"
	"sort"
	"strings"
)

// The stack's outputs carry the SLUICE_* environment for local runs against
// the deployed resources (sam local invoke --env-vars env.json): an output
// whose Description is a variable's name has that variable's value, and
// checkOutputs holds every variable of CloudEnv to having one.

// describeStacks is what EnvJSON reads of `aws cloudformation
// describe-stacks --output json`.
type describeStacks struct {
	Stacks []struct {
		StackName string
		Outputs   []struct {
			OutputKey   string
			OutputValue string
			Description string
		}
	}
}

// EnvJSON turns the answer of `aws cloudformation describe-stacks` for one
// stack into sam local invoke's env.json: {"Parameters": {"SLUICE_…": …}},
// which SAM applies to every function. It fails, naming them, when a
// variable every function needs has no output (a stack deployed from an
// older template).
func EnvJSON(describe []byte) ([]byte, error) {
	var d describeStacks
	if err := json.Unmarshal(describe, &d); err != nil {
		return nil, fmt.Errorf("deploy: read describe-stacks: %w", err)
	}
	if len(d.Stacks) != 1 {
		return nil, fmt.Errorf("deploy: describe-stacks answered %d stacks, want 1 (name one with --stack-name)", len(d.Stacks))
	}
	params := map[string]string{}
	for _, o := range d.Stacks[0].Outputs {
		if strings.HasPrefix(o.Description, "SLUICE_") && !strings.ContainsAny(o.Description, " \t") {
			params[o.Description] = o.OutputValue
		}
	}
	var missing []string
	for _, v := range CloudEnv() {
		switch {
		case v.Name == "SLUICE_BACKEND":
			params[v.Name] = v.Value
		case params[v.Name] == "":
			missing = append(missing, v.Name)
		}
	}
	if len(missing) > 0 {
		sort.Strings(missing)
		return nil, fmt.Errorf("deploy: stack %s has no output for %s: deploy the current template (make deploy) first",
			d.Stacks[0].StackName, strings.Join(missing, ", "))
	}
	out, err := json.MarshalIndent(map[string]map[string]string{"Parameters": params}, "", "  ")
	if err != nil {
		return nil, err
	}
	return append(out, '\n'), nil
}
