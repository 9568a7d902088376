//go:build !linux

package main

import "syscall"

// childAttrs: outside Linux there is no parent-death signal; the harness's
// deferred stops are all there is (and /proc readings will fail anyway).
func childAttrs() *syscall.SysProcAttr { return nil }
