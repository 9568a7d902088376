package modelcall

import (
	"testing"
	"unsafe"
)

// A call is one allocation a request: it stays in the allocator's
// 896-byte size class (objects with pointers above 512 bytes carry an
// 8-byte header), not the next one, 1 KiB.
func TestCallFitsItsSizeClass(t *testing.T) {
	if n := unsafe.Sizeof(Call{}); n+8 > 896 {
		t.Errorf("a Call is %d bytes (+8 of header): past the 896-byte size class", n)
	}
}
