// Command delivery measures the callback delivery path on the embedded
// backend: log events published on the bus, consumed from the durable
// delivery queue by the callback-delivery job's workers (store.Consume, the
// same handler as the Lambda function's) and delivered to a Langfuse
// ingestion endpoint — the bench upstream's sink — in batched requests.
// With -producers, that many goroutines emit the events through the
// emitter as concurrent model calls do (each waiting for its publish), so
// the emitter groups them as it does under load, and the figure covers
// publishing too; with -per-message, the events are on the queue before the
// clock starts, that many a message (1: the emitter's least grouping). It
// prints one JSON object: events, seconds, events per second, destination
// requests, CPU per event (this process's: the sink's is not counted).
// With -upstream instead of -sink, it starts that bench upstream binary on
// a free loopback port as its sink, and stops it at the end (make
// bench-delivery).
//
//	delivery -sink http://127.0.0.1:8090 -events 20000 -producers 32
//	delivery -upstream .bench/bin/upstream -events 20000 -per-message 1
package main

import (
	"bufio"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"runtime/pprof"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/sluice-gateway/sluice/pkg/callbacks"
	"github.com/sluice-gateway/sluice/pkg/callbacks/delivery"
	"github.com/sluice-gateway/sluice/pkg/handoff"
	"github.com/sluice-gateway/sluice/pkg/logevent"
	"github.com/sluice-gateway/sluice/pkg/server"
	"github.com/sluice-gateway/sluice/pkg/store"
	"github.com/sluice-gateway/sluice/pkg/store/local"
)

type result struct {
	Events          int     `json:"events"`
	Producers       int     `json:"producers,omitempty"`
	PerMessage      int     `json:"events_per_message,omitempty"`
	Workers         int     `json:"workers"`
	Seconds         float64 `json:"seconds"`
	EventsPerSecond float64 `json:"events_per_second"`
	Requests        int64   `json:"destination_requests"`
	CPUPerEventUS   float64 `json:"cpu_per_event_us"`
	// Target is issue 16's: the delivery path sustains 5,000 events/s to a
	// local destination.
	Target float64 `json:"target_events_per_second"`
	Pass   bool    `json:"pass"`
}

const targetEventsPerSecond = 5000

func main() {
	sink := flag.String("sink", "", "base URL of a Langfuse ingestion endpoint (the bench upstream)")
	upstream := flag.String("upstream", "", "without -sink: the bench upstream binary to start as the sink")
	events := flag.Int("events", 20000, "log events to deliver")
	producers := flag.Int("producers", 0, "goroutines emitting the events through the emitter (0: preload -per-message)")
	perMessage := flag.Int("per-message", 1, "without -producers: log events per bus message")
	timeout := flag.Duration("timeout", 2*time.Minute, "longest the delivery may take")
	cpuProfile := flag.String("cpuprofile", "", "write a CPU profile of the run to this file")
	flag.Parse()
	if *cpuProfile != "" {
		f, err := os.Create(*cpuProfile)
		if err == nil {
			err = pprof.StartCPUProfile(f)
		}
		if err != nil {
			fmt.Fprintln(os.Stderr, "delivery:", err)
			os.Exit(1)
		}
		defer pprof.StopCPUProfile()
	}
	if err := runWithSink(*sink, *upstream, *events, *producers, *perMessage, *timeout); err != nil {
		pprof.StopCPUProfile()
		fmt.Fprintln(os.Stderr, "delivery:", err)
		os.Exit(1)
	}
}

// runWithSink runs the benchmark against sink, or against upstream started
// for it (and stopped before it returns).
func runWithSink(sink, upstream string, n, producers, perMessage int, timeout time.Duration) error {
	if sink == "" && upstream != "" {
		url, stop, err := startUpstream(upstream)
		if err != nil {
			return err
		}
		defer stop()
		sink = url
	}
	return run(sink, n, producers, perMessage, timeout)
}

// startUpstream starts the bench upstream on a free loopback port and
// returns its URL (the first line it prints) and a function that stops it.
func startUpstream(bin string) (url string, stop func(), err error) {
	cmd := exec.Command(bin, "-addr", "127.0.0.1:0")
	cmd.Stderr = os.Stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		return "", nil, err
	}
	if err := cmd.Start(); err != nil {
		return "", nil, fmt.Errorf("start %s: %w", bin, err)
	}
	stop = func() {
		cmd.Process.Signal(os.Interrupt)
		cmd.Wait()
	}
	line, err := bufio.NewReader(out).ReadString('\n')
	const prefix = "upstream listening on "
	if err != nil || !strings.HasPrefix(line, prefix) {
		stop()
		return "", nil, fmt.Errorf("%s printed %q (%v), want %q<url>", bin, line, err, prefix)
	}
	return strings.TrimSpace(strings.TrimPrefix(line, prefix)), stop, nil
}

