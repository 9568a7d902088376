package batches_test

import (
	"context"
	"math"
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/sqs"
	sqstypes "github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"github.com/sluice-gateway/sluice/pkg/batches"
	"github.com/sluice-gateway/sluice/pkg/config"
	"github.com/sluice-gateway/sluice/pkg/gateway/gatewaytest"
	"github.com/sluice-gateway/sluice/pkg/store"
	awsstore "github.com/sluice-gateway/sluice/pkg/store/aws"
	"github.com/sluice-gateway/sluice/pkg/store/aws/awstest"
	"github.com/sluice-gateway/sluice/pkg/store/local"
)

// deadRun is a batch worker running in a process of its own (the test
// binary as a sluice process, startProcess), to be killed with SIGKILL:
// front serves the test's requests while it runs, takeOver opens the
// store in this process once it is dead and runs the jobs there.
type deadRun struct {
	child    *process
	front    *gatewaytest.Gateway
	takeOver func(t *testing.T) *gatewaytest.Gateway
}

// deadRunOptions are the in-process gateway's: the process's chunks and
// lease, no jobs until the take-over starts them.
func deadRunOptions(u *upstream) gatewaytest.Options {
	opts := options(u, func(o *batches.Options) { o.Lease, o.ProgressEvery = processLease, 50*time.Millisecond })
	opts.Jobs = nil
	return opts
}

// startDeadRun starts the process on backend b's store. Local: the process
// is the only one on its data dir (bbolt's lock) and serves the requests;
// once it is killed this process opens the dir. AWS: this process serves
// the requests on the same resources all along, and its jobs start once
// the other process is killed.
func startDeadRun(t *testing.T, b gatewaytest.Backend, u *upstream) deadRun {
	configPath := filepath.Join(t.TempDir(), "sluice.yaml")
	if err := os.WriteFile(configPath, []byte(modelConfig(u)), 0o600); err != nil {
		t.Fatal(err)
	}
	master := "sk-batches-dead-run-test-master-key"
	dir := t.TempDir()
	jobs := func(t *testing.T, g *gatewaytest.Gateway) *gatewaytest.Gateway {
		for _, j := range []string{"batch-worker", "callback-delivery"} {
			gatewaytest.RunJob(t, g.Services, j)
		}
		return g
	}
	if b.Name == config.BackendLocal {
		p := startProcess(t, dir, configPath, master)
		return deadRun{child: p, front: gatewaytest.Connect(t, p.url, master), takeOver: func(t *testing.T) *gatewaytest.Gateway {
			open := gatewaytest.Backend{Name: config.BackendLocal, Open: func(t testing.TB) *store.Backend {
				b, err := local.Open(dir, local.Options{})
				if err != nil {
					t.Fatalf("open the dead process's data dir: %v", err)
				}
				t.Cleanup(func() { b.Close() })
				return b
			}}
			return jobs(t, gatewaytest.Start(t, open, deadRunOptions(u)))
		}}
	}
	var env []string // the resources', for the process
	shared := gatewaytest.Backend{Name: config.BackendAWS, Open: func(t testing.TB) *store.Backend {
		cfg, res := awstest.Resources(t)
		// A receive the killed process had waiting at SQS takes the next
		// message all the same, hidden then for the queue's visibility (90
		// and 5 minutes): shortened, as the lease is.
		q := sqs.NewFromConfig(cfg)
		for _, url := range []string{res.WorkQueueURL, res.DeliveryQueueURL} {
			if _, err := q.SetQueueAttributes(context.Background(), &sqs.SetQueueAttributesInput{QueueUrl: &url,
				Attributes: map[string]string{string(sqstypes.QueueAttributeNameVisibilityTimeout): "5"}}); err != nil {
				t.Fatal(err)
			}
		}
		env = res.Env()
		b, err := awsstore.Open(context.Background(), cfg, res)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { b.Close() })
		return b
	}}
	g := gatewaytest.Start(t, shared, deadRunOptions(u))
	env = append(env, "SLUICE_BACKEND=aws", "AWS_ENDPOINT_URL="+os.Getenv(awstest.EndpointEnv),
		"AWS_ACCESS_KEY_ID=test", "AWS_SECRET_ACCESS_KEY=test", "AWS_REGION=us-east-1")
	p := startProcess(t, dir, configPath, master, env...)
	return deadRun{child: p, front: g, takeOver: func(t *testing.T) *gatewaytest.Gateway { return jobs(t, g) }}
}

// keySpend is what key has spent, as /key/info shows it.
func keySpend(t *testing.T, g *gatewaytest.Gateway, key string) float64 {
	t.Helper()
	r := g.Do("GET", "/key/info", key, nil)
	if r.Status != 200 {
		t.Fatalf("key info: %d %s", r.Status, r.Body)
	}
	v, _ := r.JSON(t)["info"].(map[string]any)["spend"].(float64)
	return v
}

