package passthrough

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sluice-gateway/sluice/pkg/auth"
	"github.com/sluice-gateway/sluice/pkg/providers/google/googletest"
	"github.com/sluice-gateway/sluice/pkg/store"
	"github.com/sluice-gateway/sluice/pkg/store/aws/awstest"
)

// objectFamily is how one provider API stores one kind of object: where its
// collection is, what a create answers, how a list is shaped, and how a
// path names one object.
type objectFamily struct {
	name       string
	provider   Provider
	collection string // the collection's path at the provider
	createPath string // where a create is POSTed ("" : the collection)
	listMember string
	idMember   string
	wrap       string // the member a create answer wraps the object in
	// name is the object's name as the provider gives it, for id n.
	objName func(n int) string
	// path is the path naming object name below the collection.
	path func(name string) string
	// actions are requests on one object: method and path suffix.
	actions [][2]string
}

var objectFamilies = []objectFamily{
	{name: "anthropic files", provider: Anthropic, collection: "/v1/files", listMember: "data", idMember: "id",
		objName: func(n int) string { return fmt.Sprintf("file_%03d", n) },
		path:    func(name string) string { return "/" + name },
		actions: [][2]string{{"GET", ""}, {"GET", "/content"}, {"DELETE", ""}}},
	{name: "anthropic batches", provider: Anthropic, collection: "/v1/messages/batches", listMember: "data", idMember: "id",
		objName: func(n int) string { return fmt.Sprintf("msgbatch_%03d", n) },
		path:    func(name string) string { return "/" + name },
		actions: [][2]string{{"GET", ""}, {"GET", "/results"}, {"POST", "/cancel"}, {"DELETE", ""}}},
	{name: "gemini files", provider: Gemini, collection: "/v1beta/files", createPath: "/upload/v1beta/files", listMember: "files", idMember: "name", wrap: "file",
		objName: func(n int) string { return fmt.Sprintf("files/f%03d", n) },
		path:    func(name string) string { return strings.TrimPrefix(name, "files") },
		actions: [][2]string{{"GET", ""}, {"DELETE", ""}}},
	{name: "gemini caches", provider: Gemini, collection: "/v1beta/cachedContents", listMember: "cachedContents", idMember: "name",
		objName: func(n int) string { return fmt.Sprintf("cachedContents/c%03d", n) },
		path:    func(name string) string { return strings.TrimPrefix(name, "cachedContents") },
		actions: [][2]string{{"GET", ""}, {"PATCH", ""}, {"DELETE", ""}}},
	{name: "gemini batches", provider: Gemini, collection: "/v1beta/batches", createPath: "/v1beta/models/gemini-2.5-flash:batchGenerateContent", listMember: "operations", idMember: "name",
		objName: func(n int) string { return fmt.Sprintf("batches/b%03d", n) },
		path:    func(name string) string { return strings.TrimPrefix(name, "batches") },
		actions: [][2]string{{"GET", ""}, {"POST", ":cancel"}, {"DELETE", ""}}},
	{name: "vertex batch jobs", provider: VertexAI, collection: "/v1/projects/p/locations/us-central1/batchPredictionJobs", listMember: "batchPredictionJobs", idMember: "name",
		// The answer names the project by number, the client's path by id.
		objName: func(n int) string {
			return fmt.Sprintf("projects/123456/locations/us-central1/batchPredictionJobs/%d", 9000+n)
		},
		path:    func(name string) string { return name[strings.LastIndex(name, "/"):] },
		actions: [][2]string{{"GET", ""}, {"POST", ":cancel"}, {"DELETE", ""}}},
	{name: "bedrock async invocations", provider: Bedrock, collection: "/async-invoke", listMember: "asyncInvokeSummaries", idMember: "invocationArn",
		objName: func(n int) string {
			return fmt.Sprintf("arn:aws:bedrock:us-east-1:123456789012:async-invoke/inv%03d", n)
		},
		path:    func(name string) string { return "/" + url.PathEscape(name) },
		actions: [][2]string{{"GET", ""}}},
}

// providerObjects is a provider's object store behind its API: creates
// name a new object, lists answer all of them (whoever created them: one
// account), reads and deletes find one by the name in the path.
type providerObjects struct {
	fam  objectFamily
	mu   sync.Mutex
	next int
	objs []string // names
	hits int      // requests on one object
}

func (o *providerObjects) create() string {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.next++
	name := o.fam.objName(o.next)
	o.objs = append(o.objs, name)
	return name
}

