package server_test

import (
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/sluice-gateway/sluice/pkg/server"
)

// TestRouteCapabilities: a route needs what its handler touches, and a
// route that takes a key what the middleware uses to check it.
func TestRouteCapabilities(t *testing.T) {
	for _, tc := range []struct {
		route server.Route
		want  []server.Capability
	}{
		{server.Route{Access: server.Public}, nil},
		{server.Route{Access: server.Public, Needs: []server.Capability{server.RecordsRead}}, []server.Capability{server.RecordsRead}},
		{server.Route{Access: server.AnyKey}, []server.Capability{server.RecordsRead, server.Limits, server.MasterKey}},
		{server.Route{Access: server.AdminOnly, Needs: []server.Capability{server.RecordsWrite, server.RecordsRead}},
			[]server.Capability{server.RecordsRead, server.RecordsWrite, server.Limits, server.MasterKey}},
	} {
		if diff := cmp.Diff(tc.want, tc.route.Capabilities()); diff != "" {
			t.Errorf("access %d, needs %v (-want +got):\n%s", tc.route.Access, tc.route.Needs, diff)
		}
	}
}
