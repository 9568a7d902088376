package callbacks

import (
	"context"
	"net/http"
	"slices"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

func TestAuditTrail(t *testing.T) {
	h := newHarness(t)
	ctx := context.Background()
	if _, err := h.svc.Add(ctx, h.teamA, "team-a", langfuseCallback(TypeSuccess), "alice@example.com"); err != nil {
		t.Fatal(err)
	}
	h.clock.Add(time.Second)
	if _, err := h.svc.Delete(ctx, h.admin, "team-a", Langfuse, "bob"); err != nil {
		t.Fatal(err)
	}
	h.clock.Add(time.Second)
	if _, err := h.svc.DisableLogging(ctx, h.admin, "team-a", ""); err != nil {
		t.Fatal(err)
	}
	page, err := h.svc.Audit(ctx, h.teamA, "team-a", 0, "")
	if err != nil {
		t.Fatal(err)
	}
	type row struct{ Action, ChangedBy, ActingKey, ActingKeyAlias string }
	var got []row
	for _, e := range page.Data {
		got = append(got, row{e.Action, e.ChangedBy, e.ActingKey, e.ActingKeyAlias})
	}
	want := []row{ // newest first
		{ActionLoggingDisabled, "", MasterKeyActor, ""},
		{ActionCallbackDeleted, "bob", MasterKeyActor, ""},
		{ActionCallbackAdded, "alice@example.com", h.teamA.KeyToken(), "team-a-key"},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("audit trail (-want +got):\n%s", diff)
	}
	added := page.Data[2]
	if !added.CreatedAt.Equal(time.Date(2026, 11, 24, 12, 0, 0, 0, time.UTC)) {
		t.Errorf("created_at = %v", added.CreatedAt)
	}
	if len(added.Before.Callbacks) != 0 || len(added.After.Callbacks) != 1 {
		t.Errorf("added: before %+v after %+v", added.Before, added.After)
	}
	if v := added.After.Callbacks[0].Vars[VarLangfuseSecretKey]; v != Masked {
		t.Errorf("audit after shows the secret key as %q, want it masked", v)
	}
	if page.HasMore || page.NextCursor != nil {
		t.Errorf("one page expected: has_more %v cursor %v", page.HasMore, page.NextCursor)
	}
}

func TestAuditPagination(t *testing.T) {
	h := newHarness(t)
	ctx := context.Background()
	const changes = 7
	for i := range changes {
		// Several changes in the same instant still page stably (the id breaks ties).
		if i%2 == 0 {
			h.clock.Add(time.Millisecond)
		}
		if _, err := h.svc.DisableLogging(ctx, h.teamA, "team-a", string(rune('a'+i))); err != nil {
			t.Fatal(err)
		}
	}
	var seen []string
	var last time.Time
	cursor := ""
	for pages := 0; ; pages++ {
		if pages > changes {
			t.Fatal("pagination does not end")
		}
		page, err := h.svc.Audit(ctx, h.teamA, "team-a", 3, cursor)
		if err != nil {
			t.Fatal(err)
		}
		for _, e := range page.Data {
			if len(seen) > 0 && e.CreatedAt.After(last) {
				t.Errorf("entry %s (%v) after an older one (%v)", e.ChangedBy, e.CreatedAt, last)
			}
			seen, last = append(seen, e.ChangedBy), e.CreatedAt
		}
		if !page.HasMore {
			break
		}
		cursor = *page.NextCursor
	}
	// Entries of the same instant come in id order: compare as a set.
	slices.Sort(seen)
	if diff := cmp.Diff([]string{"a", "b", "c", "d", "e", "f", "g"}, seen); diff != "" {
		t.Errorf("every entry exactly once (-want +got):\n%s", diff)
	}
	for name, c := range map[string]struct {
		limit  int
		cursor string
		param  string
	}{
		"limit too large": {MaxAuditLimit + 1, "", "limit"},
		"negative limit":  {-1, "", "limit"},
		"foreign cursor":  {3, "not-a-cursor", "cursor"},
		"forged cursor":   {3, encodeCursor("AUDIT#../../TEAM"), "cursor"},
	} {
		_, err := h.svc.Audit(ctx, h.teamA, "team-a", c.limit, c.cursor)
		if status, param := apiErr(err); status != http.StatusBadRequest || param != c.param {
			t.Errorf("%s: err = %v, want 400 naming %s", name, err, c.param)
		}
	}
}
