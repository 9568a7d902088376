package vendors_test

import (
	"net/http"
	"testing"

	. "github.com/sluice-gateway/sluice/pkg/providers/vendors"
)

func TestEveryVendorOnce(t *testing.T) {
	seen := map[string]bool{}
	for _, v := range All() {
		if seen[v.Name] || v.New == nil {
			t.Errorf("vendor %q twice, or without a provider", v.Name)
		}
		seen[v.Name] = true
		if v.Key != nil && v.Key.Vendor != v.Name {
			t.Errorf("vendor %q's key names %q", v.Name, v.Key.Vendor)
		}
	}
	if got := Providers(Deps{Client: http.DefaultClient}); len(got) != len(seen) {
		t.Errorf("%d providers for %d vendors", len(got), len(seen))
	}
}
