package functions_test

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/lambda"
	"github.com/aws/aws-lambda-go/lambdacontext"

	"github.com/sluice-gateway/sluice/pkg/deploy"
	"github.com/sluice-gateway/sluice/pkg/gateway"
	"github.com/sluice-gateway/sluice/pkg/gateway/lambdafn"
	"github.com/sluice-gateway/sluice/pkg/logevent"
	"github.com/sluice-gateway/sluice/pkg/server"
	"github.com/sluice-gateway/sluice/pkg/store"
)

// TestFunctionsUseOnlyWhatTheyDeclare runs the whole scenario with each
// function's services over a backend that records what they touch, then
// the scheduled jobs, and holds each function to its declaration in pkg/deploy: what
// a function does must be a capability it declares (and so one the template
// grants, which pkg/deploy's tests check). A handler that starts writing
// where it only read, or a blob key outside the declared prefixes, fails
// here.
func TestFunctionsUseOnlyWhatTheyDeclare(t *testing.T) {
	w := newWorld(t)
	env := functionEnv(t, w, map[string]string{"SLUICE_BACKEND": "local", "SLUICE_DATA_DIR": t.TempDir()})
	getenv := func(k string) string { return env[k] }
	g, err := gateway.Open(context.Background(), getenv)
	if err != nil {
		t.Fatal(err)
	}
	defer g.Close()

	used := map[string]*usage{}
	servicesFor := func(fn string, now func() time.Time) *server.Services {
		u := &usage{caps: map[server.Capability]bool{}}
		used[fn] = u
		s, err := server.NewServices(server.Deps{
			Settings: g.Settings, Config: g.Config, Backend: u.backend(g.Backend),
			MasterKey: env["SLUICE_MASTER_KEY"], Getenv: getenv, Now: now,
		})
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	handlers := map[string]lambda.Handler{}
	for _, fn := range append(server.Functions(), jobFunctions()...) {
		h, err := lambdafn.Handler(servicesFor(fn, nil), fn)
		if err != nil {
			t.Fatal(err)
		}
		handlers[fn] = h
	}
	r := &run{ids: map[string]string{}}
	for i, s := range scenario {
		fn := s.function()
		streamed, _ := server.Streams(fn)
		ctx := lambdacontext.NewContext(context.Background(), &lambdacontext.LambdaContext{AwsRequestID: fmt.Sprintf("needs-%d", i)})
		ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
		out, err := handlers[fn].Invoke(ctx, r.event(t, s))
		cancel()
		if err != nil {
			t.Fatalf("%s: %v", s.sample, err)
		}
		r.check(t, s, streamed, out)
	}
	// The scheduled jobs, a year on: everything the scenario left has
	// expired, so the sweep has work.
	later := func() time.Time { return time.Now().Add(365 * 24 * time.Hour) }
	for _, j := range server.Jobs() {
		if j.Run == nil {
			continue
		}
		if err := j.Run(servicesFor(j.Name, later))(context.Background()); err != nil {
			t.Fatalf("job %s: %v", j.Name, err)
		}
	}
	runUndrivenQueueJobs(t, servicesFor)
	checkDeclaredNeeds(t, used)
}

// runUndrivenQueueJobs runs the queue jobs the scenario does not drive
// (its steps carry the ids their messages need), on their sample events as
// they are, each over the services servicesFor gives it.
func runUndrivenQueueJobs(t *testing.T, servicesFor func(fn string, now func() time.Time) *server.Services) {
	driven := map[string]bool{}
	for _, s := range scenario {
		driven[s.function()] = true
	}
	for _, j := range server.Jobs() {
		if j.Queue == "" || driven[j.Name] {
			continue
		}
		h, err := lambdafn.Handler(servicesFor(j.Name, nil), j.Name)
		if err != nil {
			t.Fatal(err)
		}
		samples, _ := filepath.Glob(filepath.Join("..", "events", j.Name, "*.json"))
		for _, sample := range samples {
			event, err := os.ReadFile(sample)
			if err != nil {
				t.Fatal(err)
			}
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			if _, err := h.Invoke(ctx, event); err != nil {
				t.Fatalf("%s: %v", sample, err)
			}
			cancel()
		}
	}
}

// checkDeclaredNeeds fails for each capability a function used that
// pkg/deploy does not declare for it, and for each one the scenario should
// have used but did not.
func checkDeclaredNeeds(t *testing.T, used map[string]*usage) {
	for fn, u := range used {
		f, err := deploy.Lookup(fn)
		if err != nil {
			t.Error(err)
			continue
		}
		for _, c := range u.sorted() {
			if !f.Has(c) {
				t.Errorf("function %s uses %s, which pkg/deploy does not declare for it (its declaration: %v)", fn, c, f.Capabilities)
			}
		}
		for _, o := range u.odd {
			t.Errorf("function %s: %s", fn, o)
		}
	}
	// The recorder sees what the scenario does (so the check above is not
	// vacuous).
	for fn, want := range map[string][]server.Capability{
		"health":         {server.RecordsRead},
		"admin":          {server.RecordsRead, server.RecordsWrite},
		"files-upload":   {server.RecordsWrite, server.FilesWrite},
		"file-content":   {server.FilesRead},
		"file-delete":    {server.RecordsWrite, server.FilesDelete},
		"uploads":        {server.RecordsWrite, server.FilesWrite, server.FilesRead},
		"files-sweep":    {server.RecordsRead, server.RecordsWrite, server.FilesDelete},
		"batches-create": {server.RecordsWrite, server.WorkSend},
		"batch-cancel":   {server.RecordsWrite, server.WorkSend},
		"batch-worker":   {server.RecordsRead, server.RecordsWrite, server.FilesRead, server.FilesWrite, server.WorkSend, server.WorkExtend},
		"batch-sweeper":  {server.RecordsRead},
		// The team's callback secrets are sealed; its events published.
		"team-callback-add": {server.RecordsWrite, server.Seal},
		"embeddings":        {server.EventsPublish},
		// Where the sample's events go is read.
		"callback-delivery": {server.RecordsRead},
	} {
		for _, c := range want {
			if !used[fn].caps[c] {
				t.Errorf("function %s: the scenario never used %s (used %v)", fn, c, used[fn].sorted())
			}
		}
	}
}

// usage records what one function's services touch.
type usage struct {
	mu   sync.Mutex
	caps map[server.Capability]bool
	odd  []string // uses no capability covers
}

func (u *usage) use(c server.Capability) {
	u.mu.Lock()
	u.caps[c] = true
	u.mu.Unlock()
}

func (u *usage) strange(format string, args ...any) {
	u.mu.Lock()
	u.odd = append(u.odd, fmt.Sprintf(format, args...))
	u.mu.Unlock()
}

func (u *usage) sorted() []server.Capability {
	u.mu.Lock()
	defer u.mu.Unlock()
	var out []server.Capability
	for _, c := range server.Capabilities() {
		if u.caps[c] {
			out = append(out, c)
		}
	}
	return out
}

// blob records a blob operation by its key's prefix: file bytes, or the
// claim-check prefix (written and read, never deleted: objects there
// expire).
func (u *usage) blob(op string, c server.Capability, key string) {
	if strings.HasPrefix(key, logevent.ClaimCheckPrefix) {
		switch c {
		case server.FilesWrite:
			u.use(server.ClaimCheckWrite)
		case server.FilesRead:
			u.use(server.ClaimCheckRead)
		default:
			u.strange("%s of claim-check object %s: the template grants claim-check writes and reads only", op, key)
		}
		return
	}
	if !slices.ContainsFunc(deploy.FilePrefixes, func(p string) bool { return strings.HasPrefix(key, p) }) {
		u.strange("%s of blob %s, outside the prefixes the template grants (%v)", op, key, deploy.FilePrefixes)
		return
	}
	u.use(c)
}

func (u *usage) backend(b *store.Backend) *store.Backend {
	return &store.Backend{
		Records: recRecords{b.Records, u}, Blobs: recBlobs{b.Blobs, u},
		Work: recQueue{b.Work, u, server.WorkSend}, Bus: recBus{b.Bus, u},
		Deliveries:          recQueue{b.Deliveries, u, ""},
		DeliveryDeadLetters: recQueue{b.DeliveryDeadLetters, u, server.DeliveryDeadLetter},
		Limiter:             recLimiter{b.Limiter, u}, Sealer: recSealer{b.Sealer, u},
		Ping: func(ctx context.Context) error {
			u.use(server.RecordsRead) // a GetItem on DynamoDB
			return b.Ping(ctx)
		},
		PurgeExpired: b.PurgeExpired, Close: b.Close,
	}
}

type recRecords struct {
	store.Records
	u *usage
}

func (r recRecords) Get(ctx context.Context, key store.Key) (store.Record, error) {
	r.u.use(server.RecordsRead)
	return r.Records.Get(ctx, key)
}

func (r recRecords) Query(ctx context.Context, q store.Query) (store.Page, error) {
	r.u.use(server.RecordsRead)
	return r.Records.Query(ctx, q)
}

func (r recRecords) Put(ctx context.Context, rec store.Record, c store.Cond) error {
	r.u.use(server.RecordsWrite)
	return r.Records.Put(ctx, rec, c)
}

func (r recRecords) Update(ctx context.Context, rec store.Record, c store.Cond) error {
	r.u.use(server.RecordsWrite)
	return r.Records.Update(ctx, rec, c)
}

func (r recRecords) Add(ctx context.Context, key store.Key, deltas map[string]int64, c store.Cond) (map[string]int64, error) {
	r.u.use(server.RecordsWrite)
	return r.Records.Add(ctx, key, deltas, c)
}

func (r recRecords) Delete(ctx context.Context, key store.Key, c store.Cond) error {
	r.u.use(server.RecordsWrite)
	return r.Records.Delete(ctx, key, c)
}

func (r recRecords) Transact(ctx context.Context, writes []store.Write) error {
	r.u.use(server.RecordsWrite)
	return r.Records.Transact(ctx, writes)
}

type recBlobs struct {
	store.Blobs
	u *usage
}

func (b recBlobs) Put(ctx context.Context, key string, r io.Reader) (int64, error) {
	b.u.blob("Put", server.FilesWrite, key)
	return b.Blobs.Put(ctx, key, r)
}

func (b recBlobs) Get(ctx context.Context, key string, offset, length int64) (io.ReadCloser, error) {
	b.u.blob("Get", server.FilesRead, key)
	return b.Blobs.Get(ctx, key, offset, length)
}

func (b recBlobs) Size(ctx context.Context, key string) (int64, error) {
	b.u.blob("Size", server.FilesRead, key)
	return b.Blobs.Size(ctx, key)
}

func (b recBlobs) Delete(ctx context.Context, key string) error {
	b.u.blob("Delete", server.FilesDelete, key)
	return b.Blobs.Delete(ctx, key)
}

// recQueue records sends as send (""; no function may send there), and any
// consumption as strange: consumers are workers, which declare a queue.
type recQueue struct {
	store.Queue
	u    *usage
	send server.Capability
}

func (q recQueue) Send(ctx context.Context, bodies ...[]byte) error {
	if q.send == "" {
		q.u.strange("Send to a queue no function sends to")
	} else {
		q.u.use(q.send)
	}
	return q.Queue.Send(ctx, bodies...)
}

func (q recQueue) Extend(ctx context.Context, m store.Message, d time.Duration) error {
	if q.send == server.WorkSend {
		q.u.use(server.WorkExtend)
	} else {
		q.u.strange("Extend on a queue no function extends")
	}
	return q.Queue.Extend(ctx, m, d)
}

func (q recQueue) Receive(ctx context.Context, max int, wait time.Duration) ([]store.Message, error) {
	q.u.strange("Receive from a queue: only a worker declaring it may consume")
	return q.Queue.Receive(ctx, max, wait)
}

type recBus struct {
	store.Bus
	u *usage
}

func (b recBus) Publish(ctx context.Context, events ...store.Event) error {
	b.u.use(server.EventsPublish)
	return b.Bus.Publish(ctx, events...)
}

type recLimiter struct {
	store.Limiter
	u *usage
}

func (l recLimiter) Take(ctx context.Context, scope string, window time.Duration, takes ...store.Take) (store.Decision, error) {
	l.u.use(server.Limits)
	return l.Limiter.Take(ctx, scope, window, takes...)
}

type recSealer struct {
	store.Sealer
	u *usage
}

func (s recSealer) Seal(ctx context.Context, plaintext []byte, encCtx map[string]string) ([]byte, error) {
	s.u.use(server.Seal)
	return s.Sealer.Seal(ctx, plaintext, encCtx)
}

func (s recSealer) Open(ctx context.Context, sealed []byte, encCtx map[string]string) ([]byte, error) {
	s.u.use(server.Seal)
	return s.Sealer.Open(ctx, sealed, encCtx)
}
