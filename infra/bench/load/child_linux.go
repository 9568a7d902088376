package main

import "syscall"

// childAttrs makes the kernel kill a child if the harness dies first, so an
// interrupted run leaves no load target behind.
func childAttrs() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
}