// untilSpend waits for key's spend to be want (its counters are flushed
// within 5 s of a call), then for a second more, in which it must not
// move: nothing counted twice later.
func untilSpend(t *testing.T, g *gatewaytest.Gateway, key string, want float64) {
	t.Helper()
	same := func(v float64) bool { return math.Abs(v-want) <= 1e-12 }
	deadline := time.Now().Add(15 * time.Second)
	for v := keySpend(t, g, key); !same(v); v = keySpend(t, g, key) {
		if time.Now().After(deadline) {
			t.Fatalf("the key's spend is %v, want %v", v, want)
		}
		time.Sleep(50 * time.Millisecond)
	}
	time.Sleep(time.Second)
	if v := keySpend(t, g, key); !same(v) {
		t.Fatalf("the key's spend moved to %v after it reached %v", v, want)
	}
}

// A batch worker's process killed (SIGKILL) while a chunk runs, after it
// showed two of the chunk's lines done — giving back their shares of the
// batch's reservation — and while its third is at the provider; another
// chunk committed. The run that takes the chunk over once the dead
// process's lease is void (local: the dir's lock says the process is gone)
// or has run out (AWS: the message's visibility and the lease lapse) takes
// those shares back and runs the chunk again: each line's share is given
// back once, the batch's end releases exactly what is left (a share given
// back twice or never would leave the key's reservation off 0), no
// committed line reaches the provider again, the batch's cost counts each
// line once, and the key's spend counts each answer the provider gave once.
func TestADeadRunsSharesAreTakenBackAndTheRestReleasedOnce(t *testing.T) {
	for _, backend := range gatewaytest.Backends() {
		t.Run(backend.Name, func(t *testing.T) {
			u := newUpstream(t)
			run := startDeadRun(t, backend, u)
			g := run.front
			key := g.NewKey(g.NewTeam(nil), map[string]any{"max_budget": 1.0})
			lines := embeddingLines("emb", "l", 6, func(i int) string { return "dead run line " + strconv.Itoa(i) })
			lines[5].Body["input"] = "block 5" // chunk 1's third line stays at the provider
			b := createBatch(t, g, key, uploadInput(t, g, key, jsonl(lines)))
			if b.ReservedCost == nil || *b.ReservedCost <= 0 {
				t.Fatalf("created batch reserves %v, want its estimate", b.ReservedCost)
			}
			whole := *b.ReservedCost

			select {
			case <-u.blocked:
			case <-time.After(20 * time.Second):
				t.Fatal("the process did not reach the batch's last line")
			}
			// Chunk 0 committed, chunk 1 showed its two lines: the store
			// says 5 lines done, 5 shares given back, and the key's spend
			// has the 5 answers (counted before the kill, so that what the
			// dead process counted is known).
			var shown batches.Batch
			for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(20 * time.Millisecond) {
				shown = getBatch(t, g, key, b.ID)
				if shown.RequestCounts.Completed == 5 {
					break
				}
				if time.Now().After(deadline) {
					t.Fatalf("the running batch shows %+v, want 5 lines done", shown.RequestCounts)
				}
			}
			if shown.ReservedCost == nil || *shown.ReservedCost >= whole || *shown.ReservedCost <= 0 {
				t.Fatalf("with 5 of 6 lines shown done, the batch reserves %v of %v", shown.ReservedCost, whole)
			}
			answer := shown.ResponseCost / 5 // what one line costs
			if answer <= 0 {
				t.Fatalf("5 lines shown done cost %v", shown.ResponseCost)
			}
			untilSpend(t, g, key, 5*answer)

			run.child.kill()
			u.open()
			g = run.takeOver(t)
			if got := reservedOf(t, g, key); math.Abs(got-*shown.ReservedCost) > 1e-12 {
				t.Fatalf("the dead process left %v reserved, want the %v its batch showed", got, *shown.ReservedCost)
			}

			b = waitFor(t, g, key, b.ID, batches.StatusCompleted)
			if b.RequestCounts != (batches.RequestCounts{Total: 6, Completed: 6}) {
				t.Errorf("%+v", b.RequestCounts)
			}
			collect(t, g, key, b, lines)
			if b.ReservedCost != nil {
				t.Errorf("the ended batch still reserves %v", *b.ReservedCost)
			}
			if got := reservedOf(t, g, key); got != 0 {
				t.Errorf("%v still reserved once the batch ended, want 0", got)
			}
			if math.Abs(b.ResponseCost-6*answer) > 1e-12 {
				t.Errorf("the batch's cost is %v, want its 6 lines' %v", b.ResponseCost, 6*answer)
			}
			// Chunk 0's lines were committed: never called again. Chunk
			// 1's ran again — the two the dead run had answered too.
			for i, l := range lines {
				want := 1
				if i >= 3 {
					want = 2
				}
				if n := u.calls(l.Body["input"].(string)); n != want {
					t.Errorf("%s: %d provider calls, want %d", l.CustomID, n, want)
				}
			}
			// 8 answers: the dead run's 5 and the new run's 3; the call
			// the kill cut off answered nothing.
			untilSpend(t, g, key, 8*answer)
		})
	}
}