func (o *providerObjects) serve(w http.ResponseWriter, r *http.Request, body []byte) {
	w.Header().Set("Content-Type", "application/json")
	path := r.URL.EscapedPath()
	create := o.fam.createPath
	if create == "" {
		create = o.fam.collection
	}
	switch {
	case r.Method == "POST" && path == create:
		obj := map[string]any{o.fam.idMember: o.create()}
		var answer any = obj
		if o.fam.wrap != "" {
			answer = map[string]any{o.fam.wrap: obj}
		}
		json.NewEncoder(w).Encode(answer)
	case r.Method == "GET" && path == o.fam.collection:
		o.mu.Lock()
		items := []map[string]any{}
		for _, n := range o.objs {
			items = append(items, map[string]any{o.fam.idMember: n, "state": "ok"})
		}
		o.mu.Unlock()
		json.NewEncoder(w).Encode(map[string]any{o.fam.listMember: items, "nextPageToken": "page-2"})
	default:
		o.mu.Lock()
		defer o.mu.Unlock()
		o.hits++
		for i, n := range o.objs {
			if strings.HasPrefix(path, o.fam.collection+o.fam.path(n)) {
				if r.Method == "DELETE" {
					o.objs = slices.Delete(o.objs, i, i+1)
				}
				json.NewEncoder(w).Encode(map[string]any{o.fam.idMember: n})
				return
			}
		}
		w.WriteHeader(http.StatusNotFound)
		w.Write([]byte(`{"error":{"message":"not found"}}`))
	}
}

func principalOf(team string) auth.Principal {
	return auth.Principal{TeamID: team, Key: &auth.KeyInfo{Token: "tok-" + team, TeamID: team}, Team: &auth.Team{TeamID: team}}
}

func objectsHarness(t *testing.T, fam objectFamily, tune func(*Options)) (*harness, *providerObjects) {
	t.Helper()
	objs := &providerObjects{fam: fam}
	up := newUpstream(t, objs.serve)
	tokens := googletest.NewTokenServer(t)
	cfg := allPrefixes(up.srv.URL) +
		"  vertex_ai: {api_base: " + up.srv.URL + ", vertex_credentials: os.environ/SA, vertex_project: p, vertex_location: us-central1}\n"
	return newHarness(t, cfg, map[string]string{"SA": tokens.ServiceAccountJSON("p")}, tune), objs
}

// as makes the harness's requests come from principal p.
func (h *harness) as(p auth.Principal) { h.principal.Store(&p) }

func (h *harness) listNames(t *testing.T, fam objectFamily) []string {
	t.Helper()
	resp, body := h.do(t, "GET", "/"+prefixes[fam.provider][0]+fam.collection, nil)
	if resp.StatusCode != 200 {
		t.Fatalf("list: %d %s", resp.StatusCode, body)
	}
	var doc map[string]json.RawMessage
	if err := json.Unmarshal(body, &doc); err != nil {
		t.Fatalf("list answer %s: %v", body, err)
	}
	if string(doc["nextPageToken"]) != `"page-2"` {
		t.Errorf("the page token was lost: %s", body)
	}
	var items []map[string]string
	json.Unmarshal(doc[fam.listMember], &items)
	var names []string
	for _, it := range items {
		names = append(names, it[fam.idMember])
	}
	return names
}

