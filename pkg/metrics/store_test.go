package metrics_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	"github.com/sluice-gateway/sluice/pkg/gateway/gatewaytest"
	"github.com/sluice-gateway/sluice/pkg/metrics"
	"github.com/sluice-gateway/sluice/pkg/store"
	"github.com/sluice-gateway/sluice/pkg/store/local"
	"github.com/sluice-gateway/sluice/pkg/store/storetest"
)

// scrapeHandler reads m's /metrics as Prometheus would.
func scrapeHandler(t *testing.T, m *metrics.Metrics) map[string]*dto.MetricFamily {
	t.Helper()
	rec := httptest.NewRecorder()
	m.Handler().ServeHTTP(rec, httptest.NewRequest("GET", "/metrics", nil))
	p := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := p.TextToMetricFamilies(bytes.NewReader(rec.Body.Bytes()))
	if err != nil {
		t.Fatalf("parse /metrics: %v\n%s", err, rec.Body)
	}
	return fams
}

// TestStoreOperationsAreMeasured does known operations on each backend's
// real adapters and reads, from /metrics, one duration observation per
// operation and one error per failed operation, under its code.
func TestStoreOperationsAreMeasured(t *testing.T) {
	for _, b := range gatewaytest.Backends() {
		t.Run(b.Name, func(t *testing.T) {
			m := metrics.New(nil, metrics.Options{})
			st := m.Instrument(b.Open(t), b.Name)
			ctx := context.Background()
			key := store.Key{PK: "METRICS#" + t.Name(), SK: "A"}
			must := func(err error) {
				t.Helper()
				if err != nil {
					t.Fatal(err)
				}
			}
			must(st.Records.Put(ctx, store.Record{Key: key, Body: []byte(`{}`)}, store.Cond{Absent: true}))
			if _, err := st.Records.Get(ctx, key); err != nil {
				t.Fatal(err)
			}
			if _, err := st.Records.Get(ctx, store.Key{PK: key.PK, SK: "missing"}); !errors.Is(err, store.ErrNotFound) {
				t.Fatalf("get of a missing record: %v", err)
			}
			if err := st.Records.Put(ctx, store.Record{Key: key}, store.Cond{Absent: true}); !errors.Is(err, store.ErrConditionFailed) {
				t.Fatalf("put on an existing record with Absent: %v", err)
			}
			if _, err := st.Blobs.Put(ctx, "metrics/a", strings.NewReader("abc")); err != nil {
				t.Fatal(err)
			}
			if _, err := st.Blobs.Size(ctx, "metrics/missing"); !errors.Is(err, store.ErrNotFound) {
				t.Fatalf("size of a missing blob: %v", err)
			}
			must(st.Work.Send(ctx, []byte("one"), []byte("two")))
			if _, err := st.Limiter.Take(ctx, "metrics-scope", time.Minute, store.Take{Counter: "rpm", Limit: 10, N: 1}); err != nil {
				t.Fatal(err)
			}
			must(st.Bus.Publish(ctx, store.Event{Body: []byte("{}")}))

			fams := scrapeHandler(t, m)
			op := func(s, o string) map[string]string {
				return map[string]string{"backend": b.Name, "store": s, "operation": o}
			}
			with := func(l map[string]string, code string) map[string]string {
				l["code"] = code
				return l
			}
			for _, mv := range []movement{
				{"sluice_store_operation_duration_seconds", op("records", "put"), 2},
				{"sluice_store_operation_duration_seconds", op("records", "get"), 2},
				{"sluice_store_operation_duration_seconds", op("records", "query"), 0},
				{"sluice_store_operation_duration_seconds", op("blobs", "put"), 1},
				{"sluice_store_operation_duration_seconds", op("blobs", "size"), 1},
				{"sluice_store_operation_duration_seconds", op("work_queue", "send"), 1},
				{"sluice_store_operation_duration_seconds", op("limiter", "take"), 1},
				{"sluice_store_operation_duration_seconds", op("bus", "publish"), 1},
				{"sluice_store_errors_total", with(op("records", "get"), "not_found"), 1},
				{"sluice_store_errors_total", with(op("records", "put"), "condition_failed"), 1},
				{"sluice_store_errors_total", with(op("blobs", "size"), "not_found"), 1},
				{"sluice_store_errors_total", map[string]string{"code": "unavailable"}, 0},
				{"sluice_store_errors_total", map[string]string{"code": "error"}, 0},
			} {
				if got := value(fams, mv.name, mv.labels); got != mv.delta {
					t.Errorf("%s%v = %v, want %v", mv.name, mv.labels, got, mv.delta)
				}
			}
			// Label values are the fixed sets: 8 stores, their operations.
			for _, f := range []string{"sluice_store_operation_duration_seconds", "sluice_store_errors_total"} {
				for _, s := range fams[f].GetMetric() {
					for _, l := range s.GetLabel() {
						if l.GetName() == "backend" && l.GetValue() != b.Name {
							t.Errorf("%s has backend %q", f, l.GetValue())
						}
					}
				}
			}
		})
	}
}

