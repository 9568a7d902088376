package passthrough

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/sluice-gateway/sluice/pkg/api"
	"github.com/sluice-gateway/sluice/pkg/store"
)

// Every team calls a provider through sluice's one credential for it, so
// the provider keeps all teams' objects — files, batches, context caches,
// batch jobs, asynchronous invocations — in one account. sluice records
// which team created each object that passes through it (its id read from
// the create answer) and keeps the others out: a read, update, delete or
// cancel of another team's object, or of one sluice did not see created,
// answers 404 as a missing object does, and a list answer keeps only the
// caller's own objects. The master key sees and may touch everything.
//
// The objects covered (the providers' ids in brackets):
//   - Anthropic: files [file_…] and message batches [msgbatch_…];
//   - Gemini: files [files/…], cachedContents [cachedContents/…] and batches
//     [batches/…, created by models/…:batchGenerateContent or
//     :asyncBatchEmbedContent];
//   - Vertex AI: batchPredictionJobs […/batchPredictionJobs/…];
//   - Bedrock: asynchronous invocations [arn:…:async-invoke/…].

// objectOpKind is what a request does to provider objects.
type objectOpKind int

const (
	opNone   objectOpKind = iota
	opCreate              // creates one; its id is in the answer
	opAccess              // reads, changes, cancels or deletes one named in the path
	opList                // lists them
)

// objectOp is a request's effect on provider objects.
type objectOp struct {
	kind objectOpKind
	// id names the object, as kind/id ("files/file_abc"), for opAccess.
	id string
	// family is the object kind ("files", "batches", …): the id prefix of
	// what a create answers or a list holds.
	family string
	// idMember is the answer member holding an object's id (a create
	// answer's own, each list element's); idIn, when set, is the member
	// holding the object a create answer wraps (Gemini's {"file": {...}}).
	idMember, idIn string
	// listMembers are the list answer's members that may hold the array.
	listMembers []string
}

// classifyObject says what the request method ep does to provider objects
// of provider p.
func classifyObject(p Provider, method string, ep endpoint) objectOp {
	segs := ep.segs
	if n := len(segs); n > 0 && segs[n-1] == "" {
		segs = segs[:n-1] // a trailing slash
	}
	switch p {
	case Anthropic:
		rest := withoutVersion(segs)
		switch {
		case len(rest) >= 1 && rest[0] == "files":
			return collection(method, rest[1:], objectOp{family: "files", idMember: "id", listMembers: []string{"data"}})
		case len(rest) >= 2 && rest[0] == "messages" && rest[1] == "batches":
			return collection(method, rest[2:], objectOp{family: "batches", idMember: "id", listMembers: []string{"data"}})
		}
	case Gemini:
		if len(segs) > 0 && segs[0] == "upload" {
			segs = segs[1:]
		}
		rest := withoutVersion(segs)
		switch {
		case len(rest) >= 1 && rest[0] == "files":
			return collection(method, rest[1:], objectOp{family: "files", idMember: "name", idIn: "file", listMembers: []string{"files"}})
		case len(rest) >= 1 && rest[0] == "cachedContents":
			return collection(method, rest[1:], objectOp{family: "cachedContents", idMember: "name", listMembers: []string{"cachedContents"}})
		case len(rest) >= 1 && rest[0] == "batches":
			return collection(method, rest[1:], objectOp{family: "batches", idMember: "name", listMembers: []string{"operations", "batches"}})
		case len(rest) == 2 && rest[0] == "models" && method == http.MethodPost &&
			(strings.HasSuffix(rest[1], ":batchGenerateContent") || strings.HasSuffix(rest[1], ":asyncBatchEmbedContent")):
			return objectOp{kind: opCreate, family: "batches", idMember: "name"}
		}
	case VertexAI:
		rest := withoutVersion(segs)
		if len(rest) >= 4 && rest[0] == "projects" && rest[2] == "locations" {
			rest = rest[4:]
		}
		if len(rest) >= 1 && rest[0] == "batchPredictionJobs" {
			return collection(method, rest[1:], objectOp{family: "batchPredictionJobs", idMember: "name", listMembers: []string{"batchPredictionJobs"}})
		}
	case Bedrock:
		if len(segs) >= 1 && segs[0] == "async-invoke" {
			return collection(method, segs[1:], objectOp{family: "async-invoke", idMember: "invocationArn", listMembers: []string{"asyncInvokeSummaries"}})
		}
	}
	return objectOp{}
}

// collection classifies a request on a collection of objects: on the
// collection itself a POST creates and a GET lists; below it the first
// segment (before any ":action") names the object.
func collection(method string, below []string, op objectOp) objectOp {
	if len(below) == 0 {
		switch method {
		case http.MethodPost:
			op.kind = opCreate
		case http.MethodGet, http.MethodHead:
			op.kind = opList
		}
		return op
	}
	op.kind = opAccess
	name := below[0]
	if op.family == "async-invoke" {
		name = strings.Join(below, "/") // an ARN sent with its '/' unencoded
	}
	op.id = objectID(op.family, name)
	return op
}