// TestProviderObjectsBelongToTheTeamThatCreatedThem: per provider family,
// team B neither sees in a list, nor reads, changes, cancels or deletes
// the object team A created through sluice (404, never forwarded), nor one
// created at the provider directly; team A and the master key reach A's.
func TestProviderObjectsBelongToTheTeamThatCreatedThem(t *testing.T) {
	for _, fam := range objectFamilies {
		t.Run(fam.name, func(t *testing.T) {
			h, objs := objectsHarness(t, fam, nil)
			prefix := "/" + prefixes[fam.provider][0]
			create := fam.createPath
			if create == "" {
				create = fam.collection
			}
			a, b := principalOf("team-a"), principalOf("team-b")

			h.as(a)
			resp, body := h.do(t, "POST", prefix+create, strings.NewReader(`{}`), "Content-Type", "application/json")
			if resp.StatusCode != 200 {
				t.Fatalf("create: %d %s", resp.StatusCode, body)
			}
			mine := objs.objs[0]
			outside := objs.create() // created at the provider, not through sluice

			h.as(b)
			if got := h.listNames(t, fam); len(got) != 0 {
				t.Errorf("team B lists %q", got)
			}
			for _, act := range fam.actions {
				before := objs.hits
				resp, body := h.do(t, act[0], prefix+fam.collection+fam.path(mine)+act[1], nil)
				if resp.StatusCode != 404 || errorCode(t, body) != "not_found" {
					t.Errorf("team B %s %s: %d %s", act[0], act[1], resp.StatusCode, body)
				}
				if objs.hits != before {
					t.Errorf("team B's %s %s reached the provider", act[0], act[1])
				}
			}

			h.as(a)
			if got := h.listNames(t, fam); !slices.Equal(got, []string{mine}) {
				t.Errorf("team A lists %q, want only %q", got, mine)
			}
			if resp, body := h.do(t, "GET", prefix+fam.collection+fam.path(outside), nil); resp.StatusCode != 404 {
				t.Errorf("team A reads an object created outside sluice: %d %s", resp.StatusCode, body)
			}
			if resp, body := h.do(t, "GET", prefix+fam.collection+fam.path(mine), nil); resp.StatusCode != 200 {
				t.Errorf("team A reads its own: %d %s", resp.StatusCode, body)
			}

			h.as(auth.Principal{Admin: true, TeamID: auth.AdminTeam})
			if got := h.listNames(t, fam); len(got) != 2 {
				t.Errorf("the master key lists %q, want both", got)
			}
		})
	}
}

// A deleted object's record goes with it.
func TestDeletingAnObjectForgetsItsOwner(t *testing.T) {
	fam := objectFamilies[0]
	h, objs := objectsHarness(t, fam, nil)
	h.as(principalOf("team-a"))
	h.do(t, "POST", "/anthropic/v1/files", strings.NewReader(`{}`), "Content-Type", "application/json")
	id := objs.objs[0]
	if resp, body := h.do(t, "DELETE", "/anthropic/v1/files/"+id, nil); resp.StatusCode != 200 {
		t.Fatalf("delete: %d %s", resp.StatusCode, body)
	}
	if team, err := h.svc.owners.owner(context.Background(), Anthropic, "files/"+id); err != nil || team != "" {
		t.Errorf("after the delete the owner is %q, %v", team, err)
	}
}

func TestObjectID(t *testing.T) {
	for _, tc := range []struct{ family, name, want string }{
		{"files", "file_abc", "files/file_abc"},
		{"files", "files/abc", "files/abc"},
		{"files", "abc:download", "files/abc"},
		{"batchPredictionJobs", "projects/1/locations/l/batchPredictionJobs/2", "batchPredictionJobs/2"},
		{"batchPredictionJobs", "2:cancel", "batchPredictionJobs/2"},
		{"async-invoke", "arn:aws:bedrock:us-east-1:1:async-invoke/x", "async-invoke/x"},
		{"files", "", ""},
	} {
		if got := objectID(tc.family, tc.name); got != tc.want {
			t.Errorf("objectID(%q, %q) = %q, want %q", tc.family, tc.name, got, tc.want)
		}
	}
}

// The owner records work alike on both adapters (the AWS one against
// moto_server; skipped without it).
func TestOwnerRecordsOnBothBackends(t *testing.T) {
	for name, open := range map[string]func(t *testing.T) store.Records{
		"local": func(t *testing.T) store.Records { return localRecords(t) },
		"aws":   func(t *testing.T) store.Records { return awstest.Backend(t).Records },
	} {
		t.Run(name, func(t *testing.T) {
			o := owners{records: open(t), now: time.Now}
			ctx := context.Background()
			if team, err := o.owner(ctx, Gemini, "files/x"); err != nil || team != "" {
				t.Fatalf("unknown object: %q, %v", team, err)
			}
			if err := o.record(ctx, Gemini, "files/x", "team-a"); err != nil {
				t.Fatal(err)
			}
			if team, err := o.owner(ctx, Gemini, "files/x"); err != nil || team != "team-a" {
				t.Errorf("owner: %q, %v", team, err)
			}
			if team, _ := o.owner(ctx, VertexAI, "files/x"); team != "" {
				t.Errorf("another provider's object of the same id: %q", team)
			}
			if err := o.forget(ctx, Gemini, "files/x"); err != nil {
				t.Fatal(err)
			}
			if err := o.forget(ctx, Gemini, "files/x"); err != nil {
				t.Errorf("forgetting twice: %v", err)
			}
			if team, err := o.owner(ctx, Gemini, "files/x"); err != nil || team != "" {
				t.Errorf("after forget: %q, %v", team, err)
			}
		})
	}
}
