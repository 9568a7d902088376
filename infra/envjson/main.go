// Command envjson turns `aws cloudformation describe-stacks --output json`
// on its standard input into sam local invoke's env.json on its standard
// output: every SLUICE_* variable the functions read, from the deployed
// stack's outputs (make env-json).
package main

import (
	"fmt"
	"io"
	"os"

	"github.com/sluice-gateway/sluice/pkg/deploy"
)

func main() {
	in, err := io.ReadAll(io.LimitReader(os.Stdin, 1<<20))
	if err == nil {
		var out []byte
		if out, err = deploy.EnvJSON(in); err == nil {
			_, err = os.Stdout.Write(out)
		}
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "envjson:", err)
		os.Exit(1)
	}
}
