package functions_test

import (
	"context"
	"fmt"
	"io"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/lambda"
	"github.com/aws/aws-lambda-go/lambdacontext"

	"github.com/sluice-gateway/sluice/pkg/deploy"
	"github.com/sluice-gateway/sluice/pkg/gateway"
	"github.com/sluice-gateway/sluice/pkg/lambdaedge"
	"github.com/sluice-gateway/sluice/pkg/logevent"
	"github.com/sluice-gateway/sluice/pkg/server"
	"github.com/sluice-gateway/sluice/pkg/store"
)

// TestFunctionsUseOnlyWhatTheyDeclare runs the whole scenario with each
// function's services over a backend that records what they touch, then
// the sweep, and holds each function to its declaration in pkg/deploy: what
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
		u := &usage{caps: map[deploy.Capability]bool{}}
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
	for _, fn := range server.Functions() {
		h, err := server.Handler(servicesFor(fn, nil), server.Options{Function: fn})
		if err != nil {
			t.Fatal(err)
		}
		stream, _ := server.Streams(fn)
		handlers[fn] = lambdaedge.HTTPFunction(h, stream)
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
	// The sweep, a year on: everything the scenario left has expired.
	later := func() time.Time { return time.Now().Add(365 * 24 * time.Hour) }
	res, err := servicesFor(deploy.FilesSweep, later).Files.Sweep(context.Background())
	if err != nil || res.Files == 0 {
		t.Fatalf("sweep: %+v, %v (the scenario leaves a file to sweep)", res, err)
	}

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
	for fn, want := range map[string][]deploy.Capability{
		"health":          {deploy.RecordsRead},
		"admin":           {deploy.RecordsRead, deploy.RecordsWrite},
		"files-upload":    {deploy.RecordsWrite, deploy.FilesWrite},
		"file-content":    {deploy.FilesRead},
		"file-delete":     {deploy.RecordsWrite, deploy.FilesDelete},
		"uploads":         {deploy.RecordsWrite, deploy.FilesWrite, deploy.FilesRead},
		deploy.FilesSweep: {deploy.RecordsRead, deploy.RecordsWrite},
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
	caps map[deploy.Capability]bool
	odd  []string // uses no capability covers
}

func (u *usage) use(c deploy.Capability) {
	u.mu.Lock()
	u.caps[c] = true
	u.mu.Unlock()
}

func (u *usage) strange(format string, args ...any) {
	u.mu.Lock()
	u.odd = append(u.odd, fmt.Sprintf(format, args...))
	u.mu.Unlock()
}

func (u *usage) sorted() []deploy.Capability {
	u.mu.Lock()
	defer u.mu.Unlock()
	var out []deploy.Capability
	for _, c := range deploy.Capabilities() {
		if u.caps[c] {
			out = append(out, c)
		}
	}
	return out
}

// blob records a blob operation by its key's prefix: file bytes, or the
// claim-check prefix (written only).
func (u *usage) blob(op string, c deploy.Capability, key string) {
	if strings.HasPrefix(key, logevent.ClaimCheckPrefix) {
		if c != deploy.FilesWrite {
			u.strange("%s of claim-check object %s: the template grants claim-check writes only", op, key)
			return
		}
		u.use(deploy.ClaimCheckWrite)
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
		Work: recQueue{b.Work, u, deploy.WorkSend}, Bus: recBus{b.Bus, u},
		Deliveries: recQueue{b.Deliveries, u, ""}, Limiter: recLimiter{b.Limiter, u}, Sealer: recSealer{b.Sealer, u},
		Ping: func(ctx context.Context) error {
			u.use(deploy.RecordsRead) // a GetItem on DynamoDB
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
	r.u.use(deploy.RecordsRead)
	return r.Records.Get(ctx, key)
}

func (r recRecords) Query(ctx context.Context, q store.Query) (store.Page, error) {
	r.u.use(deploy.RecordsRead)
	return r.Records.Query(ctx, q)
}

func (r recRecords) Put(ctx context.Context, rec store.Record, c store.Cond) error {
	r.u.use(deploy.RecordsWrite)
	return r.Records.Put(ctx, rec, c)
}

func (r recRecords) Update(ctx context.Context, rec store.Record, c store.Cond) error {
	r.u.use(deploy.RecordsWrite)
	return r.Records.Update(ctx, rec, c)
}

func (r recRecords) Add(ctx context.Context, key store.Key, deltas map[string]int64, c store.Cond) (map[string]int64, error) {
	r.u.use(deploy.RecordsWrite)
	return r.Records.Add(ctx, key, deltas, c)
}

func (r recRecords) Delete(ctx context.Context, key store.Key, c store.Cond) error {
	r.u.use(deploy.RecordsWrite)
	return r.Records.Delete(ctx, key, c)
}

func (r recRecords) Transact(ctx context.Context, writes []store.Write) error {
	r.u.use(deploy.RecordsWrite)
	return r.Records.Transact(ctx, writes)
}

type recBlobs struct {
	store.Blobs
	u *usage
}

func (b recBlobs) Put(ctx context.Context, key string, r io.Reader) (int64, error) {
	b.u.blob("Put", deploy.FilesWrite, key)
	return b.Blobs.Put(ctx, key, r)
}

func (b recBlobs) Get(ctx context.Context, key string, offset, length int64) (io.ReadCloser, error) {
	b.u.blob("Get", deploy.FilesRead, key)
	return b.Blobs.Get(ctx, key, offset, length)
}

func (b recBlobs) Size(ctx context.Context, key string) (int64, error) {
	b.u.blob("Size", deploy.FilesRead, key)
	return b.Blobs.Size(ctx, key)
}

func (b recBlobs) Delete(ctx context.Context, key string) error {
	b.u.blob("Delete", deploy.FilesDelete, key)
	return b.Blobs.Delete(ctx, key)
}

// recQueue records sends as send (""; no function may send there), and any
// consumption as strange: consumers are workers, which declare a queue.
type recQueue struct {
	store.Queue
	u    *usage
	send deploy.Capability
}

func (q recQueue) Send(ctx context.Context, bodies ...[]byte) error {
	if q.send == "" {
		q.u.strange("Send to a queue no function sends to")
	} else {
		q.u.use(q.send)
	}
	return q.Queue.Send(ctx, bodies...)
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
	b.u.use(deploy.EventsPublish)
	return b.Bus.Publish(ctx, events...)
}

type recLimiter struct {
	store.Limiter
	u *usage
}

func (l recLimiter) Take(ctx context.Context, scope string, window time.Duration, limit, n int64) (store.Decision, error) {
	l.u.use(deploy.Limits)
	return l.Limiter.Take(ctx, scope, window, limit, n)
}

type recSealer struct {
	store.Sealer
	u *usage
}

func (s recSealer) Seal(ctx context.Context, plaintext []byte, encCtx map[string]string) ([]byte, error) {
	s.u.use(deploy.Seal)
	return s.Sealer.Seal(ctx, plaintext, encCtx)
}

func (s recSealer) Open(ctx context.Context, sealed []byte, encCtx map[string]string) ([]byte, error) {
	s.u.use(deploy.Seal)
	return s.Sealer.Open(ctx, sealed, encCtx)
}