// objectID reduces a provider's name for an object of family to
// "family/id": "files/abc" and "abc" alike give "files/abc",
// "projects/1/locations/l/batchPredictionJobs/2" gives
// "batchPredictionJobs/2", an ARN ending "async-invoke/x" gives
// "async-invoke/x"; an action (":cancel", ":download") is dropped. "" when
// the name holds no id.
func objectID(family, name string) string {
	if i := strings.LastIndex(name, family+"/"); i >= 0 {
		name = name[i+len(family)+1:]
	}
	if i := strings.IndexAny(name, ":/"); i >= 0 && family != "async-invoke" {
		name = name[:i]
	}
	if name == "" {
		return ""
	}
	return family + "/" + name
}

// ownerRecord is the record of which team created a provider object.
type ownerRecord struct {
	TeamID    string `json:"team_id"`
	Provider  string `json:"provider"`
	Object    string `json:"object"`
	CreatedAt int64  `json:"created_at"`
}

// owners records provider objects' teams in the records table, one record
// per object: PK "PTOBJ#<provider>#<family>/<id>", SK "OWNER".
type owners struct {
	records store.Records
	now     func() time.Time
}

func ownerKey(p Provider, id string) store.Key {
	return store.Key{PK: "PTOBJ#" + string(p) + "#" + id, SK: "OWNER"}
}

func (o owners) record(ctx context.Context, p Provider, id, team string) error {
	body, err := json.Marshal(ownerRecord{TeamID: team, Provider: string(p), Object: id, CreatedAt: o.now().Unix()})
	if err != nil {
		return err
	}
	if err := o.records.Put(ctx, store.Record{Key: ownerKey(p, id), Body: body}, store.Cond{}); err != nil {
		return fmt.Errorf("record the owner of %s object %s: %w", p, id, err)
	}
	return nil
}

// owner returns the team that created the object, "" when sluice has no
// record of it.
func (o owners) owner(ctx context.Context, p Provider, id string) (string, error) {
	rec, err := o.records.Get(ctx, ownerKey(p, id))
	if errors.Is(err, store.ErrNotFound) {
		return "", nil
	}
	if err != nil {
		return "", fmt.Errorf("read the owner of %s object %s: %w", p, id, err)
	}
	var r ownerRecord
	if err := json.Unmarshal(rec.Body, &r); err != nil {
		return "", fmt.Errorf("owner record of %s object %s: %w", p, id, err)
	}
	return r.TeamID, nil
}

func (o owners) forget(ctx context.Context, p Provider, id string) error {
	err := o.records.Delete(ctx, ownerKey(p, id), store.Cond{})
	if err != nil && !errors.Is(err, store.ErrNotFound) {
		return fmt.Errorf("forget the owner of %s object %s: %w", p, id, err)
	}
	return nil
}

// checkObjectAccess refuses, with the 404 of a missing object, a request on
// an object the caller's team did not create through sluice.
func (s *Service) checkObjectAccess(ctx context.Context, c *call, op objectOp) error {
	if op.kind != opAccess || c.principal.Admin {
		return nil
	}
	if op.id == "" {
		return api.NotFound("No such %s object.", op.family)
	}
	team, err := s.owners.owner(ctx, c.provider, op.id)
	if err != nil {
		return err
	}
	if team == "" || !c.principal.CanAccessTeam(team) {
		return api.NotFound("No %s object '%s' was created by this team through sluice.", c.provider, truncate(op.id, 200))
	}
	return nil
}

// maxObjectAnswer bounds a create or list answer read whole to find its
// ids: one page of metadata.
const maxObjectAnswer = 8 << 20

// answersObjects reports whether the answer to op must be read by the
// ownership records: a successful create, a list for a team key, a delete.
func answersObjects(op objectOp, c *call, resp *http.Response) bool {
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		return false
	}
	switch op.kind {
	case opCreate:
		return true
	case opList:
		return !c.principal.Admin && c.method == http.MethodGet
	case opAccess:
		return c.method == http.MethodDelete
	}
	return false
}

