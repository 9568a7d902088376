package metrics

import (
	"context"
	"fmt"
	"testing"

	"github.com/sluice-gateway/sluice/pkg/config"
	"github.com/sluice-gateway/sluice/pkg/logevent"
)

// TestTeamsBeyondTheCapCountAsOther: the first MaxTeams teams get a label
// value each; the rest share "other".
func TestTeamsBeyondTheCapCountAsOther(t *testing.T) {
	cfg := &config.Config{ModelList: []config.Deployment{{ModelName: "gpt", Params: config.Params{Model: "openai/gpt-4o-mini"}}}}
	m := New(cfg, Options{MaxTeams: 10})
	for i := range 1000 {
		ev := &logevent.Event{Status: logevent.StatusSuccess, ModelGroup: "gpt", ModelID: "gpt#0", CustomLLMProvider: "openai",
			Metadata: logevent.Metadata{UserAPIKeyTeamID: fmt.Sprintf("team-%d", i)}}
		m.ObserveEvent(context.Background(), ev)
	}
	fams, err := m.Registry().Gather()
	if err != nil {
		t.Fatal(err)
	}
	teams := map[string]float64{}
	for _, f := range fams {
		if f.GetName() != "sluice_model_calls_total" {
			continue
		}
		for _, s := range f.GetMetric() {
			for _, l := range s.GetLabel() {
				if l.GetName() == "team" {
					teams[l.GetValue()] += s.GetCounter().GetValue()
				}
			}
		}
	}
	if len(teams) != 11 || teams[Other] != 990 || teams["team-0"] != 1 || teams["team-9"] != 1 {
		t.Errorf("team label values %d (other %v), want 10 teams and other with 990", len(teams), teams[Other])
	}
}

// TestANilMetricsRecordsNothing: metrics off is a nil *Metrics, and every
// measurement is a no-op on it.
func TestANilMetricsRecordsNothing(t *testing.T) {
	var m *Metrics
	m.Request("/v1/models", 200, "", 0, 0, "")
	m.ObserveEvent(context.Background(), &logevent.Event{})
	m.Retried("a", "b", "c")
	m.CooledDown("a", "b", "c")
	m.Delivery("langfuse", Delivered, 1)
}

// TestABudgetAlertIsNoModelCall: a soft budget's alert event passes the
// emitter like a call's, but counts as no call.
func TestABudgetAlertIsNoModelCall(t *testing.T) {
	m := New(&config.Config{}, Options{})
	m.ObserveEvent(context.Background(), &logevent.Event{Status: logevent.StatusSuccess, CallType: logevent.CallBudgetAlert,
		BudgetAlert: &logevent.BudgetAlert{}})
	fams, err := m.Registry().Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range fams {
		if f.GetName() == "sluice_model_calls_total" && len(f.GetMetric()) > 0 {
			t.Errorf("a budget alert counted as a model call: %v", f.GetMetric())
		}
	}
}

// TestAModelNamedOtherSharesOthersSeries: a configured value spelled like
// Other is Other, so an unknown model and it make one series, not two with
// the same labels (which a scrape would refuse).
func TestAModelNamedOtherSharesOthersSeries(t *testing.T) {
	m := New(&config.Config{ModelList: []config.Deployment{{ModelName: Other, Params: config.Params{Model: "openai/x"}}}}, Options{})
	for _, name := range []string{Other, "unknown"} {
		m.ObserveEvent(context.Background(), &logevent.Event{Status: logevent.StatusSuccess, ModelGroup: name})
	}
	fams, err := m.Registry().Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range fams {
		if f.GetName() == "sluice_model_calls_total" {
			if n := len(f.GetMetric()); n != 1 || f.GetMetric()[0].GetCounter().GetValue() != 2 {
				t.Errorf("%d series, first %v; want one with 2", n, f.GetMetric()[0])
			}
		}
	}
}
