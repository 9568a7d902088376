package callbacks_test

import (
	"context"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/sluice-gateway/sluice/pkg/callbacks"
	"github.com/sluice-gateway/sluice/pkg/gateway/gatewaytest"
)

// TestHealthRecords: delivery health adds up across flushes, keeps the
// latest error and delivery time (an older one written after does not
// replace them), and is read per callback of the team only — on both
// backends.
func TestHealthRecords(t *testing.T) {
	for _, be := range gatewaytest.Backends() {
		t.Run(be.Name, func(t *testing.T) {
			records := be.Open(t).Records
			ctx := context.Background()
			t0 := time.Date(2026, 11, 27, 10, 0, 0, 0, time.UTC)
			write := func(team, cb string, d callbacks.HealthDelta) {
				t.Helper()
				if err := callbacks.WriteHealth(ctx, records, callbacks.HealthUpdate{TeamID: team, CallbackID: cb, Delta: d}); err != nil {
					t.Fatal(err)
				}
			}
			write("t1", "langfuse#success", callbacks.HealthDelta{Retrying: 2, LastError: "Langfuse answered 503", LastErrorAt: t0})
			write("t1", "langfuse#success", callbacks.HealthDelta{Delivered: 3, Retrying: -1, LastDeliveredAt: t0.Add(time.Minute)})
			// Older news, flushed late by another writer: counted, but the
			// "lasts" stay.
			write("t1", "langfuse#success", callbacks.HealthDelta{DeadLettered: 1, Retrying: -1, LastError: "older", LastErrorAt: t0.Add(-time.Second),
				LastDeliveredAt: t0})
			// Two callbacks' updates in one flush.
			if err := callbacks.WriteHealth(ctx, records,
				callbacks.HealthUpdate{TeamID: "t1", CallbackID: "langsmith#failure", Delta: callbacks.HealthDelta{DeadLettered: 1,
					LastError: "LangSmith answered 401", LastErrorAt: t0.Add(time.Hour)}},
				callbacks.HealthUpdate{TeamID: "t2", CallbackID: "langfuse#success", Delta: callbacks.HealthDelta{Delivered: 7, LastDeliveredAt: t0}},
			); err != nil {
				t.Fatal(err)
			}

			got, err := callbacks.ReadHealth(ctx, records, "t1")
			if err != nil {
				t.Fatal(err)
			}
			at := func(t time.Time) *time.Time { return &t }
			want := map[string]callbacks.Delivery{
				"langfuse#success": {Delivered: 3, DeadLettered: 1, LastError: "Langfuse answered 503", LastErrorAt: at(t0),
					LastDeliveredAt: at(t0.Add(time.Minute))},
				"langsmith#failure": {DeadLettered: 1, LastError: "LangSmith answered 401", LastErrorAt: at(t0.Add(time.Hour))},
			}
			if diff := cmp.Diff(want, got); diff != "" {
				t.Errorf("health of t1 (-want +got):\n%s", diff)
			}
			none, err := callbacks.ReadHealth(ctx, records, "t3")
			if err != nil || len(none) != 0 {
				t.Errorf("health of a team without deliveries: %v, %v", none, err)
			}
		})
	}
}
