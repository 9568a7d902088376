package metrics

import (
	"context"
	"log/slog"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// gaugeTimeout bounds a scrape's read of a gauge's source.
const gaugeTimeout = 5 * time.Second

var linesWaitingDesc = prometheus.NewDesc("sluice_batch_lines_waiting",
	"Lines of running batches not yet done or failed (each in_progress batch's request_counts total less completed and failed), read from the store at each scrape.", nil, nil)

// linesWaiting is the batch lines-waiting gauge: a collector that reads its
// source when scraped, so the value is the store's, not a copy to keep in
// step.
type linesWaiting struct {
	mu   sync.Mutex
	read func(context.Context) (int64, error)
	// emitted is the last value EmitGauges wrote.
	emitted int64
}

func (g *linesWaiting) Describe(ch chan<- *prometheus.Desc) { ch <- linesWaitingDesc }

func (g *linesWaiting) Collect(ch chan<- prometheus.Metric) {
	g.mu.Lock()
	read := g.read
	g.mu.Unlock()
	if read == nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), gaugeTimeout)
	defer cancel()
	n, err := read(ctx)
	if err != nil {
		// The scrape goes on without the gauge: a store that does not
		// answer shows in sluice_store_errors_total.
		slog.Warn("metrics: batch lines waiting not read", "error", err)
		return
	}
	ch <- prometheus.MustNewConstMetric(linesWaitingDesc, prometheus.GaugeValue, float64(n))
}

// WatchBatchLinesWaiting has the lines-waiting gauge read by waiting
// (batches.Service.LinesWaiting): at each scrape of /metrics, and, in a
// Lambda function, at each EmitGauges.
func (m *Metrics) WatchBatchLinesWaiting(waiting func(context.Context) (int64, error)) {
	if m == nil {
		return
	}
	m.waiting.mu.Lock()
	defer m.waiting.mu.Unlock()
	m.waiting.read = waiting
}

// EmitGauges writes the gauges as an EMF line (BatchLinesWaiting), where
// no one scrapes: the batch-sweeper calls it on each run (every 5 minutes
// in the cloud). Without EMF, or with nothing watched, it does nothing. A
// 0 after a 0 is not written: an idle stack then publishes no metric
// (CloudWatch bills a custom metric for every hour it receives data), and
// the backlog alarm treats the missing data as no backlog.
func (m *Metrics) EmitGauges(ctx context.Context) {
	if m == nil || m.emf == nil {
		return
	}
	m.waiting.mu.Lock()
	read := m.waiting.read
	m.waiting.mu.Unlock()
	if read == nil {
		return
	}
	n, err := read(ctx)
	if err != nil {
		slog.WarnContext(ctx, "metrics: batch lines waiting not read", "error", err)
		return
	}
	m.waiting.mu.Lock()
	quiet := n == 0 && m.waiting.emitted == 0
	m.waiting.emitted = n
	m.waiting.mu.Unlock()
	if quiet {
		return
	}
	l := m.emf.line([][]string{{}})
	l.metric("BatchLinesWaiting", unitCount, float64(n))
	l.write()
}