// answerObjects relays an answer the ownership records read: a create's,
// whose object is recorded as the caller's before the client learns its
// id; a list's, filtered to the caller's objects; a delete's, after which
// the record goes.
func (s *Service) answerObjects(w http.ResponseWriter, r *http.Request, ctx context.Context, watch *watchdog, resp *http.Response, c *call, op objectOp) error {
	if op.kind == opAccess {
		if err := s.owners.forget(ctx, c.provider, op.id); err != nil {
			slog.WarnContext(ctx, "passthrough: owner record of a deleted object kept", "error", err)
		}
		return s.answer(w, r, ctx, watch, resp, c)
	}
	watch.answering(s.opts.IdleTimeout)
	body, err := io.ReadAll(io.LimitReader(resp.Body, maxObjectAnswer+1))
	if err != nil {
		return api.Upstream(err, "The upstream's answer could not be read.")
	}
	if len(body) > maxObjectAnswer {
		return api.Upstream(nil, "The upstream's answer is larger than %d bytes, more than sluice reads to find its objects' owners.", maxObjectAnswer)
	}
	switch op.kind {
	case opCreate:
		id := createdID(body, op)
		if id == "" {
			// The object cannot be named, so nobody but the master key will
			// reach it: say so rather than hand out an id that 404s.
			slog.WarnContext(ctx, "passthrough: a create answer names no object id", "provider", c.provider, "path", c.path)
		} else if err := s.owners.record(ctx, c.provider, id, c.principal.TeamID); err != nil {
			return err
		}
	case opList:
		if body, err = s.ownObjects(ctx, c, op, body); err != nil {
			return err
		}
	}
	copyResponseHeader(w.Header(), resp.Header, c.secrets)
	w.Header().Set("Content-Length", strconv.Itoa(len(body)))
	c.status = resp.StatusCode
	w.WriteHeader(resp.StatusCode)
	c.first = time.Now()
	if _, err := w.Write(body); err != nil {
		if r.Context().Err() != nil {
			return fmt.Errorf("passthrough: client gone: %w", context.Canceled)
		}
		return fmt.Errorf("write answer: %w", err)
	}
	return nil
}

// createdID reads the new object's id from a create answer.
func createdID(body []byte, op objectOp) string {
	var doc map[string]json.RawMessage
	if json.Unmarshal(body, &doc) != nil {
		return ""
	}
	if op.idIn != "" {
		if inner, ok := doc[op.idIn]; ok {
			var in map[string]json.RawMessage
			if json.Unmarshal(inner, &in) == nil {
				doc = in
			}
		}
	}
	var name string
	if json.Unmarshal(doc[op.idMember], &name) != nil {
		return ""
	}
	return objectID(op.family, name)
}

// ownLookups bounds the owner reads of one list answer in flight at once.
const ownLookups = 8

// ownObjects filters a list answer to the caller's objects. The other
// members (page tokens, cursors) pass unchanged. An answer of another shape
// (no list member) passes as it is: it lists nothing.
func (s *Service) ownObjects(ctx context.Context, c *call, op objectOp, body []byte) ([]byte, error) {
	var doc map[string]json.RawMessage
	if json.Unmarshal(body, &doc) != nil {
		return nil, api.Upstream(nil, "The upstream's list answer is not a JSON object.")
	}
	changed := false
	for _, m := range op.listMembers {
		raw, ok := doc[m]
		if !ok {
			continue
		}
		var items []json.RawMessage
		if err := json.Unmarshal(raw, &items); err != nil {
			return nil, api.Upstream(err, "The upstream's list answer has '%s' that is not an array.", m)
		}
		keep, err := s.ownedItems(ctx, c, op, items)
		if err != nil {
			return nil, err
		}
		if doc[m], err = json.Marshal(keep); err != nil {
			return nil, err
		}
		changed = true
	}
	if !changed {
		return body, nil
	}
	out, err := json.Marshal(doc)
	if err != nil {
		return nil, err
	}
	return out, nil
}

// ownedItems returns the items whose object the caller's team created.
func (s *Service) ownedItems(ctx context.Context, c *call, op objectOp, items []json.RawMessage) ([]json.RawMessage, error) {
	mine := make([]bool, len(items))
	errs := make([]error, len(items))
	sem := make(chan struct{}, ownLookups)
	var wg sync.WaitGroup
	// The lookups capture copies: capturing c would move the call, on
	// serve's stack, to the heap on every call.
	provider, principal := c.provider, c.principal
	for i, item := range items {
		var fields map[string]json.RawMessage
		var name string
		if json.Unmarshal(item, &fields) != nil || json.Unmarshal(fields[op.idMember], &name) != nil {
			continue
		}
		id := objectID(op.family, name)
		if id == "" {
			continue
		}
		sem <- struct{}{}
		wg.Go(func() {
			defer func() { <-sem }()
			team, err := s.owners.owner(ctx, provider, id)
			mine[i], errs[i] = team != "" && principal.CanAccessTeam(team), err
		})
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	keep := make([]json.RawMessage, 0, len(items))
	for i, item := range items {
		if mine[i] {
			keep = append(keep, bytes.TrimSpace(item))
		}
	}
	return keep, nil
}
