package delivery

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/fsouza/fake-gcs-server/fakestorage"

	"github.com/sluice-gateway/sluice/pkg/callbacks"
	"github.com/sluice-gateway/sluice/pkg/callbacks/gcsbucket"
	"github.com/sluice-gateway/sluice/pkg/logevent"
	"github.com/sluice-gateway/sluice/pkg/providers/google/googletest"
	"github.com/sluice-gateway/sluice/pkg/store/local"
)

func TestDeliversToGCSWithTheTeamsServiceAccount(t *testing.T) {
	h := newHarness(t, local.QueueOptions{})
	tokens := googletest.NewTokenServer(t)
	gcs, err := fakestorage.NewServerWithOptions(fakestorage.Options{NoListener: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(gcs.Stop)
	gcs.CreateBucketWithOpts(fakestorage.CreateBucketOpts{Name: "team-a-logs"})
	front := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if tok, _ := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer "); !tokens.Valid(tok) {
			t.Errorf("GCS request without a minted token: %q", r.Header.Get("Authorization"))
			w.WriteHeader(http.StatusUnauthorized)
			return
		}
		gcs.HTTPHandler().ServeHTTP(w, r)
	}))
	t.Cleanup(front.Close)

	h.add(t, "team-a", callbacks.GCSBucket, callbacks.TypeSuccess, map[string]string{
		callbacks.VarGCSBucketName: "team-a-logs", callbacks.VarGCSServiceAccount: tokens.ServiceAccountJSON("p")})
	// STORAGE_EMULATOR_HOST points the destination at the emulator.
	endpoint := gcsbucket.Endpoint(func(k string) string {
		if k == gcsbucket.EmulatorHostVar {
			return strings.TrimPrefix(front.URL, "http://")
		}
		return ""
	})
	d := h.deliverer(t, Options{}, endpoint)
	ctx := context.Background()
	for i, evs := range [][]*logevent.Event{
		{event("req_1", "team-a", logevent.StatusSuccess), event("req_2", "team-a", logevent.StatusFailure)},
		{event("req_3", "team-a", logevent.StatusSuccess)},
	} {
		if err := d.Handle(ctx, message(t, fmtID(i), 1, evs...)); err != nil {
			t.Fatal(err)
		}
	}
	for _, id := range []string{"req_1", "req_3"} {
		obj, err := gcs.GetObject("team-a-logs", "2026-11-24/"+id)
		if err != nil {
			t.Fatalf("object of %s: %v", id, err)
		}
		var ev logevent.Event
		if err := json.Unmarshal(obj.Content, &ev); err != nil || ev.ID != id || string(ev.Messages) != `["the input"]` {
			t.Errorf("object of %s: %s (%v)", id, obj.Content, err)
		}
	}
	if _, err := gcs.GetObject("team-a-logs", "2026-11-24/req_2"); err == nil {
		t.Error("a failure reached a success-only callback")
	}
	if n := tokens.Issued(); n != 1 {
		t.Errorf("%d tokens minted for two messages, want 1: the destination is not reused", n)
	}
}