// TestAStoreFaultIsCountedAsOne: an operation on a closed store fails with
// no sentinel of the store package: code "error", a fault — which a
// scheduled job's FlushFaults writes, where calls that went well are not.
func TestAStoreFaultIsCountedAsOne(t *testing.T) {
	db, err := local.OpenDB(t.TempDir() + "/sluice.db")
	if err != nil {
		t.Fatal(err)
	}
	recs, err := local.NewRecords(db)
	if err != nil {
		t.Fatal(err)
	}
	var emf bytes.Buffer
	m := metrics.New(nil, metrics.Options{EMF: &emf, Namespace: "sluice/test"})
	st := m.Instrument(&store.Backend{Records: recs}, "local")
	// A scheduled job's invocation whose calls went well writes nothing.
	if _, err := st.Records.Get(context.Background(), store.Key{PK: "A", SK: "B"}); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("get of a missing record: %v", err)
	}
	m.FlushFaults()
	if emf.Len() != 0 {
		t.Fatalf("FlushFaults wrote a line without a fault: %s", emf.String())
	}
	db.Close()
	if _, err := st.Records.Get(context.Background(), store.Key{PK: "A", SK: "B"}); err == nil {
		t.Fatal("a get on a closed store succeeded")
	}
	m.FlushFaults()
	fams := scrapeHandler(t, m)
	if got := value(fams, "sluice_store_errors_total", map[string]string{"store": "records", "operation": "get", "code": "error"}); got != 1 {
		t.Errorf("errors with code error = %v, want 1", got)
	}
	if !strings.Contains(emf.String(), `"StoreErrors":1`) {
		t.Errorf("the EMF line does not count the fault: %s", emf.String())
	}
}

// TestInstrumentedStoresPassTheConformanceSuites: the instruments change
// nothing a caller sees (the local adapters under them, each suite as the
// adapters run it).
func TestInstrumentedStoresPassTheConformanceSuites(t *testing.T) {
	m := metrics.New(nil, metrics.Options{})
	wrap := func(b *store.Backend) *store.Backend { return m.Instrument(b, "local") }
	openDB := func(t *testing.T) *local.DB {
		db, err := local.OpenDB(t.TempDir() + "/sluice.db")
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { db.Close() })
		return db
	}
	t.Run("records", func(t *testing.T) {
		storetest.Records(t, func(t *testing.T) store.Records {
			r, err := local.NewRecords(openDB(t))
			if err != nil {
				t.Fatal(err)
			}
			return wrap(&store.Backend{Records: r}).Records
		})
	})
	t.Run("queue", func(t *testing.T) {
		storetest.Queue(t, func(t *testing.T, cfg storetest.QueueConfig) (store.Queue, store.Queue) {
			db := openDB(t)
			dead, err := local.NewQueue(db, "dead", local.QueueOptions{}, nil)
			if err != nil {
				t.Fatal(err)
			}
			q, err := local.NewQueue(db, "q", local.QueueOptions{Visibility: cfg.Visibility, MaxReceives: cfg.MaxReceives}, dead)
			if err != nil {
				t.Fatal(err)
			}
			w := wrap(&store.Backend{Work: q, DeliveryDeadLetters: dead})
			return w.Work, w.DeliveryDeadLetters
		})
	})
	t.Run("limiter", func(t *testing.T) {
		storetest.Limiter(t, func(*testing.T) store.Limiter { return wrap(&store.Backend{Limiter: local.NewLimiter()}).Limiter })
	})
}

