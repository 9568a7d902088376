// Package rietest gives tests the aws-lambda-rie binary (see package rie).
package rietest

import (
	"os"
	"testing"

	"github.com/sluice-gateway/sluice/pkg/lambdaedge/rie"
)

// Binary returns the emulator's path. A test without it skips, and fails
// when SLUICE_REQUIRE_RIE=1 (make test installs the emulator and sets it).
func Binary(t testing.TB) string {
	t.Helper()
	p, err := rie.Find()
	if err != nil {
		if os.Getenv(rie.RequireEnv) == "1" {
			t.Fatal(err)
		}
		t.Skipf("%v (make rie)", err)
	}
	return p
}