func run(sink string, n, producers, perMessage int, timeout time.Duration) error {
	if sink == "" || n < 1 || perMessage < 1 || perMessage > logevent.MaxEventsPerMessage {
		return fmt.Errorf("want -sink (or -upstream), -events ≥ 1 and 1 ≤ -per-message ≤ %d", logevent.MaxEventsPerMessage)
	}
	dir, err := os.MkdirTemp("", "sluice-delivery-bench-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	b, err := local.Open(dir, local.Options{Deliveries: local.QueueOptions{Visibility: local.DeliveryVisibility}})
	if err != nil {
		return err
	}
	defer b.Close()
	gateway := []callbacks.Callback{{Name: callbacks.Langfuse, Type: callbacks.TypeSuccessAndFailure, Gateway: true,
		Vars: map[string]string{callbacks.VarLangfusePublicKey: "pk-lf-bench", callbacks.VarLangfuseSecretKey: "sk-lf-bench", callbacks.VarLangfuseHost: sink}}}
	catalog := callbacks.NewCatalog(b.Records, b.Sealer, callbacks.CatalogOptions{TTL: time.Minute, Gateway: gateway})
	d, err := delivery.New(delivery.Deps{Catalog: catalog, Records: b.Records, Blobs: b.Blobs, DeadLetters: b.DeliveryDeadLetters,
		Open: delivery.NewOpener(delivery.OpenerDeps{GatewayClient: callbacks.GatewayClient()})}, delivery.Options{})
	if err != nil {
		return err
	}
	job, ok := server.LookupJob("callback-delivery")
	if !ok {
		return fmt.Errorf("no callback-delivery job")
	}
	ctx := context.Background()
	if producers == 0 {
		if err := publish(ctx, b.Bus, n, perMessage); err != nil {
			return err
		}
	} else {
		perMessage = 0
	}

	cpu0 := cpuTime()
	start := time.Now()
	cctx, stop := context.WithTimeout(ctx, timeout)
	defer stop()
	done := make(chan error, 1)
	go func() { done <- store.Consume(cctx, b.Deliveries, job.Workers, d.Handle) }()
	if producers > 0 {
		// As the local process wires it (functions/local, gateway.RunJob):
		// the events reach the delivery job in memory, the queue keeps the
		// durable copy.
		bus := handoff.Wrap(b.Bus)
		if h, ok := bus.(*handoff.Bus); ok {
			h.Attach(d.HandleEvents, job.Workers)
		}
		emitter := logevent.NewEmitter(bus, b.Blobs, catalog, 200<<10)
		var next atomic.Int64
		var wg sync.WaitGroup
		for range producers {
			wg.Go(func() {
				for i := next.Add(1) - 1; i < int64(n); i = next.Add(1) - 1 {
					emitter.Emit(cctx, event(int(i)))
				}
			})
		}
		wg.Wait()
		defer emitter.Drain(context.Background())
	}
	s := d.Stats()
	for s.Delivered.Load() < int64(n) && cctx.Err() == nil {
		time.Sleep(time.Millisecond)
	}
	elapsed := time.Since(start)
	cpu := cpuTime() - cpu0
	stop()
	<-done
	if got := s.Delivered.Load(); got < int64(n) {
		return fmt.Errorf("%d of %d events delivered within %s (dead-lettered %d)", got, n, timeout, s.DeadLettered.Load())
	}
	return json.NewEncoder(os.Stdout).Encode(result{
		Events: n, Producers: producers, PerMessage: perMessage, Workers: job.Workers, Seconds: elapsed.Seconds(),
		EventsPerSecond: float64(n) / elapsed.Seconds(), Requests: s.Requests.Load(),
		CPUPerEventUS: float64(cpu.Microseconds()) / float64(n),
		Target:        targetEventsPerSecond, Pass: float64(n)/elapsed.Seconds() >= targetEventsPerSecond,
	})
}

// publish puts n embeddings log events on the bus, perMessage a message.
func publish(ctx context.Context, bus store.Bus, n, perMessage int) error {
	var batch []store.Event
	for i := 0; i < n; i += perMessage {
		var evs []*logevent.Event
		for k := i; k < min(i+perMessage, n); k++ {
			evs = append(evs, event(k))
		}
		body, err := logevent.EncodeEvents(evs)
		if err != nil {
			return err
		}
		batch = append(batch, store.Event{Attributes: map[string]string{logevent.AttrTeam: "team-bench", logevent.AttrStatus: logevent.StatusSuccess}, Body: body})
		if len(batch) == 100 {
			if err := bus.Publish(ctx, batch...); err != nil {
				return err
			}
			batch = nil
		}
	}
	return bus.Publish(ctx, batch...)
}

// event is an embeddings call's log event, as sluice emits it.
func event(i int) *logevent.Event {
	id := fmt.Sprintf("req_bench%015d", i)
	start := time.Now()
	ev := &logevent.Event{ID: id, TraceID: id, CallType: logevent.CallEmbedding, Status: logevent.StatusSuccess,
		CustomLLMProvider: "openai", Model: "text-embedding-3-small", ModelGroup: "text-embedding-3-small",
		APIBase: "http://127.0.0.1:8090/v1", PromptTokens: 27, TotalTokens: 27, RequestTags: []string{},
		Metadata: logevent.Metadata{UserAPIKeyHash: "3f9a1c6e0b7d4e2a9c5f8b1d6e3a7c0f4b9d2e5a8c1f6b3d0e7a4c9f2b5d8e1a",
			UserAPIKeyAlias: "bench", UserAPIKeyTeamID: "team-bench", RequestID: id},
		Messages: json.RawMessage(`"The quick brown fox jumps over the lazy dog. The quick brown fox jumps over the lazy dog."`),
		Response: json.RawMessage(`{"object":"list","model":"text-embedding-3-small","data":[{"object":"embedding","index":0,"embedding":"[1536 floats]"}],"usage":{"prompt_tokens":27,"total_tokens":27}}`),
	}
	ev.SetTimes(start, time.Time{}, start.Add(20*time.Millisecond))
	return ev
}

// cpuTime is the process's user and system CPU time.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