// TestStoreEMFLinesCarryEveryDuration: in a Lambda function the store
// operations of an invocation go out as one EMF line when it ends
// (Flush), each duration a value; a store's 100th value sends the line
// early, as EMF allows no more.
func TestStoreEMFLinesCarryEveryDuration(t *testing.T) {
	var emf bytes.Buffer
	m := metrics.New(nil, metrics.Options{EMF: &emf, Namespace: "sluice/test"})
	b, err := local.Open(t.TempDir(), local.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { b.Close() })
	st := m.Instrument(b, "local")
	ctx := context.Background()
	for range 130 {
		st.Records.Get(ctx, store.Key{PK: "A", SK: "B"})
	}
	st.Limiter.Take(ctx, "s", time.Minute, store.Take{Counter: "rpm", Limit: 10, N: 1})
	m.Flush()
	m.Flush() // nothing left: no line
	lines := strings.Split(strings.TrimSpace(emf.String()), "\n")
	if len(lines) != 2 {
		t.Fatalf("%d EMF lines, want 2:\n%s", len(lines), emf.String())
	}
	if !strings.Contains(lines[0], `"StoreRecordsDuration":[`) || strings.Contains(lines[0], "StoreLimiterDuration") ||
		!strings.Contains(lines[1], `"StoreLimiterDuration":[`) || !strings.Contains(lines[1], `"StoreRecordsDuration":[`) {
		t.Errorf("lines:\n%s", emf.String())
	}
	for i, want := range []int{100, 30} {
		if got := valuesOf(t, lines[i], "StoreRecordsDuration"); got != want {
			t.Errorf("line %d carries %d records durations, want %d", i, got, want)
		}
	}
	if !strings.Contains(lines[0], `"StoreErrors":0`) {
		t.Errorf("not-found gets counted as faults: %s", lines[0])
	}
}

// valuesOf is how many values metric name has in an EMF line.
func valuesOf(t *testing.T, line, name string) int {
	t.Helper()
	var doc map[string]any
	if err := json.Unmarshal([]byte(line), &doc); err != nil {
		t.Fatalf("EMF line is not JSON: %v", err)
	}
	v, _ := doc[name].([]any)
	return len(v)
}

// TestLinesWaitingEMFSkipsIdleZeros: the sweep's gauge line is written
// while lines wait and once when they reach 0, then not while it stays 0.
func TestLinesWaitingEMFSkipsIdleZeros(t *testing.T) {
	var emf bytes.Buffer
	m := metrics.New(nil, metrics.Options{EMF: &emf, Namespace: "sluice/test"})
	var n int64
	m.WatchBatchLinesWaiting(func(context.Context) (int64, error) { return n, nil })
	var lines []string
	for _, v := range []int64{0, 3, 0, 0, 2} {
		n = v
		emf.Reset()
		m.EmitGauges(context.Background())
		lines = append(lines, strings.TrimSpace(emf.String()))
	}
	for i, want := range []string{"", `"BatchLinesWaiting":3`, `"BatchLinesWaiting":0`, "", `"BatchLinesWaiting":2`} {
		if (want == "") != (lines[i] == "") || !strings.Contains(lines[i], want) {
			t.Errorf("emit %d wrote %q, want a line with %q", i, lines[i], want)
		}
	}
}

// BenchmarkInstrumentedLimiter measures what the instruments add to a
// store call: the local limiter's Take (in memory, the cheapest call a
// request makes) bare and instrumented.
func BenchmarkInstrumentedLimiter(b *testing.B) {
	ctx := context.Background()
	for _, bc := range []struct {
		name string
		wrap func(store.Limiter) store.Limiter
	}{
		{"bare", func(l store.Limiter) store.Limiter { return l }},
		{"instrumented", func(l store.Limiter) store.Limiter {
			return metrics.New(nil, metrics.Options{}).Instrument(&store.Backend{Limiter: l}, "local").Limiter
		}},
	} {
		b.Run(bc.name, func(b *testing.B) {
			l := bc.wrap(local.NewLimiter())
			b.ReportAllocs()
			for b.Loop() {
				l.Take(ctx, "scope", time.Minute, store.Take{Counter: "rpm", Limit: 1 << 62, N: 1})
			}
		})
	}
}
