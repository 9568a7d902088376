package server

import (
	"testing"

	"github.com/sluice-gateway/sluice/pkg/batchinput"
	"github.com/sluice-gateway/sluice/pkg/modelcall"
)

// A model operation missing, or one no batch may name, stops the process
// at start-up.
func TestOperationsAreTheBatchEndpoints(t *testing.T) {
	ops := modelcall.Operations{}
	for _, path := range batchinput.Endpoints() {
		ops[path] = nil
	}
	if err := checkOperations(ops); err != nil {
		t.Fatalf("the declared endpoints: %v", err)
	}
	delete(ops, "/v1/messages")
	if err := checkOperations(ops); err == nil {
		t.Error("an operation missing: no error")
	}
	ops["/v1/messages"], ops["/v1/images/generations"] = nil, nil
	if err := checkOperations(ops); err == nil {
		t.Error("an operation no batch may name: no error")
	}
}
